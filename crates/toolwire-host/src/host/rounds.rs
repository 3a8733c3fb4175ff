//! A person's approval held across the rounds of one relayed call. A call made with
//! [`CallOptions::relay_input`](toolwire_client::CallOptions::relay_input) may come back with
//! the server's questions; its retry, with the answers, is the same call: the person who
//! approved it is not asked again. The host's rules and the tool's pin are checked again on
//! every round (a tool whose definition changed between two rounds is refused); only the
//! question to the person is not repeated.
//!
//! The approval is kept for the retry that carries the server's `requestState` of that
//! round, with the same tool and the same arguments, once, for at most [`KEPT`]: a round
//! without state, a second use of the same state, or a retry after that long is asked
//! about again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long an approval waits for the retry: the default lifetime of a Toolwire server's
/// request state.
pub(super) const KEPT: Duration = Duration::from_secs(5 * 60);

/// The most approvals kept at once; past it the oldest are forgotten (asked again).
const MOST: usize = 1024;

/// Approvals waiting for their call's next round, by a digest of the tool, the arguments and
/// the server's state.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    waiting: Mutex<HashMap<String, (Instant, String)>>,
}

impl Rounds {
    /// Keeps the approval of a call of `qualified` with `arguments` that the server answered
    /// with `state`, for its retry.
    pub(super) fn keep(&self, qualified: &str, arguments: &Value, state: &str, by: &str) {
        let now = Instant::now();
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|_, (until, _)| *until > now);
        if waiting.len() >= MOST {
            if let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, (until, _))| *until)
                .map(|(key, _)| key.clone())
            {
                waiting.remove(&oldest);
            }
        }
        waiting.insert(
            key(qualified, arguments, state),
            (now + KEPT, by.to_owned()),
        );
    }

    /// Who approved the earlier round of this call, if it was approved by a person and is
    /// still waiting; it is used up.
    pub(super) fn take(&self, qualified: &str, arguments: &Value, state: &str) -> Option<String> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let (until, by) = waiting.remove(&key(qualified, arguments, state))?;
        (until > Instant::now()).then_some(by)
    }
}

fn key(qualified: &str, arguments: &Value, state: &str) -> String {
    let text = serde_json::to_string(&(qualified, arguments, state)).unwrap_or_default();
    crate::util::sha256_hex(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Rounds;

    #[test]
    fn an_approval_serves_the_same_calls_next_round_once() {
        let rounds = Rounds::default();
        rounds.keep("s__t", &json!({"a": 1}), "S1", "a person, once");
        assert_eq!(rounds.take("s__t", &json!({"a": 2}), "S1"), None);
        assert_eq!(rounds.take("s__u", &json!({"a": 1}), "S1"), None);
        assert_eq!(rounds.take("s__t", &json!({"a": 1}), "S2"), None);
        assert_eq!(
            rounds.take("s__t", &json!({"a": 1}), "S1").as_deref(),
            Some("a person, once")
        );
        assert_eq!(rounds.take("s__t", &json!({"a": 1}), "S1"), None, "used up");
    }
}
