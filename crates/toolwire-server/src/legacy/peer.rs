//! Requests from the server to a legacy client (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`): numbered, sent on the stream of the request that needs them, and matched with
//! the client's responses when the transport hands them back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{ErrorObject, RequestId};

use crate::request::outbound::{Frame, Outbound};

use crate::state::relay::Answer;

/// The server's side of its requests to one client (a stdio connection or an HTTP session).
#[derive(Debug, Default)]
pub(crate) struct Peer {
    next_id: AtomicI64,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Answer>>>,
}

/// Why a request to the client gave no answer.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// The client answered with an error.
    Refused(ErrorObject),
    /// No answer in time.
    TimedOut,
    /// The request that needed the answer was cancelled, or the connection closed.
    Gone,
}

impl Peer {
    /// A peer whose request ids start at a random point (a multiple of 4096, below 2^44: a
    /// JavaScript client reads them exactly), for a session that several instances serve at
    /// once: the ids each gives its requests to the one client stay apart, so that an answer
    /// reaches the request it answers, wherever it runs.
    pub(crate) fn spread() -> Self {
        Peer {
            next_id: AtomicI64::new(i64::from(rand::random::<u32>()) << 12),
            pending: Mutex::default(),
        }
    }

    /// Sends `method` to the client through `out` and waits for its answer, at most `timeout`;
    /// `cancel` (the originating request's) stops the wait and drops the frame if still queued.
    pub(crate) async fn ask(
        &self,
        out: &Outbound,
        method: &str,
        params: &Value,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Result<Value, Unanswered> {
        let id = RequestId::from(self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        let json = serde_json::json!({
            "jsonrpc": "2.0",
            "id": &id,
            "method": method,
            "params": params,
        })
        .to_string();
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let _forget = Forget {
            peer: self,
            id: &id,
        };
        let frame = Frame {
            json,
            last: false,
            error_code: None,
            cancel: cancel.clone(),
            charge: None,
        };
        if !out.send(frame).await {
            return Err(Unanswered::Gone);
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(Unanswered::Gone),
            answer = rx => match answer {
                Ok(Ok(result)) => serde_json::from_str(result.get()).map_err(|e| {
                    Unanswered::Refused(ErrorObject::invalid_params(format!("the client's result is not JSON: {e}")))
                }),
                Ok(Err(error)) => Err(Unanswered::Refused(error)),
                Err(_) => Err(Unanswered::Gone),
            },
            _ = tokio::time::sleep(timeout) => Err(Unanswered::TimedOut),
        }
    }

    /// Hands the client's response to the request waiting for it; false if none waits (an
    /// unknown, answered or abandoned id).
    pub(crate) fn answer(&self, id: &RequestId, answer: Answer) -> bool {
        match self.pending().remove(id) {
            Some(waiting) => waiting.send(answer).is_ok(),
            None => false,
        }
    }

    /// Whether a request with this id waits for the client's answer here.
    pub(crate) fn waits_for(&self, id: &RequestId) -> bool {
        self.pending().contains_key(id)
    }

    /// Ends every wait: the connection or session is gone.
    pub(crate) fn close(&self) {
        self.pending().clear();
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a request's entry however its wait ends, so abandoned ids cannot pile up.
struct Forget<'a> {
    peer: &'a Peer,
    id: &'a RequestId,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.peer.pending().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;
    use tokio::sync::mpsc;

    #[tokio::test]
    async fn answers_reach_their_request_and_nothing_is_left_behind() {
        let peer = Peer::default();
        let (tx, mut rx) = mpsc::channel(4);
        let out = Outbound::new(tx);
        let cancel = CancellationToken::new();
        let params = serde_json::json!({});
        let asking = peer.ask(&out, "roots/list", &params, &cancel, Duration::from_secs(5));
        let answering = async {
            let frame = rx.recv().await.unwrap();
            let sent: Value = serde_json::from_str(&frame.json).unwrap();
            assert_eq!(sent["method"], "roots/list");
            let id: RequestId = serde_json::from_value(sent["id"].clone()).unwrap();
            assert!(!peer.answer(
                &RequestId::from(99),
                Ok(RawValue::from_string("{}".into()).unwrap())
            ));
            let result = RawValue::from_string(r#"{"roots":[]}"#.into()).unwrap();
            assert!(peer.answer(&id, Ok(result)));
            assert!(
                !peer.answer(&id, Ok(RawValue::from_string("{}".into()).unwrap())),
                "once"
            );
        };
        let (answer, ()) = tokio::join!(asking, answering);
        assert_eq!(answer.unwrap(), serde_json::json!({"roots": []}));
        assert!(peer.pending().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_times_out_and_a_cancel_stops_the_wait() {
        let peer = Peer::default();
        let (tx, _rx) = mpsc::channel(4);
        let out = Outbound::new(tx);
        let cancel = CancellationToken::new();
        let params = serde_json::json!({});
        let silent = peer
            .ask(&out, "ping", &params, &cancel, Duration::from_secs(1))
            .await;
        assert!(matches!(silent, Err(Unanswered::TimedOut)));
        cancel.cancel();
        let cancelled = peer
            .ask(&out, "ping", &params, &cancel, Duration::from_secs(1))
            .await;
        assert!(matches!(cancelled, Err(Unanswered::Gone)));
        assert!(peer.pending().is_empty());
    }
}
