//! A model's call, through pins, the policy and the audit log, to the server and back.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_client::CallOptions;
use toolwire_client::protocol::CallToolResult;

use super::Host;
use super::output::{cap, clean};
use crate::pins::PinState;
use crate::policy::{Answer, Approved, Call};

/// The key of a tool's advertised time limit in its definition's `_meta` (issue 9).
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
    /// Cancelled by the caller's token (the server was told).
    Cancelled,
}

/// A call's result for the model, and what became of the call.
#[derive(Debug, Clone)]
pub struct Called {
    /// What the model gets: the server's result, or an `isError` result saying what happened.
    pub result: CallToolResult,
    /// What became of the call.
    pub outcome: Outcome,
}

impl Host {
    /// Calls the tool the model named `qualified` with `arguments`. Whatever happens, the model
    /// gets a result: a refusal, an unknown tool, a failed server or a timeout is an `isError`
    /// result that says so.
    pub async fn call(&self, qualified: &str, arguments: Value) -> CallToolResult {
        self.call_with(qualified, arguments, CallOptions::default())
            .await
            .result
    }

    /// [`Host::call`] with the caller's options: progress and log callbacks and a cancellation
    /// token. Its time limit is the host's (see [`HostOptions`](super::HostOptions)) unless
    /// `options` sets a shorter one. Says what became of the call besides the result.
    pub async fn call_with(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Called {
        let Some(tool) = self.tool(qualified) else {
            self.record("call_unknown", json!({"tool": qualified}));
            return Called {
                result: CallToolResult::error(format!(
                    "There is no tool named {qualified}. List the tools again and use one of their names."
                )),
                outcome: Outcome::Unknown,
            };
        };
        let definition = &tool.listed;
        // A tool the last refresh listed always has a state; none would mean "never seen".
        let pin = self
            .pin_states
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(qualified)
            .cloned()
            .unwrap_or(PinState::Unknown);
        let call = Call {
            server: &tool.server,
            qualified,
            definition,
            pin: &pin,
            arguments: &arguments,
        };
        let approved = match self
            .policy
            .authorize(&call, self.options.approver.as_ref())
            .await
        {
            Ok(approved) => approved,
            Err(refusal) => {
                let (logged, redacted) = self.logged(&arguments);
                self.record(
                    "call_refused",
                    json!({"server": tool.server, "tool": qualified, "arguments": logged,
                        "redacted": redacted, "reason": refusal.message}),
                );
                return Called {
                    result: CallToolResult::error(refusal.message),
                    outcome: Outcome::Refused,
                };
            }
        };
        let approved_by = match &approved {
            Approved::ByPolicy(reason) => reason.to_string(),
            Approved::ByPerson(Answer::AllowAlways) => "a person, always".to_owned(),
            Approved::ByPerson(Answer::AllowedBy(by)) => by.clone(),
            Approved::ByPerson(_) => "a person, once".to_owned(),
        };
        if matches!(approved, Approved::ByPerson(_)) {
            self.record(
                "approval_given",
                json!({"server": tool.server, "tool": qualified, "by": approved_by}),
            );
        }
        let connection = &self.connections[&tool.server];
        let limit = self.timeout_of(&connection.config, &tool.definition.name, definition);
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
        let mut record = json!({"server": tool.server, "tool": qualified,
            "approvedBy": approved_by, "latencyMs": started.elapsed().as_millis() as u64});
        let (logged, redacted) = self.logged(&arguments);
        record["arguments"] = logged;
        record["redacted"] = redacted.into();
        self.notice_restart(connection);
        match outcome {
            Ok(mut result) => {
                // The digest is of what the server sent; the model gets it cleaned and capped.
                record["resultSha256"] =
                    crate::util::sha256_hex(&serde_json::to_vec(&result).unwrap_or_default())
                        .into();
                if self.options.clean_results {
                    record["controlsRemoved"] = clean(&mut result).into();
                }
                record["truncated"] = cap(&mut result, self.options.max_result_chars).into();
                record["isError"] = result.is_error().into();
                self.record("call", record);
                Called {
                    result,
                    outcome: Outcome::Answered,
                }
            }
            Err(error) => {
                let cancelled = matches!(error, toolwire_client::Error::Cancelled);
                record["error"] = error.to_string().into();
                self.record(
                    if cancelled {
                        "call_cancelled"
                    } else {
                        "call_failed"
                    },
                    record,
                );
                Called {
                    result: CallToolResult::error(format!(
                        "The call to {qualified} failed: {error}"
                    )),
                    outcome: if cancelled {
                        Outcome::Cancelled
                    } else {
                        Outcome::Failed
                    },
                }
            }
        }
    }

    /// The arguments as the audit log keeps them, and how many values were redacted; nothing
    /// is computed without a log.
    fn logged(&self, arguments: &Value) -> (Value, usize) {
        if self.audit.is_none() {
            return (Value::Null, 0);
        }
        self.redaction.apply(arguments)
    }

    /// Records a stdio server that died and was started again during a call (the client
    /// restarts it on the next request, S-11): the server was lost, and its new process
    /// may not be the one whose tools were listed.
    fn notice_restart(&self, connection: &super::Connection) {
        let Some(starts) = connection.client.server_starts() else {
            return;
        };
        let seen = connection.starts.swap(starts, Ordering::AcqRel);
        if starts > seen {
            tracing::warn!(
                server = %connection.config.name,
                starts,
                "server {}: its process had exited; it was started again for this call",
                connection.config.name
            );
            self.record(
                "server_restarted",
                json!({"server": connection.config.name, "starts": starts,
                    "reason": "its process had exited; it was started again for the next request"}),
            );
        }
    }

    /// The tool's configured limit, else the server's, else the host's; a shorter limit the
    /// tool advertises is honoured, plus a second for the answer to travel.
    fn timeout_of(
        &self,
        server: &crate::config::ServerConfig,
        tool: &str,
        definition: &Value,
    ) -> Duration {
        let configured = server
            .tool_timeouts
            .get(tool)
            .copied()
            .or(server.timeout)
            .unwrap_or(self.options.call_timeout);
        match definition["_meta"][TIMEOUT_META_KEY].as_u64() {
            Some(ms) => configured.min(Duration::from_millis(ms) + Duration::from_secs(1)),
            None => configured,
        }
    }
}
