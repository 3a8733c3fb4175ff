//! A model's call, through pins, the policy and the audit log, to the server and back.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_client::CallOptions;
use toolwire_client::protocol::{CallToolResult, ContentBlock};

use super::Host;
use crate::pins::PinState;
use crate::policy::{Answer, Approved, Call};

/// The key of a tool's advertised time limit in its definition's `_meta` (issue 9).
const TIMEOUT_META_KEY: &str = "dev.toolwire/timeoutMs";

impl Host {
    /// Calls the tool the model named `qualified` with `arguments`. Whatever happens, the model
    /// gets a result: a refusal, an unknown tool, a failed server or a timeout is an `isError`
    /// result that says so.
    pub async fn call(&self, qualified: &str, arguments: Value) -> CallToolResult {
        let Some(tool) = self.tool(qualified) else {
            self.record("call_unknown", json!({"tool": qualified}));
            return CallToolResult::error(format!(
                "There is no tool named {qualified}. List the tools again and use one of their names."
            ));
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
                self.record(
                    "call_refused",
                    json!({"server": tool.server, "tool": qualified, "arguments": arguments, "reason": refusal.message}),
                );
                return CallToolResult::error(refusal.message);
            }
        };
        let approved_by = match &approved {
            Approved::ByPolicy(reason) => reason.to_string(),
            Approved::ByPerson(Answer::AllowAlways) => "a person, always".to_owned(),
            Approved::ByPerson(_) => "a person, once".to_owned(),
        };
        if matches!(approved, Approved::ByPerson(_)) {
            self.record(
                "approval_given",
                json!({"server": tool.server, "tool": qualified, "by": approved_by}),
            );
        }
        let connection = &self.connections[&tool.server];
        let timeout = self.timeout_of(&connection.config, &tool.definition.name, definition);
        let started = Instant::now();
        let outcome = connection
            .client
            .call_tool_with(
                &tool.definition.name,
                arguments.clone(),
                CallOptions::default().timeout(timeout),
            )
            .await;
        let latency_ms = started.elapsed().as_millis() as u64;
        match outcome {
            Ok(mut result) => {
                let digest =
                    crate::util::sha256_hex(&serde_json::to_vec(&result).unwrap_or_default());
                let truncated = cap(&mut result, self.options.max_result_chars);
                self.record(
                    "call",
                    json!({"server": tool.server, "tool": qualified, "arguments": arguments,
                        "approvedBy": approved_by, "isError": result.is_error(),
                        "resultSha256": digest, "truncated": truncated, "latencyMs": latency_ms}),
                );
                result
            }
            Err(error) => {
                self.record(
                    "call_failed",
                    json!({"server": tool.server, "tool": qualified, "arguments": arguments,
                        "approvedBy": approved_by, "error": error.to_string(), "latencyMs": latency_ms}),
                );
                CallToolResult::error(format!("The call to {qualified} failed: {error}"))
            }
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

/// Cuts the result's text to `max` characters in all, with one visible note where it was cut;
/// text blocks after the cut are dropped, and `structuredContent` over the cap too (the text
/// holds its serialization, T-11). Returns whether it cut.
fn cap(result: &mut CallToolResult, max: usize) -> bool {
    let total: usize = result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.chars().count(),
            _ => 0,
        })
        .sum();
    let mut cut = false;
    if total > max {
        let mut left = max;
        let mut noted = false;
        result.content.retain_mut(|block| {
            let ContentBlock::Text(text) = block else {
                return true;
            };
            if noted {
                return false;
            }
            let chars = text.text.chars().count();
            if chars > left {
                let end = text
                    .text
                    .char_indices()
                    .nth(left)
                    .map_or(text.text.len(), |(i, _)| i);
                text.text.truncate(end);
                text.text.push_str(&format!(
                    "\n[… truncated by the host: the result had {total} characters of text, the first {max} are shown]"
                ));
                noted = true;
            }
            left -= chars.min(left);
            true
        });
        cut = true;
    }
    if let Some(structured) = &result.structured_content {
        if structured.to_string().chars().count() > max {
            result.structured_content = None;
            cut = true;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(result: &CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn one_note_where_the_text_is_cut_and_nothing_after_it() {
        let mut result = CallToolResult::text("abcdé");
        result
            .content
            .push(ContentBlock::Text(toolwire_client::protocol::TextContent {
                text: "fghij".into(),
                annotations: None,
                meta: None,
            }));
        result.content.push(result.content[1].clone());
        assert!(cap(&mut result, 7));
        let shown = texts(&result);
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert_eq!(shown[0], "abcdé");
        assert!(shown[1].starts_with("fg\n[… truncated by the host: the result had 15 characters"));
        let mut small = CallToolResult::text("short");
        assert!(!cap(&mut small, 7));
        assert_eq!(texts(&small), ["short"]);
    }
}
