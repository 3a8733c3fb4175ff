//! What the host writes to its audit log: one [`HostEvent`] per record, each kind with its own
//! fields. A record's `event` is the kind's snake_case name; its other keys are the fields,
//! named as in the JSON (`approvedBy`, `latencyMs`). The log adds `seq`, `time` and `prev`.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::pins::{Changed, PinReport};

/// One record of the host's audit log.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HostEvent<'a> {
    /// A server could not be started, reached or listed; its tools are left out.
    ServerFailed {
        /// The server's name in the configuration.
        server: &'a str,
        /// Why.
        error: &'a str,
    },
    /// A server's list differs from its pins: new, changed or removed tools.
    ToolsChanged {
        /// The server's name.
        server: &'a str,
        /// Tools seen for the first time.
        new: &'a [String],
        /// Tools whose definition changed: the tool, both hashes and what changed.
        #[serde(serialize_with = "changed_tools")]
        changed: &'a [Changed],
        /// Pinned tools no longer listed.
        removed: &'a [String],
    },
    /// A server's tools were listed.
    ServerListed {
        /// The server's name.
        server: &'a str,
        /// The protocol version it speaks.
        #[serde(rename = "protocolVersion")]
        protocol_version: &'a str,
        /// How many of its tools the model sees.
        tools: usize,
    },
    /// A person accepted a changed tool's listed definition as its new pin.
    ChangeApproved {
        /// The server's name.
        server: &'a str,
        /// The tool's qualified name.
        tool: &'a str,
        /// The new pin.
        hash: &'a str,
    },
    /// The model called a name no listed tool has.
    CallUnknown {
        /// The name it used.
        tool: &'a str,
    },
    /// A call was not sent: a rule, a person or a changed definition refused it.
    CallRefused {
        /// The server's name.
        server: &'a str,
        /// The tool's qualified name.
        tool: &'a str,
        /// The arguments as the log keeps them.
        arguments: &'a Value,
        /// How many values of the arguments were redacted.
        redacted: usize,
        /// What the model was told.
        reason: &'a str,
    },
    /// A person (or someone on their behalf) allowed a call.
    ApprovalGiven {
        /// The server's name.
        server: &'a str,
        /// The tool's qualified name.
        tool: &'a str,
        /// Who: `a person, once`, `a person, always`, or what allowed it for them.
        by: &'a str,
    },
    /// A call the server answered (the result may be the tool's own error).
    Call {
        /// What every sent call records.
        #[serde(flatten)]
        sent: SentCall<'a>,
        /// The SHA-256 (hex) of the result as the server sent it.
        #[serde(rename = "resultSha256")]
        result_sha256: String,
        /// How many characters cleaning removed; absent when results are not cleaned.
        #[serde(rename = "controlsRemoved", skip_serializing_if = "Option::is_none")]
        controls_removed: Option<usize>,
        /// Whether the text was cut to the host's cap.
        truncated: bool,
        /// Whether the result is the tool's own error.
        #[serde(rename = "isError")]
        is_error: bool,
    },
    /// A sent call that got no answer: the server failed, was lost or timed out.
    CallFailed {
        /// What every sent call records.
        #[serde(flatten)]
        sent: SentCall<'a>,
        /// Why.
        error: String,
    },
    /// A sent call the caller cancelled (the server was told).
    CallCancelled {
        /// What every sent call records.
        #[serde(flatten)]
        sent: SentCall<'a>,
        /// The client's words for it.
        error: String,
    },
    /// A prompt was got from its server (or asked for and not got: `error` says why).
    PromptGot {
        /// The server's name.
        server: &'a str,
        /// The prompt's qualified name.
        prompt: &'a str,
        /// The arguments as the log keeps them.
        arguments: Value,
        /// How many values of the arguments were redacted.
        redacted: usize,
        /// From sending to the answer, in milliseconds.
        #[serde(rename = "latencyMs")]
        latency_ms: u64,
        /// The SHA-256 (hex) of the result as the server sent it; absent when it failed.
        #[serde(rename = "resultSha256", skip_serializing_if = "Option::is_none")]
        result_sha256: Option<String>,
        /// Why it failed; absent when it did not.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A resource was read from its server (or asked for and not read: `error` says why).
    ResourceRead {
        /// The server's name.
        server: &'a str,
        /// The URI as the host offers it (`toolwire://PREFIX/URI`).
        uri: &'a str,
        /// From sending to the answer, in milliseconds.
        #[serde(rename = "latencyMs")]
        latency_ms: u64,
        /// The SHA-256 (hex) of the result as the server sent it; absent when it failed.
        #[serde(rename = "resultSha256", skip_serializing_if = "Option::is_none")]
        result_sha256: Option<String>,
        /// Why it failed; absent when it did not.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A local server was started: its sandbox, and the profile it runs under (none when off).
    ServerStarted {
        /// The server's name.
        server: &'a str,
        /// How its sandbox stands.
        #[serde(flatten)]
        sandbox: &'a crate::config::SandboxStatus,
        /// What it may read, write and reach.
        profile: Option<&'a toolwire_sandbox::Profile>,
    },
    /// The sandbox's proxy refused a local server a host it may not reach.
    SandboxRefused {
        /// The server's name.
        server: &'a str,
        /// The `host:port` it asked for.
        target: &'a str,
        /// How it asked: `CONNECT` or a plain-HTTP method.
        method: &'a str,
    },
    /// A stdio server's process had exited and was started again for a call.
    ServerRestarted {
        /// The server's name.
        server: &'a str,
        /// How many times its process has been started.
        starts: u64,
        /// Why it was started again.
        reason: &'a str,
    },
    /// The configuration file was read again (a reload), and applied or refused: refused,
    /// the configuration before it kept running unchanged.
    ConfigReloaded {
        /// `applied` or `refused`.
        outcome: &'a str,
        /// The SHA-256 (hex) of the file as read.
        #[serde(rename = "fileSha256")]
        file_sha256: &'a str,
        /// What changed, in short (`upstreams added: two`, `rules changed`); empty when
        /// refused or when nothing changed.
        changes: &'a [String],
        /// Why it was refused; absent when applied.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    },
}

/// What the records of every call that was sent hold.
#[derive(Debug, Clone, Serialize)]
pub struct SentCall<'a> {
    /// The server's name.
    pub server: &'a str,
    /// The tool's qualified name.
    pub tool: &'a str,
    /// What allowed it: a rule, a remembered answer, a person.
    #[serde(rename = "approvedBy")]
    pub approved_by: &'a str,
    /// From sending to the answer, in milliseconds.
    #[serde(rename = "latencyMs")]
    pub latency_ms: u64,
    /// The arguments as the log keeps them.
    pub arguments: Value,
    /// How many values of the arguments were redacted.
    pub redacted: usize,
}

impl<'a> HostEvent<'a> {
    /// The records of a server's list against its pins.
    pub(crate) fn tools_changed(server: &'a str, report: &'a PinReport) -> HostEvent<'a> {
        HostEvent::ToolsChanged {
            server,
            new: &report.new,
            changed: &report.changed,
            removed: &report.removed,
        }
    }

    /// The record's `event`.
    pub fn name(&self) -> &'static str {
        match self {
            HostEvent::ServerFailed { .. } => "server_failed",
            HostEvent::ToolsChanged { .. } => "tools_changed",
            HostEvent::ServerListed { .. } => "server_listed",
            HostEvent::ChangeApproved { .. } => "change_approved",
            HostEvent::CallUnknown { .. } => "call_unknown",
            HostEvent::CallRefused { .. } => "call_refused",
            HostEvent::ApprovalGiven { .. } => "approval_given",
            HostEvent::Call { .. } => "call",
            HostEvent::CallFailed { .. } => "call_failed",
            HostEvent::CallCancelled { .. } => "call_cancelled",
            HostEvent::PromptGot { .. } => "prompt_got",
            HostEvent::ResourceRead { .. } => "resource_read",
            HostEvent::ServerStarted { .. } => "server_started",
            HostEvent::SandboxRefused { .. } => "sandbox_refused",
            HostEvent::ServerRestarted { .. } => "server_restarted",
            HostEvent::ConfigReloaded { .. } => "config_reloaded",
        }
    }

    /// The record's fields, as the audit log appends them (without `event`, which the log
    /// writes itself).
    pub fn fields(&self) -> Result<Map<String, Value>, serde_json::Error> {
        let mut fields = match serde_json::to_value(self)? {
            Value::Object(fields) => fields,
            // Every variant is a struct: it serializes as an object.
            _ => Map::new(),
        };
        fields.remove("event");
        Ok(fields)
    }
}

/// `changed` as the log keeps it: each tool with both hashes and its changes in words.
fn changed_tools<S: serde::Serializer>(changed: &&[Changed], out: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Record<'c> {
        tool: &'c str,
        pinned: &'c str,
        listed: &'c str,
        changes: Vec<String>,
    }
    out.collect_seq(changed.iter().map(|c| Record {
        tool: &c.tool,
        pinned: &c.pinned,
        listed: &c.listed,
        changes: c.changes.iter().map(ToString::to_string).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{HostEvent, SentCall};
    use crate::pins::{Change, Changed, PinReport};

    fn sent(arguments: Value) -> SentCall<'static> {
        SentCall {
            server: "fs",
            tool: "fs__read",
            approved_by: "a person, once",
            latency_ms: 12,
            arguments,
            redacted: 1,
        }
    }

    /// Every kind of record, as the log has always written it: a log written before these
    /// were typed reads the same, and its chain verifies.
    #[test]
    fn each_event_is_the_record_the_log_has_always_kept() {
        let profile = toolwire_sandbox::Profile::builder()
            .read("/")
            .write("/srv/notes")
            .hide("/home/p/.ssh")
            .network(toolwire_sandbox::Network::None)
            .build();
        let off = crate::config::SandboxStatus::Off {
            reason: "drives the Docker socket".into(),
        };
        let report = PinReport {
            new: vec!["write".into()],
            changed: vec![Changed {
                tool: "read".into(),
                pinned: "aa".into(),
                listed: "bb".into(),
                changes: vec![Change {
                    path: "description".into(),
                    before: Some(json!("old")),
                    after: Some(json!("new")),
                }],
            }],
            removed: vec!["gone".into()],
        };
        let arguments = json!({"path": "/tmp/x", "token": "[REDACTED:key]"});
        let table: Vec<(HostEvent<'_>, &str, Value)> = vec![
            (
                HostEvent::ServerFailed {
                    server: "fs",
                    error: "no such file",
                },
                "server_failed",
                json!({"server": "fs", "error": "no such file"}),
            ),
            (
                HostEvent::tools_changed("fs", &report),
                "tools_changed",
                json!({"server": "fs", "new": ["write"], "removed": ["gone"],
                    "changed": [{"tool": "read", "pinned": "aa", "listed": "bb",
                        "changes": ["~ description:\n    was: \"old\"\n    now: \"new\""]}]}),
            ),
            (
                HostEvent::ServerListed {
                    server: "fs",
                    protocol_version: "2026-07-28",
                    tools: 3,
                },
                "server_listed",
                json!({"server": "fs", "protocolVersion": "2026-07-28", "tools": 3}),
            ),
            (
                HostEvent::ChangeApproved {
                    server: "fs",
                    tool: "fs__read",
                    hash: "bb",
                },
                "change_approved",
                json!({"server": "fs", "tool": "fs__read", "hash": "bb"}),
            ),
            (
                HostEvent::CallUnknown { tool: "nope" },
                "call_unknown",
                json!({"tool": "nope"}),
            ),
            (
                HostEvent::CallRefused {
                    server: "fs",
                    tool: "fs__read",
                    arguments: &arguments,
                    redacted: 1,
                    reason: "refused",
                },
                "call_refused",
                json!({"server": "fs", "tool": "fs__read", "arguments": arguments,
                    "redacted": 1, "reason": "refused"}),
            ),
            (
                HostEvent::ApprovalGiven {
                    server: "fs",
                    tool: "fs__read",
                    by: "a person, always",
                },
                "approval_given",
                json!({"server": "fs", "tool": "fs__read", "by": "a person, always"}),
            ),
            (
                HostEvent::Call {
                    sent: sent(arguments.clone()),
                    result_sha256: "cc".into(),
                    controls_removed: Some(2),
                    truncated: false,
                    is_error: true,
                },
                "call",
                json!({"server": "fs", "tool": "fs__read", "approvedBy": "a person, once",
                    "latencyMs": 12, "arguments": arguments, "redacted": 1,
                    "resultSha256": "cc", "controlsRemoved": 2, "truncated": false,
                    "isError": true}),
            ),
            (
                HostEvent::Call {
                    sent: sent(Value::Null),
                    result_sha256: "cc".into(),
                    controls_removed: None,
                    truncated: true,
                    is_error: false,
                },
                "call",
                json!({"server": "fs", "tool": "fs__read", "approvedBy": "a person, once",
                    "latencyMs": 12, "arguments": null, "redacted": 1,
                    "resultSha256": "cc", "truncated": true, "isError": false}),
            ),
            (
                HostEvent::CallFailed {
                    sent: sent(arguments.clone()),
                    error: "timed out".into(),
                },
                "call_failed",
                json!({"server": "fs", "tool": "fs__read", "approvedBy": "a person, once",
                    "latencyMs": 12, "arguments": arguments, "redacted": 1,
                    "error": "timed out"}),
            ),
            (
                HostEvent::CallCancelled {
                    sent: sent(arguments.clone()),
                    error: "cancelled".into(),
                },
                "call_cancelled",
                json!({"server": "fs", "tool": "fs__read", "approvedBy": "a person, once",
                    "latencyMs": 12, "arguments": arguments, "redacted": 1,
                    "error": "cancelled"}),
            ),
            (
                HostEvent::PromptGot {
                    server: "fs",
                    prompt: "fs__review",
                    arguments: arguments.clone(),
                    redacted: 1,
                    latency_ms: 3,
                    result_sha256: Some("dd".into()),
                    error: None,
                },
                "prompt_got",
                json!({"server": "fs", "prompt": "fs__review", "arguments": arguments,
                    "redacted": 1, "latencyMs": 3, "resultSha256": "dd"}),
            ),
            (
                HostEvent::ResourceRead {
                    server: "fs",
                    uri: "toolwire://fs/file:///a",
                    latency_ms: 4,
                    result_sha256: None,
                    error: Some("server fs: no answer within 1s".into()),
                },
                "resource_read",
                json!({"server": "fs", "uri": "toolwire://fs/file:///a", "latencyMs": 4,
                    "error": "server fs: no answer within 1s"}),
            ),
            (
                HostEvent::ServerRestarted {
                    server: "fs",
                    starts: 2,
                    reason: "it exited",
                },
                "server_restarted",
                json!({"server": "fs", "starts": 2, "reason": "it exited"}),
            ),
            (
                HostEvent::ServerStarted {
                    server: "fs",
                    sandbox: &crate::config::SandboxStatus::Enforced,
                    profile: Some(&profile),
                },
                "server_started",
                json!({"server": "fs", "sandbox": "enforced", "profile": {
                    "read": ["/"], "write": ["/srv/notes"], "hidden": ["/home/p/.ssh"],
                    "network": "none"}}),
            ),
            (
                HostEvent::SandboxRefused {
                    server: "fetch",
                    target: "evil.example:443",
                    method: "CONNECT",
                },
                "sandbox_refused",
                json!({"server": "fetch", "target": "evil.example:443", "method": "CONNECT"}),
            ),
            (
                HostEvent::ServerStarted {
                    server: "docker",
                    sandbox: &off,
                    profile: None,
                },
                "server_started",
                json!({"server": "docker", "sandbox": "off", "reason": "drives the Docker socket",
                       "profile": null}),
            ),
        ];
        for (event, name, fields) in table {
            let record = event.fields().unwrap();
            assert_eq!(event.name(), name);
            // The serialized tag and the name agree.
            assert_eq!(serde_json::to_value(&event).unwrap()["event"], name);
            assert_eq!(Value::Object(record.clone()), fields, "{name}");
            // The line the chain hashes: the same keys give the same canonical text.
            let Value::Object(expected) = fields else {
                unreachable!()
            };
            assert_eq!(
                Value::Object(record).to_string(),
                Value::Object(expected).to_string(),
                "{name}"
            );
        }
    }
}
