//! A model's call, through pins, the policy and the audit log, to the server and back.

use std::time::{Duration, Instant};

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::protocol::{CallToolResult, ErrorObject, InputRequiredResult};

use super::connect::Connection;
use super::output::{cap, clean};
use super::{Host, HostEvent, HostTool, SentCall};
use crate::config::ServerConfig;
use crate::pins::PinState;
use crate::policy::{Answer, Approved, Call, Verdict};

/// The key of a tool's advertised time limit in its definition's `_meta`: a server may say
/// how long a tool takes, and a shorter limit than the host's is honoured.
const TIMEOUT_META_KEY: &str = "dev.toolwire/timeoutMs";

/// What became of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The server answered. The result may still be the tool's own error (`isError`).
    Answered,
    /// No listed tool has that name.
    Unknown,
    /// Not sent: denied by a rule or a person, or the definition changed since it was pinned.
    Refused,
    /// Sent, and no answer came: the server failed, was lost or timed out.
    Failed,
    /// Sent, and the server refused the credentials it came with (HTTP 401) after the
    /// client's own authorization, if it has one, could not mend it. A call made with a
    /// bearer of the caller's ([`CallOptions::bearer`]) may get through with a new one.
    Unauthorized,
    /// Cancelled by the caller's token (the server was told).
    Cancelled,
    /// The server needs input before it can answer, and the call relays its questions
    /// ([`CallOptions::relay_input`]): they are in [`Called::input_required`], for the caller
    /// to answer and call again with [`CallOptions::answers`].
    InputRequired,
}

/// A call's result for the model, and what became of the call.
#[derive(Debug, Clone)]
pub struct Called {
    /// What the model gets: the server's result, or an `isError` result saying what happened.
    pub result: CallToolResult,
    /// What became of the call.
    pub outcome: Outcome,
    /// The server's JSON-RPC error, when it refused the call with one instead of a result
    /// (e.g. -32021, a client capability the tool needs): the model gets `result`, which says
    /// so, and a gateway can pass the error on as the server sent it.
    pub error: Option<ErrorObject>,
    /// The server's `input_required` result, exactly as it came, when the outcome is
    /// [`Outcome::InputRequired`] (only for a call that relays rounds).
    pub input_required: Option<Box<InputRequiredResult>>,
}

/// The steps of [`Host::call_with`]: the tool looked up, authorized, called within its time
/// limit, and each outcome recorded.
pub(super) async fn call(
    host: &Host,
    qualified: &str,
    arguments: Value,
    options: CallOptions,
) -> Called {
    let view = host.view.load_full();
    let Some(tool) = view.tool(qualified) else {
        host.record(HostEvent::CallUnknown { tool: qualified });
        return Called {
            result: CallToolResult::error(format!(
                "There is no tool named {qualified}. List the tools again and use one of their names."
            )),
            outcome: Outcome::Unknown,
            error: None,
            input_required: None,
        };
    };
    // A tool the view lists always has a pin state; none would mean "never seen".
    let pin = view.pin_states.get(qualified).cloned();
    // The retry of a round a person approved: the person is not asked again (`rounds`).
    let earlier = options
        .answers
        .as_ref()
        .and_then(|answers| answers.state.as_deref())
        .and_then(|state| host.rounds.take(qualified, &arguments, state));
    let (approved_by, by_person) = match authorize(host, tool, pin, &arguments, earlier).await {
        Ok(approved) => approved,
        Err(refused) => return refused,
    };
    let Some(connection) = view
        .servers
        .get(&tool.server)
        .and_then(|entry| entry.connection.clone())
    else {
        return not_running(host, tool, &approved_by, &arguments);
    };
    let connection = &*connection;
    let limit = timeout_of(
        &connection.config,
        &tool.definition.name,
        &tool.listed,
        host.options().call_timeout,
    );
    let timeout = options.timeout.map_or(limit, |asked| asked.min(limit));
    let started = Instant::now();
    let outcome = connection
        .client
        .call_tool_with(
            &tool.definition.name,
            arguments.clone(),
            options.timeout(timeout),
        )
        .await;
    let latency_ms = started.elapsed().as_millis() as u64;
    if let (true, Err(toolwire_client::Error::InputRequired(input))) = (by_person, &outcome) {
        if let Some(state) = &input.request_state {
            host.rounds.keep(qualified, &arguments, state, &approved_by);
        }
    }
    let (logged, redacted) = logged_for(host, &outcome, &arguments);
    let sent = SentCall {
        server: &tool.server,
        tool: qualified,
        approved_by: &approved_by,
        latency_ms,
        arguments: logged,
        redacted,
    };
    notice_restart(host, connection);
    match outcome {
        Ok(result) => answered(host, sent, &connection.config.prefix, result),
        Err(toolwire_client::Error::InputRequired(input)) => asked(host, sent, input),
        Err(error) => failed(host, sent, error),
    }
}

/// Who allowed the call, in words for the audit log, and whether it was a person; or the
/// refusal the model gets, recorded. `earlier` is who approved the earlier round of this same
/// call: the rules and the pin are checked again, and a person is not asked again.
async fn authorize(
    host: &Host,
    tool: &HostTool,
    pin: Option<PinState>,
    arguments: &Value,
    earlier: Option<String>,
) -> Result<(String, bool), Called> {
    let qualified = tool.qualified.as_str();
    let pin = pin.unwrap_or(PinState::Unknown);
    let call = Call {
        server: &tool.server,
        qualified,
        definition: &tool.listed,
        pin: &pin,
        arguments,
    };
    if let Some(by) = earlier {
        if matches!(host.policy.load().verdict(&call), Verdict::Ask(_)) {
            return Ok((format!("{by}, for an earlier round of this call"), true));
        }
    }
    let approved = match host.authorize(&call).await {
        Ok(approved) => approved,
        Err(refusal) => {
            let (logged, redacted) = host.logged(arguments);
            host.record(HostEvent::CallRefused {
                server: &tool.server,
                tool: qualified,
                arguments: &logged,
                redacted,
                reason: &refusal.message,
            });
            return Err(Called {
                result: CallToolResult::error(refusal.message),
                outcome: Outcome::Refused,
                error: None,
                input_required: None,
            });
        }
    };
    let approved_by = match &approved {
        Approved::ByPolicy(reason) => reason.to_string(),
        Approved::ByPerson(Answer::AllowAlways) => "a person, always".to_owned(),
        Approved::ByPerson(Answer::AllowedBy(by)) => by.clone(),
        Approved::ByPerson(_) => "a person, once".to_owned(),
    };
    let by_person = matches!(approved, Approved::ByPerson(_));
    if by_person {
        host.record(HostEvent::ApprovalGiven {
            server: &tool.server,
            tool: qualified,
            by: &approved_by,
        });
    }
    Ok((approved_by, by_person))
}

/// The arguments as the audit log gets them (redacted), and how many values were redacted:
/// a call that is answered (or asks) is recorded only with `audit_each_call`, a failure always,
/// so the arguments are redacted only when they will be written.
fn logged_for(
    host: &Host,
    outcome: &toolwire_client::Result<CallToolResult>,
    arguments: &Value,
) -> (Value, usize) {
    let recorded = match outcome {
        Ok(_) | Err(toolwire_client::Error::InputRequired(_)) => host.records_calls(),
        Err(_) => true,
    };
    if recorded {
        host.logged(arguments)
    } else {
        (Value::Null, 0)
    }
}

/// The SHA-256 (hex) of `result` as the server sent it, for the audit log; empty when the
/// call is not recorded (a gateway's host, whose calls its server audits).
fn digest_if<T: serde::Serialize>(recorded: bool, result: &T) -> String {
    if !recorded {
        return String::new();
    }
    crate::util::sha256_hex(&serde_json::to_vec(result).unwrap_or_default())
}

/// The server's answer, recorded with its digest, then cleaned and capped for the model, its
/// resource links and embedded resources under the host's URIs.
fn answered(host: &Host, sent: SentCall<'_>, prefix: &str, mut result: CallToolResult) -> Called {
    let options = host.options();
    // The digest is of what the server sent; the model gets it cleaned and capped, its links
    // under the URIs the host reads them by.
    let result_sha256 = digest_if(host.records_calls(), &result);
    super::read::wrap_result_uris(prefix, &mut result);
    let controls_removed = options.clean_results.then(|| clean(&mut result));
    let truncated = cap(&mut result, options.max_result_chars);
    host.record(HostEvent::Call {
        sent,
        result_sha256,
        controls_removed,
        truncated,
        is_error: result.is_error(),
    });
    Called {
        result,
        outcome: Outcome::Answered,
        error: None,
        input_required: None,
    }
}

/// A relayed round that ended with the server's questions: recorded as a call whose result
/// is the question (the audit log sees every round), and passed on as it came.
fn asked(host: &Host, sent: SentCall<'_>, input: Box<InputRequiredResult>) -> Called {
    let result_sha256 = digest_if(host.records_calls(), &input);
    let asks = input.input_requests.as_ref().map_or(0, |r| r.len());
    let message = format!(
        "The server {} needs input before it can answer the call of {} ({asks} input requests).",
        sent.server, sent.tool
    );
    host.record(HostEvent::Call {
        sent,
        result_sha256,
        controls_removed: None,
        truncated: false,
        is_error: false,
    });
    Called {
        result: CallToolResult::error(message),
        outcome: Outcome::InputRequired,
        error: None,
        input_required: Some(input),
    }
}

/// A call to a listed tool whose server has no connection (it never started): recorded as
/// failed; the model is told why.
fn not_running(host: &Host, tool: &HostTool, approved_by: &str, arguments: &Value) -> Called {
    let (logged, redacted) = host.logged(arguments);
    let error = format!("the server {} is not running", tool.server);
    let sent = SentCall {
        server: &tool.server,
        tool: &tool.qualified,
        approved_by,
        latency_ms: 0,
        arguments: logged,
        redacted,
    };
    host.record(HostEvent::CallFailed {
        sent,
        error: error.clone(),
    });
    Called {
        result: CallToolResult::error(format!("The call to {} failed: {error}", tool.qualified)),
        outcome: Outcome::Failed,
        error: None,
        input_required: None,
    }
}

/// A call that got no answer, recorded as failed or cancelled; the model is told why.
fn failed(host: &Host, sent: SentCall<'_>, error: toolwire_client::Error) -> Called {
    let qualified = sent.tool.to_owned();
    let cancelled = matches!(error, toolwire_client::Error::Cancelled);
    let unauthorized = matches!(
        error,
        toolwire_client::Error::Unauthorized { status: 401, .. }
    );
    let words = error.to_string();
    let refusal = error.rpc().cloned();
    host.record(if cancelled {
        HostEvent::CallCancelled { sent, error: words }
    } else {
        HostEvent::CallFailed { sent, error: words }
    });
    Called {
        result: CallToolResult::error(format!("The call to {qualified} failed: {error}")),
        outcome: if cancelled {
            Outcome::Cancelled
        } else if unauthorized {
            Outcome::Unauthorized
        } else {
            Outcome::Failed
        },
        error: refusal,
        input_required: None,
    }
}

/// Records a stdio server that died and was started again during a call (the client
/// restarts it on the next request, S-11): the server was lost, and its new process
/// may not be the one whose tools were listed.
fn notice_restart(host: &Host, connection: &Connection) {
    let Some(starts) = connection.restarted() else {
        return;
    };
    let server = connection.config.name.as_str();
    tracing::warn!(
        server = %server,
        starts,
        "server {server}: its process had exited; it was started again for this call"
    );
    host.record(HostEvent::ServerRestarted {
        server,
        starts,
        reason: "its process had exited; it was started again for the next request",
    });
}

/// The tool's configured limit, else the server's, else the host's; a shorter limit the
/// tool advertises is honoured, plus a second for the answer to travel.
fn timeout_of(server: &ServerConfig, tool: &str, definition: &Value, host: Duration) -> Duration {
    let configured = server
        .tool_timeouts
        .get(tool)
        .copied()
        .or(server.timeout)
        .unwrap_or(host);
    match definition["_meta"][TIMEOUT_META_KEY].as_u64() {
        Some(ms) => configured.min(Duration::from_millis(ms) + Duration::from_secs(1)),
        None => configured,
    }
}
