//! Serving clients of the initialization-based revisions (2025-11-25 and earlier) from the same
//! tools, prompts and resources (2026-07-28 versioning, "Backward Compatibility with
//! Initialization-Based Versions").
//!
//! A legacy client starts with `initialize`; the transport keeps what it declared (a
//! [`SessionRecord`](crate::SessionRecord)) and runs each later request through the 2026-07-28 machinery with a `_meta`
//! made from the session. When a handler needs input, the server asks the client itself
//! (`elicitation/create`, `sampling/createMessage`, `roots/list` as server-to-client requests on
//! the request's stream), collects the answers and runs the handler again with them, so one
//! handler serves both eras and the request state never leaves the server. Results lose the
//! 2026-07-28 members an older client has no use for (`resultType`, `ttlMs`, `cacheScope`).
//!
//! Nothing here runs for a 2026-07-28 request: the transports only come here for `initialize`
//! without a 2026-07-28 `_meta`, for a stdio connection that initialized, and for HTTP requests
//! that carry `Mcp-Session-Id`.

mod notify;
mod peer;
mod reply;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::legacy::{
    InitializeParams, InitializeResult, METHOD_INITIALIZE, METHOD_PING, METHOD_SET_LEVEL,
    METHOD_SUBSCRIBE, METHOD_UNSUBSCRIBE, ResourceSubscriptionParams, SetLevelParams,
    negotiate_legacy_version,
};
use toolwire_protocol::methods::{
    CallTool, Complete, GetPrompt, ListPrompts, ListResourceTemplates, ListResources, ListTools,
    Method, ReadResource,
};
use toolwire_protocol::{ErrorObject, JsonObject, LoggingLevel, RequestId, RequestMeta};

pub(crate) use notify::notifications_for;
pub(crate) use peer::Peer;
use peer::Unanswered;
use reply::{Reply, read_reply};

use crate::request::context::{Logging, RequestContext};
use crate::request::frame::read_meta;
use crate::request::outbound::Outbound;
use crate::request::outcome::Final;
use crate::request::route::Route;
use crate::server::Server;
use crate::state::sessions::SessionRecord;

/// How many times one legacy request may ask the client for input before it is stopped.
const MAX_INPUT_ROUNDS: usize = 16;

/// The methods a legacy session runs through the 2026-07-28 machinery.
const SERVED: [&str; 8] = [
    ListTools::METHOD,
    CallTool::METHOD,
    ListPrompts::METHOD,
    GetPrompt::METHOD,
    ListResources::METHOD,
    ListResourceTemplates::METHOD,
    ReadResource::METHOD,
    Complete::METHOD,
];

/// What a legacy request asks for.
#[derive(Debug)]
pub(crate) enum LegacyStep {
    Initialize,
    Ping,
    SetLevel(LoggingLevel),
    Subscribe(String),
    Unsubscribe(String),
    /// One of [`SERVED`]: run with [`Server::run_legacy`].
    Served,
}

/// Whether an `initialize` request comes from a legacy client: a 2026-07-28 request carries
/// `_meta` with its version and gets -32601 instead (V-15).
pub(crate) fn is_legacy_initialize(method: &str, params: Option<&RawValue>) -> bool {
    method == METHOD_INITIALIZE && read_meta(params).is_err()
}

/// A fresh, unguessable session id: 256 random bits, URL-safe (visible ASCII, as 2025-11-25
/// requires of `Mcp-Session-Id`).
pub(crate) fn new_session_id() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// What a legacy request runs with.
pub(crate) struct LegacyCall {
    /// The session as it was when the request arrived.
    pub(crate) session: SessionRecord,
    /// The OAuth scopes of the caller's token; `None` without OAuth.
    pub(crate) scopes: Option<Arc<[String]>>,
    /// The claims of the caller's token; `None` without OAuth.
    pub(crate) claims: Option<crate::request::context::Claims>,
    /// The caller's access token, when handlers are to have it.
    pub(crate) token: Option<crate::request::context::AccessToken>,
    /// The client's address (HTTP), for rate limits.
    pub(crate) address: Option<crate::safety::limits::ClientId>,
    /// Where requests to the client are matched with their answers.
    pub(crate) peer: Arc<Peer>,
    /// The request's stream (stdio, or an SSE reply): its notifications and the server's
    /// requests to the client go here. `None` when the client cannot receive them.
    pub(crate) outbound: Option<Outbound>,
    pub(crate) cancel: CancellationToken,
    pub(crate) closing: CancellationToken,
}

/// Reads `initialize` params (-32602 when they are not what 2025-11-25 describes).
pub(crate) fn read_initialize(params: Option<&RawValue>) -> Result<InitializeParams, ErrorObject> {
    parse(METHOD_INITIALIZE, params)
}

/// The `{}` result of `ping`, `logging/setLevel` and the subscription methods.
pub(crate) fn empty_result(id: &RequestId) -> Final {
    Final::result(id, &JsonObject::new())
}

fn parse<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Option<&RawValue>,
) -> Result<T, ErrorObject> {
    serde_json::from_str(params.map_or("{}", RawValue::get))
        .map_err(|e| ErrorObject::invalid_params(format!("Invalid params for {method}: {e}")))
}

impl Server {
    /// Whether this server answers legacy clients (the default; see
    /// [`crate::ServerBuilder::modern_only`]).
    pub(crate) fn serves_legacy(&self) -> bool {
        self.config().legacy
    }

    /// Reads a legacy request: -32601 for a method this session cannot use (including
    /// `logging/setLevel` without the logging capability and subscriptions without resources),
    /// -32602 for params of the wrong shape.
    pub(crate) fn legacy_step(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<LegacyStep, ErrorObject> {
        let offers = self.offers();
        match method {
            METHOD_INITIALIZE => Ok(LegacyStep::Initialize),
            METHOD_PING => Ok(LegacyStep::Ping),
            METHOD_SET_LEVEL if self.config().logging == Logging::Declared => Ok(
                LegacyStep::SetLevel(parse::<SetLevelParams>(method, params)?.level),
            ),
            METHOD_SUBSCRIBE if offers.resources => Ok(LegacyStep::Subscribe(
                parse::<ResourceSubscriptionParams>(method, params)?.uri,
            )),
            METHOD_UNSUBSCRIBE if offers.resources => Ok(LegacyStep::Unsubscribe(
                parse::<ResourceSubscriptionParams>(method, params)?.uri,
            )),
            m if SERVED.contains(&m) => Ok(LegacyStep::Served),
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }

    /// The answer to a legacy `initialize`: the negotiated version, what the server offers
    /// (without the 2026-07-28 extensions), who it is and its instructions.
    pub(crate) fn initialize_result(&self, params: &InitializeParams) -> InitializeResult {
        let mut capabilities = self.offered_capabilities();
        capabilities.extensions = None;
        InitializeResult {
            protocol_version: negotiate_legacy_version(&params.protocol_version).to_owned(),
            capabilities,
            server_info: self.info().clone(),
            instructions: self.instructions().map(str::to_owned),
            extra: JsonObject::new(),
        }
    }

    /// Runs one of the [`SERVED`] methods for a legacy session to its final message (`None` if
    /// it was cancelled). Input requests are put to the client and the method runs again with
    /// the answers, at most [`MAX_INPUT_ROUNDS`] times.
    pub(crate) async fn run_legacy(
        &self,
        id: &RequestId,
        method: &str,
        params: Option<&RawValue>,
        call: LegacyCall,
    ) -> Option<Final> {
        let mut params = match params {
            Some(sent) if runs_as_sent(sent) => Params::Sent(sent),
            _ => match parse::<JsonObject>(method, params) {
                Ok(mut tree) => {
                    // Legacy clients do not speak MRTR: the rounds are the server's own.
                    tree.remove("inputResponses");
                    tree.remove("requestState");
                    Params::Tree(tree)
                }
                Err(error) => return Some(Final::error(Some(id), &error)),
            },
        };
        // Shared by every round's context, not copied into each.
        let meta = std::sync::Arc::new(legacy_meta(&call.session, params.meta()));
        for _ in 0..=MAX_INPUT_ROUNDS {
            let route = match params.route(method) {
                Ok(route) => route,
                Err(error) => return Some(Final::error(Some(id), &error)),
            };
            let ctx = RequestContext::new(
                id.clone(),
                meta.clone(),
                call.cancel.clone(),
                call.closing.clone(),
                call.outbound.clone(),
                self.config().logging,
            )
            .with_principal(call.session.principal.as_deref().map(Into::into))
            .with_scopes(call.scopes.clone())
            .with_claims(call.claims.clone())
            .with_token(call.token.clone())
            .with_transport(transport_of(call.address.is_some()))
            .with_address(call.address.clone());
            let finisher = ctx.clone();
            let done = self.run(id, route, ctx).await;
            finisher.finish().await;
            let done = done?;
            if done.error_code.is_some() {
                return Some(done);
            }
            match read_reply(&done.json) {
                None => return Some(done),
                Some(Reply::Complete(result)) => {
                    let mut answer = Final::result(id, &result);
                    answer.tool_error = done.tool_error;
                    return Some(answer);
                }
                Some(Reply::InputRequired { requests, state }) => {
                    let answers = match self.ask_client(&call, requests).await {
                        Ok(answers) => answers,
                        Err(error) => return Some(Final::error(Some(id), &error)),
                    };
                    let mut tree = match params.into_tree(method) {
                        Ok(tree) => tree,
                        Err(error) => return Some(Final::error(Some(id), &error)),
                    };
                    tree.insert("inputResponses".into(), Value::Object(answers));
                    match state {
                        Some(state) => tree.insert("requestState".into(), state),
                        None => tree.remove("requestState"),
                    };
                    params = Params::Tree(tree);
                }
            }
        }
        let error = ErrorObject::internal(format!(
            "{method} asked the client for input more than {MAX_INPUT_ROUNDS} times"
        ));
        Some(Final::error(Some(id), &error))
    }

    /// Puts each input request to the client, in key order, and collects the answers by key.
    async fn ask_client(
        &self,
        call: &LegacyCall,
        requests: JsonObject,
    ) -> Result<JsonObject, ErrorObject> {
        let Some(out) = &call.outbound else {
            return Err(ErrorObject::internal(
                "this request needs input from the client, which can only be asked on an event \
                 stream: accept text/event-stream",
            ));
        };
        // An answer that comes later than the sealed state lives would be refused anyway.
        let timeout = Duration::from_millis(self.request_state().ttl_ms);
        let mut answers = JsonObject::new();
        for (key, request) in requests {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let params = for_legacy_client(&method, request.get("params"));
            let answer = call
                .peer
                .ask(out, &method, &params, &call.cancel, timeout)
                .await;
            match answer {
                Ok(answer) => {
                    answers.insert(key, answer);
                }
                Err(Unanswered::Refused(error)) => {
                    let message = format!(
                        "the client could not answer {method} ({}): {}",
                        error.code, error.message
                    );
                    return Err(ErrorObject::internal(message)
                        .with_data(serde_json::json!({"inputRequest": key, "method": method})));
                }
                Err(Unanswered::TimedOut) => {
                    return Err(ErrorObject::internal(format!(
                        "the client did not answer {method} within {} s",
                        timeout.as_secs()
                    )));
                }
                Err(Unanswered::Gone) => {
                    return Err(ErrorObject::internal(format!(
                        "the request ended while waiting for the client's answer to {method}"
                    )));
                }
            }
        }
        Ok(answers)
    }
}

/// An input request's params as an initialize-era client expects them: a URL-mode elicitation
/// carries the `elicitationId` 2025-11-25 requires (2026-07-28 dropped it).
fn for_legacy_client(method: &str, params: Option<&Value>) -> Value {
    let mut params = params
        .cloned()
        .unwrap_or_else(|| Value::Object(JsonObject::new()));
    if method == "elicitation/create" && params.get("mode").and_then(Value::as_str) == Some("url") {
        if let Value::Object(fields) = &mut params {
            fields
                .entry("elicitationId")
                .or_insert_with(|| Value::String(new_session_id()));
        }
    }
    params
}

/// The `_meta` a legacy request runs with: the session's version, capabilities, client and log
/// level, plus the request's own progress token and `_meta` keys. 2026-07-28 extensions a
/// client declared are left out: their methods (`tasks/*`) are not served in a legacy session,
/// so a task-capable tool runs to its result (the MCP Inspector declares the tasks extension
/// in `initialize`).
fn legacy_meta(session: &SessionRecord, given: Option<&Value>) -> RequestMeta {
    let mut capabilities = session.client_capabilities.clone();
    capabilities.extensions = None;
    let mut meta = RequestMeta::new(
        session.protocol_version.clone(),
        capabilities,
        session.client_info.clone(),
    );
    meta.log_level = session.log_level;
    if let Some(Value::Object(given)) = given {
        for (key, value) in given {
            if key == "progressToken" {
                meta.progress_token = serde_json::from_value(value.clone()).ok();
            } else if !key.starts_with("io.modelcontextprotocol/") {
                meta.extra.insert(key.clone(), value.clone());
            }
        }
    }
    meta
}

/// A legacy request's params: the client's text, until something must be read out of them or a
/// round of input changes them.
enum Params<'a> {
    /// As sent ([`runs_as_sent`]).
    Sent(&'a RawValue),
    /// Read into a tree, without the members a legacy client may not send.
    Tree(JsonObject),
}

impl Params<'_> {
    /// The `_meta` the client sent (params sent as they are have none).
    fn meta(&self) -> Option<&Value> {
        match self {
            Params::Sent(_) => None,
            Params::Tree(tree) => tree.get("_meta"),
        }
    }

    fn route(&self, method: &str) -> Result<Route, ErrorObject> {
        match self {
            Params::Sent(sent) => Route::parse(method, Some(sent)),
            Params::Tree(tree) => serde_json::value::to_raw_value(tree)
                .map_err(|e| ErrorObject::invalid_params(e.to_string()))
                .and_then(|raw| Route::parse(method, Some(&raw))),
        }
    }

    fn into_tree(self, method: &str) -> Result<JsonObject, ErrorObject> {
        match self {
            Params::Sent(sent) => parse(method, Some(sent)),
            Params::Tree(tree) => Ok(tree),
        }
    }
}

/// Whether a legacy request's params can run as the client sent them: an object with none of
/// the members the server takes out or reads first (`inputResponses`, `requestState`, `_meta`)
/// and no `\u` escape that could spell one. This is a look at the text: anything it does not
/// let through is read into a tree and handled as before, never refused by it.
fn runs_as_sent(params: &RawValue) -> bool {
    const READ_FIRST: [&str; 4] = ["\"inputResponses\"", "\"requestState\"", "\"_meta\"", "\\u"];
    let text = params.get();
    text.starts_with('{') && !READ_FIRST.iter().any(|member| text.contains(member))
}

/// The transport of a legacy request, for its metrics: HTTP knows its client's address, stdio
/// has none (an HTTP router served without the peer's address is counted as `pipe`).
fn transport_of(has_address: bool) -> crate::request::incoming::Transport {
    if has_address {
        crate::request::incoming::Transport::Tcp
    } else {
        crate::request::incoming::Transport::Pipe
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_run_as_sent_only_without_members_the_server_reads_first() {
        fn raw(text: &str) -> &RawValue {
            serde_json::from_str(text).unwrap()
        }
        assert!(runs_as_sent(raw(
            r#"{"name":"echo","arguments":{"message":"a\nb"}}"#
        )));
        for text in [
            r#"{"name":"echo","_meta":{"progressToken":1}}"#,
            r#"{"name":"echo","inputResponses":{}}"#,
            r#"{"name":"echo","requestState":"s"}"#,
            r#"{"name":"echo","_m\u0065ta":{}}"#,
            r#"["echo"]"#,
            "null",
        ] {
            assert!(!runs_as_sent(raw(text)), "{text}");
        }
    }

    #[test]
    fn the_meta_comes_from_the_session_and_the_request() {
        let mut session = SessionRecord::new(
            "s".into(),
            "2025-06-18",
            serde_json::from_value(
                json!({"sampling": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}),
            )
            .unwrap(),
            None,
            None,
        );
        session.log_level = Some(LoggingLevel::Warning);
        let meta = legacy_meta(
            &session,
            Some(
                &json!({"progressToken": "p", "custom": 1, "io.modelcontextprotocol/logLevel": "debug"}),
            ),
        );
        assert_eq!(meta.protocol_version, "2025-06-18");
        assert!(meta.client_capabilities.sampling.is_some());
        assert!(
            meta.client_capabilities.extensions.is_none(),
            "no tasks in a legacy session"
        );
        assert_eq!(meta.log_level, Some(LoggingLevel::Warning));
        assert_eq!(meta.progress_token, Some("p".into()));
        assert_eq!(meta.extra.get("custom"), Some(&json!(1)));
        assert!(!meta.extra.contains_key("io.modelcontextprotocol/logLevel"));
    }

    #[test]
    fn url_elicitations_get_the_id_legacy_clients_require() {
        let url = json!({"mode": "url", "message": "Sign in", "url": "https://example.com/x"});
        let sent = for_legacy_client("elicitation/create", Some(&url));
        assert_eq!(sent["elicitationId"].as_str().map(str::len), Some(43));
        let form =
            json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}});
        assert_eq!(for_legacy_client("elicitation/create", Some(&form)), form);
        assert_eq!(for_legacy_client("roots/list", None), json!({}));
    }

    #[test]
    fn only_initialize_without_a_modern_meta_is_legacy() {
        let raw = |s: &str| RawValue::from_string(s.into()).unwrap();
        assert!(is_legacy_initialize(
            "initialize",
            Some(&raw(
                r#"{"protocolVersion":"2025-11-25","capabilities":{}}"#
            ))
        ));
        assert!(is_legacy_initialize("initialize", None));
        let modern = raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        assert!(!is_legacy_initialize("initialize", Some(&modern)));
        assert!(!is_legacy_initialize("tools/list", None));
    }

    #[test]
    fn session_ids_are_long_random_and_header_safe() {
        let (a, b) = (new_session_id(), new_session_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }
}
