//! Answering a server's input requests (MRTR, M-11…M-14): the handlers a client supplies.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolwire_protocol::{
    CreateMessageParams, CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult,
    ListRootsResult,
};

use crate::error::Result;

pub(crate) type ElicitHandler =
    Arc<dyn Fn(ElicitRequestParams) -> BoxFuture<'static, Result<ElicitResult>> + Send + Sync>;
pub(crate) type SampleHandler = Arc<
    dyn Fn(CreateMessageParams) -> BoxFuture<'static, Result<CreateMessageResult>> + Send + Sync,
>;
pub(crate) type RootsHandler =
    Arc<dyn Fn() -> BoxFuture<'static, Result<ListRootsResult>> + Send + Sync>;

/// The handlers for input requests; a kind without a handler is neither declared nor answered.
#[derive(Clone, Default)]
pub(crate) struct InputHandlers {
    pub(crate) elicit: Option<ElicitHandler>,
    pub(crate) sample: Option<SampleHandler>,
    pub(crate) roots: Option<RootsHandler>,
}

impl std::fmt::Debug for InputHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputHandlers")
            .field("elicit", &self.elicit.is_some())
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
            crate::error::Error::Input(format!(
                "elicitation content must be an object of flat primitive values: {e}"
            ))
        })?;
    Ok(ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
    })
}
