//! An upstream's `input_required` rounds relayed to the caller, statelessly (M-01…M-14): the
//! upstream's input requests go to the caller verbatim, under their own keys, as the gateway's
//! own `input_required` result; the upstream's `requestState` travels inside the gateway's
//! state, which the downstream server seals (M-06, M-07) and binds to the tool, the arguments
//! and the caller; the caller's answers on the retry go upstream with that state. Answers on
//! a request without state go upstream as they are (a server may read them without state).
//! The gateway's client declares upstream, on each request, the caller's own capabilities
//! for questions, so that the upstream asks, or refuses, as it would the caller (M-05).
//!
//! The gateway's own question (a rule's `ask`) is a round of its own, before any upstream
//! round: which round an answer belongs to is read from the sealed state, never from its key,
//! so an upstream may use any key, the gateway's approval key included.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use toolwire_client::RoundAnswers;
use toolwire_protocol::{CallToolResult, ErrorObject, InputRequiredResult};
use toolwire_server::{InputRequired, RequestContext, ToolError};

/// What the gateway keeps of a call between its rounds, sealed by the downstream server.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Sealed {
    /// The digest of the arguments the approval question (`ask`) was put about: the question
    /// is pending, and this round's answers are its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) asked_sha256: Option<String>,
    /// The digest of the arguments a person approved in an earlier round of this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approved_sha256: Option<String>,
    /// The upstream round being relayed: this round's answers are the upstream's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) upstream: Option<Upstream>,
    /// The legacy upstream's call held for this round's answer, by this instance or another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<HeldRef>,
    /// Whether the request carried state at all (a first round carries none).
    #[serde(skip)]
    pub(crate) carried: bool,
}

/// Where a held call is: the gateway instance holding it and its id there, with what binds it
/// to the call (the state is sealed, and bound to the caller, by the server).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct HeldRef {
    /// The instance holding the call.
    pub(crate) instance: String,
    /// Its id in that instance's table.
    pub(crate) id: String,
    /// The upstream server asking.
    pub(crate) server: String,
}

/// An upstream round in flight.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Upstream {
    /// The upstream server that asked.
    pub(crate) server: String,
    /// The served tool called.
    pub(crate) tool: String,
    /// The digest of the arguments it was called with.
    pub(crate) arguments_sha256: String,
    /// The upstream's `requestState`, verbatim (M-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<String>,
    /// The upstream task that asked, when the round is a task's: the answers go to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task: Option<String>,
}

impl Sealed {
    /// The state the previous round of this call left, opened by the server (`-32602` for a
    /// tampered, expired or foreign one, before the handler runs); empty on a first round.
    pub(crate) fn of(ctx: &RequestContext) -> Result<Sealed, ToolError> {
        Ok(match ctx.request_state::<Sealed>()? {
            Some(sealed) => Sealed {
                carried: true,
                ..sealed
            },
            None => Sealed::default(),
        })
    }

    /// The answers to send upstream with this call of `tool` (a served tool's or prompt's name,
    /// or a resource's URI): the caller's answers and the upstream's state, when the previous
    /// round was the upstream's, or the answers alone, when the request carries no state;
    /// -32602 when the previous round was another call's (the server already binds the state
    /// to the call: this says so plainly should a state ever reach another call).
    pub(crate) fn upstream_answers(
        &self,
        tool: &str,
        arguments: &Value,
        ctx: &RequestContext,
    ) -> Result<Option<RoundAnswers>, ToolError> {
        let Some(upstream) = &self.upstream else {
            // A request without state may still carry answers (to a server that needs no
            // state to read them): they are the upstream's, as the caller sent them. After
            // a round of the gateway's own (its approval), they were the gateway's.
            let answers = ctx.input_responses();
            return Ok((!self.carried && !answers.is_empty())
                .then(|| RoundAnswers::new(answers.clone(), None)));
        };
        if upstream.tool != tool || upstream.arguments_sha256 != arguments_sha256(arguments) {
            return Err(ToolError::Protocol(ErrorObject::invalid_params(format!(
                "The requestState is of a call of {} on {}, with other arguments or to another \
                 tool: retry the call with the same tool and arguments, or call it anew without \
                 requestState",
                upstream.tool, upstream.server
            ))));
        }
        Ok(Some(RoundAnswers::new(
            ctx.input_responses().clone(),
            upstream.state.clone(),
        )))
    }
}

/// The gateway's own `input_required` result standing for the upstream's: its requests under
/// their own keys, verbatim, and its state sealed inside the gateway's with what binds it to
/// this call. The server checks the requests against the caller's capabilities (M-05).
pub(crate) fn relayed(
    input: InputRequiredResult,
    upstream: Upstream,
    approved_sha256: Option<String>,
) -> ToolError {
    let mut asked = InputRequired::new();
    for (key, request) in input.input_requests.unwrap_or_default() {
        asked = asked.request(key, request);
    }
    asked
        .state(Sealed {
            approved_sha256,
            upstream: Some(upstream),
            ..Sealed::default()
        })
        .into()
}

/// A digest of the arguments as sent (JSON text with sorted keys).
pub(crate) fn arguments_sha256(arguments: &Value) -> String {
    toolwire_protocol::hex::encode(&Sha256::digest(arguments.to_string().as_bytes()))
}

/// The questions legacy (2025-11-25) upstreams asked that belong to no call the gateway can
/// tell, by upstream: a question on stdio while several calls are in flight (it names no
/// request), or on a legacy session's standalone stream. A question asked during a known call
/// is held for that call's caller instead (`hold`). The gateway's client refuses these at
/// once (the upstream is told why), and a call during which one was asked ends with an error
/// result that says so.
#[derive(Debug, Default)]
pub(crate) struct Unrelayable {
    asked: std::sync::Mutex<std::collections::HashMap<String, Arc<AtomicU64>>>,
}

impl Unrelayable {
    /// The count of the questions `server` asked, which a call reads before and after it
    /// is made (two atomic loads: no lock on the call's path).
    pub(crate) fn counter(&self, server: &str) -> Arc<AtomicU64> {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.entry(server.to_owned()).or_default().clone()
    }

    /// Notes that `server` asked with `method`, and returns the refusal its client sends.
    pub(crate) fn refuse(&self, server: &str, method: &str) -> toolwire_client::Error {
        self.counter(server).fetch_add(1, Ordering::AcqRel);
        toolwire_client::Error::Input(format!(
            "{method} from the upstream {server}: {CANNOT_RELAY}"
        ))
    }

    /// The error result of a call during which `server` asked a question the gateway could
    /// not relay, with what the upstream answered after the refusal.
    pub(crate) fn failed(server: &str, tool: &str, answered: &CallToolResult) -> CallToolResult {
        let words: Vec<String> = answered
            .content
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .filter_map(|block| block["text"].as_str().map(str::to_owned))
            .collect();
        CallToolResult::error(format!(
            "The call of {tool} failed: the upstream server {server} asked for input \
             (elicitation, sampling or roots) during the call, which the gateway cannot relay \
             to you: {CANNOT_RELAY}. The upstream's answer after the refusal: {}",
            if words.is_empty() {
                "none".to_owned()
            } else {
                words.join(" ")
            }
        ))
    }
}

/// Why a legacy upstream's question is not relayed.
const CANNOT_RELAY: &str = "a 2025-11-25 server's request is relayed only when it can be told \
    which call it belongs to (over HTTP always; on stdio only while that call is the only one \
    in flight), and this one could not";
