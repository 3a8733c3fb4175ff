//! Answering a server's input requests (MRTR, M-11…M-14): the handlers a client supplies.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolwire_protocol::{
    CreateMessageParams, CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult,
    ElicitUrlParams, ListRootsResult,
};

use crate::error::{Error, Result};

/// What a handler of a legacy (2025-11-25) server's request is told about it, besides its
/// params: which of this client's requests it came during. Read it with [`Asked::current`]
/// from within the handler (the handler's own call and the future it returns).
///
/// Over HTTP such a request arrives on the response stream of the request it is about, so
/// `related` is that request's id; on stdio a request names none, so `related` is the id of
/// the one call in flight (`tools/call`, `prompts/get` or `resources/read`: lists and pings
/// do not count), and `None` when there are several or none. Requests on a legacy
/// session's standalone stream, and MRTR input requests (which come inside a result), have
/// `None`. [`CallOptions::on_request`](crate::CallOptions::on_request) tells a caller the ids
/// of its call's requests, each with its connection: request ids are a connection's own (a
/// new connection to the same server starts them again), so a relay matches a question to a
/// call by both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Asked {
    /// The id of the request of this client the server's request came during.
    pub related: Option<i64>,
    /// The connection the server's request came on ([`Client::connection`](crate::Client::connection)).
    pub connection: u64,
}

/// A request as it is sent: its connection and its id there
/// ([`CallOptions::on_request`](crate::CallOptions::on_request)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Sent {
    /// The connection it is sent on ([`Client::connection`](crate::Client::connection)).
    pub connection: u64,
    /// Its JSON-RPC id.
    pub id: i64,
}

impl Sent {
    /// The request `id` on `connection`.
    pub fn new(connection: u64, id: i64) -> Sent {
        Sent { connection, id }
    }
}

tokio::task_local! {
    static ASKED: Asked;
}

impl Asked {
    /// What the handler running now is told of the request it answers; the default (nothing
    /// related) outside a handler.
    pub fn current() -> Asked {
        ASKED.try_with(|asked| *asked).unwrap_or_default()
    }

    /// Runs `work` (a handler's answer) with `asked` as [`Asked::current`].
    pub(crate) async fn scoped<T>(asked: Asked, work: impl Future<Output = T>) -> T {
        ASKED.scope(asked, work).await
    }
}

pub(crate) type ElicitHandler =
    Arc<dyn Fn(ElicitRequestParams) -> BoxFuture<'static, Result<ElicitResult>> + Send + Sync>;
pub(crate) type ElicitUrlHandler =
    Arc<dyn Fn(ElicitUrlParams) -> BoxFuture<'static, Result<ElicitResult>> + Send + Sync>;
pub(crate) type SampleHandler = Arc<
    dyn Fn(CreateMessageParams) -> BoxFuture<'static, Result<CreateMessageResult>> + Send + Sync,
>;
pub(crate) type RootsHandler =
    Arc<dyn Fn() -> BoxFuture<'static, Result<ListRootsResult>> + Send + Sync>;

/// The handlers for input requests; a kind without a handler is neither declared nor answered.
/// Each elicitation mode has its own: form mode `elicit`, URL mode `elicit_url` (M-15, M-16).
#[derive(Clone, Default)]
pub(crate) struct InputHandlers {
    pub(crate) elicit: Option<ElicitHandler>,
    pub(crate) elicit_url: Option<ElicitUrlHandler>,
    pub(crate) sample: Option<SampleHandler>,
    pub(crate) roots: Option<RootsHandler>,
}

impl InputHandlers {
    /// Why an elicitation cannot be answered: its mode has no handler, so it was not declared
    /// (M-15). A URL in particular is never accepted by a handler that did not show it (M-16).
    pub(crate) fn undeclared(&self, params: &ElicitRequestParams) -> Option<Error> {
        match params {
            ElicitRequestParams::Url(url) if self.elicit_url.is_none() => {
                Some(Error::Input(format!(
                    "the server asked the user to open {:?}, but this client declared no URL-mode \
                     elicitation (M-15; see ClientBuilder::on_elicit_url)",
                    url.url
                )))
            }
            ElicitRequestParams::Form(_) if self.elicit.is_none() => Some(Error::Input(
                "the server asked for a form, but this client declared no form-mode elicitation \
                 (M-15; see ClientBuilder::on_elicit)"
                    .into(),
            )),
            _ => None,
        }
    }

    /// Answers an elicitation with the handler of its mode.
    pub(crate) async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult> {
        match (params, &self.elicit, &self.elicit_url) {
            (ElicitRequestParams::Url(url), _, Some(handler)) => handler(url).await,
            (form @ ElicitRequestParams::Form(_), Some(handler), _) => handler(form).await,
            (params, _, _) => Err(self
                .undeclared(&params)
                .unwrap_or_else(|| Error::Input("no handler for this elicitation".into()))),
        }
    }
}

impl std::fmt::Debug for InputHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputHandlers")
            .field("elicit", &self.elicit.is_some())
            .field("elicit_url", &self.elicit_url.is_some())
            .field("sample", &self.sample.is_some())
            .field("roots", &self.roots.is_some())
            .finish()
    }
}

pub(crate) fn elicit_handler<F, Fut>(f: F) -> ElicitHandler
where
    F: Fn(ElicitRequestParams) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ElicitResult>> + Send + 'static,
{
    Arc::new(move |p| Box::pin(f(p)))
}

pub(crate) fn elicit_url_handler<F, Fut>(f: F) -> ElicitUrlHandler
where
    F: Fn(ElicitUrlParams) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ElicitResult>> + Send + 'static,
{
    Arc::new(move |p| Box::pin(f(p)))
}

pub(crate) fn sample_handler<F, Fut>(f: F) -> SampleHandler
where
    F: Fn(CreateMessageParams) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CreateMessageResult>> + Send + 'static,
{
    Arc::new(move |p| Box::pin(f(p)))
}

pub(crate) fn roots_handler<F, Fut>(f: F) -> RootsHandler
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ListRootsResult>> + Send + 'static,
{
    Arc::new(move || Box::pin(f()))
}

/// A declined elicitation, for handlers that refuse.
pub fn declined() -> ElicitResult {
    ElicitResult {
        action: ElicitAction::Decline,
        content: None,
        meta: None,
    }
}

/// A cancelled elicitation (the user dismissed it).
pub fn cancelled() -> ElicitResult {
    ElicitResult {
        action: ElicitAction::Cancel,
        content: None,
        meta: None,
    }
}

/// An accepted elicitation whose form content is `content` (a struct or a JSON object of flat
/// primitive values, as the requested schema allows).
pub fn accepted(content: &impl serde::Serialize) -> Result<ElicitResult> {
    let content = serde_json::to_value(content)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            Error::Input(format!(
                "elicitation content must be an object of flat primitive values: {e}"
            ))
        })?;
    Ok(ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
    })
}
