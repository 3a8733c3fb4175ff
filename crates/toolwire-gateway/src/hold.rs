//! A legacy (2025-11-25) upstream's question during a call, held for the caller: the upstream
//! sends `elicitation/create`, `sampling/createMessage` or `roots/list` on the call's own
//! stream and waits for the answer, so the gateway cannot answer its caller until the caller
//! answers the question. The upstream call goes on in a task of its own, kept in this gateway
//! instance's table under a random id; the caller gets the question as an `input_required`
//! round (the id and the instance's in the sealed state), and its retry answers the question
//! and waits for the call's result or its next question.
//!
//! Bounded in time and count: a question unanswered after the hold's time (the TTL) is
//! declined (elicitation) or refused (sampling, roots) upstream, so that the upstream call
//! ends, and its entry is dropped (the call with it); past the cap of held calls a question is
//! refused upstream the same way and the caller told why. A held call lives in one process:
//! a retry that reaches another instance (or this one restarted) is told so, and the operator
//! must route a caller's retries to the instance that answered the first round.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use toolwire_client::Sent;
use toolwire_host::Called;
use toolwire_protocol::{ClientCapabilities, ElicitRequestParams, InputRequest, InputResponse};

/// How long a held call waits for its caller's answer by default: a person reads and fills in
/// a form within it, and an abandoned call does not hold its upstream longer.
pub const HOLD_TTL: Duration = Duration::from_secs(60);

/// How many calls one gateway instance holds at most by default.
pub const MAX_HELD: usize = 256;

/// How many questions may wait to be taken from a running call (a legacy upstream asks one
/// at a time and waits for its answer; more are refused).
const QUESTIONS: usize = 4;

/// An upstream's question during a call, and where its answer goes.
#[derive(Debug)]
pub(crate) struct Question {
    pub(crate) request: InputRequest,
    reply: oneshot::Sender<InputResponse>,
}

impl Question {
    /// Whether a caller that declared `declared` can answer it (M-05).
    pub(crate) fn answerable_by(&self, declared: &ClientCapabilities) -> bool {
        match &self.request {
            InputRequest::Elicit(ElicitRequestParams::Form(_)) => {
                declared.supports_elicitation_form()
            }
            InputRequest::Elicit(ElicitRequestParams::Url(_)) => {
                declared.supports_elicitation_url()
            }
            InputRequest::CreateMessage(params) => declared
                .sampling
                .as_ref()
                .is_some_and(|s| params.tools.is_none() || s.tools.is_some()),
            InputRequest::ListRoots(_) => declared.roots.is_some(),
            // A kind of question this gateway does not know: none it asks.
            _ => false,
        }
    }

    /// The key the question goes to the caller under (one question per round).
    pub(crate) fn key(&self) -> &'static str {
        match self.request {
            InputRequest::Elicit(_) => "elicitation",
            InputRequest::CreateMessage(_) => "sampling",
            InputRequest::ListRoots(_) => "roots",
            _ => "input",
        }
    }

    /// Whether `response` answers this question (an elicitation's answer to an elicitation…).
    pub(crate) fn answered_by(&self, response: &InputResponse) -> bool {
        matches!(
            (&self.request, response),
            (InputRequest::Elicit(_), InputResponse::Elicit(_))
                | (
                    InputRequest::CreateMessage(_),
                    InputResponse::CreateMessage(_)
                )
                | (InputRequest::ListRoots(_), InputResponse::ListRoots(_))
        )
    }

    /// Sends the caller's answer upstream.
    pub(crate) fn answer(self, response: InputResponse) {
        // The upstream may have given up waiting: then nobody is left to tell.
        let _ = self.reply.send(response);
    }
}

/// A call running upstream in a task of its own: its questions, then its end.
pub(crate) struct Running {
    pub(crate) questions: mpsc::Receiver<Question>,
    pub(crate) done: oneshot::Receiver<Called>,
    /// Dropping the running call stops it (the upstream request is cancelled).
    _task: AbortOnDrop,
}

impl Running {
    /// Runs `call` in a task of its own, its questions coming on `questions`.
    pub(crate) fn spawn(
        call: std::pin::Pin<Box<dyn std::future::Future<Output = Called> + Send>>,
        questions: mpsc::Receiver<Question>,
    ) -> Running {
        let (ended, done) = oneshot::channel();
        let task = tokio::spawn(async move {
            let _ = ended.send(call.await);
        });
        Running {
            questions,
            done,
            _task: AbortOnDrop(task),
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A call held while its caller answers its upstream's question.
pub(crate) struct Held {
    /// The upstream server, the served tool and the digest of the arguments it was called
    /// with: the retry must be of the same call.
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) arguments_sha256: String,
    pub(crate) question: Question,
    pub(crate) running: Running,
    until: Instant,
}

/// Why a call could not be held, or a held call not found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HoldError {
    /// The instance holds its cap of calls already.
    #[error(
        "the gateway holds {0} calls waiting for their callers' answers already (its cap): \
         try again later"
    )]
    Full(usize),
    /// No call is held under the id: it expired, was answered already, or never was.
    #[error(
        "no call is held under this requestState: it was answered already, or it waited \
         longer than {0:?} for the answer and the upstream was told no; call the tool anew \
         without requestState"
    )]
    Unknown(Duration),
}

/// Where questions go, by upstream, connection and the id of the request they come during.
/// A request id is its connection's own: a reconnected upstream (a reload, a restart) starts
/// its ids again, so an id alone could name another caller's call.
type Waiting = HashMap<(Arc<str>, Sent), mpsc::Sender<Question>>;

/// The calls one gateway instance holds, and the upstream requests whose questions may be held.
pub(crate) struct Holds {
    /// This instance's id, random for each start: a held call's state names it.
    instance: String,
    /// How long a held call waits, in milliseconds; changed by a reload (a call held already
    /// keeps the wait it was given).
    ttl_ms: AtomicU64,
    /// How many calls may be held at once; changed by a reload.
    cap: AtomicUsize,
    /// Where the questions asked during an upstream request go, by upstream, connection and
    /// request id.
    asking: Mutex<Waiting>,
    held: Mutex<HashMap<String, Held>>,
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holds")
            .field("instance", &self.instance)
            .field("ttl", &self.ttl())
            .field("cap", &self.cap())
            .finish_non_exhaustive()
    }
}

impl Holds {
    pub(crate) fn new(ttl: Duration, cap: usize) -> Holds {
        Holds {
            instance: random_id(),
            ttl_ms: AtomicU64::new(millis(ttl)),
            cap: AtomicUsize::new(cap),
            asking: Mutex::default(),
            held: Mutex::default(),
        }
    }

    /// This instance's id.
    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }

    /// How long a held call waits for its caller.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    /// How many calls may be held at once.
    pub(crate) fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// New bounds (a reload): calls held from now on get them.
    pub(crate) fn set_bounds(&self, ttl: Duration, cap: usize) {
        self.ttl_ms.store(millis(ttl), Ordering::Relaxed);
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// A call about to be made upstream to `server`: the questions asked during its requests
    /// come out of the receiver, once [`Asking::bind`] was told each request's id.
    pub(crate) fn asking(
        self: &Arc<Self>,
        server: &Arc<str>,
    ) -> (Asking, mpsc::Receiver<Question>) {
        let (tx, rx) = mpsc::channel(QUESTIONS);
        let asking = Asking(Arc::new(Bound {
            holds: Arc::downgrade(self),
            server: server.clone(),
            tx,
            ids: Mutex::default(),
        }));
        (asking, rx)
    }

    /// Where a question `server` asked during its request `sent` (on that connection, with
    /// that id) goes, if a call is waiting for it.
    pub(crate) fn waiting(&self, server: &str, sent: Sent) -> Option<mpsc::Sender<Question>> {
        let key = (Arc::<str>::from(server), sent);
        lock(&self.asking).get(&key).cloned()
    }

    /// Puts `request` to the call waiting on `to` and waits for its caller's answer, at most
    /// the TTL: `None` when there is no answer (expired, refused, or the call ended).
    pub(crate) async fn ask(
        &self,
        to: mpsc::Sender<Question>,
        request: InputRequest,
    ) -> Option<InputResponse> {
        let (reply, answer) = oneshot::channel();
        to.try_send(Question { request, reply }).ok()?;
        tokio::time::timeout(self.ttl(), answer).await.ok()?.ok()
    }

    /// Holds `held` under a new random id, which it returns, until its time runs out: then
    /// it is dropped, and its call stops (cancelled upstream, if the upstream has not ended
    /// it on hearing no).
    pub(crate) fn hold(
        self: &Arc<Self>,
        server: String,
        tool: String,
        arguments_sha256: String,
        (question, running): (Question, Running),
    ) -> Result<String, HoldError> {
        let now = Instant::now();
        let mut held = lock(&self.held);
        held.retain(|_, h| h.until > now);
        if held.len() >= self.cap() {
            // Dropped here, the question is refused upstream and the call stops.
            return Err(HoldError::Full(self.cap()));
        }
        let id = random_id();
        held.insert(
            id.clone(),
            Held {
                server,
                tool,
                arguments_sha256,
                question,
                running,
                until: now + self.ttl(),
            },
        );
        drop(held);
        let (holds, expiring, until) = (Arc::downgrade(self), id.clone(), now + self.ttl());
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            if let Some(holds) = holds.upgrade() {
                let now = Instant::now();
                let mut held = lock(&holds.held);
                if held.get(&expiring).is_some_and(|h| h.until <= now) {
                    held.remove(&expiring);
                }
            }
        });
        Ok(id)
    }

    /// Puts back a held call its retry did not answer, under the same id and time limit.
    pub(crate) fn put_back(&self, id: String, held: Held) {
        lock(&self.held).insert(id, held);
    }

    /// Takes the call held under `id` (a retry is its only taker: a second retry with the
    /// same state finds nothing).
    pub(crate) fn take(&self, id: &str) -> Result<Held, HoldError> {
        let now = Instant::now();
        let mut held = lock(&self.held);
        held.retain(|_, h| h.until > now);
        held.remove(id).ok_or(HoldError::Unknown(self.ttl()))
    }

    /// How many calls are held now (expired ones included until the next hold or take).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.held).len()
    }
}

/// The ids of one call's upstream requests, bound to where their questions go until the
/// call ends (the last clone dropped).
#[derive(Clone)]
pub(crate) struct Asking(Arc<Bound>);

struct Bound {
    holds: std::sync::Weak<Holds>,
    server: Arc<str>,
    tx: mpsc::Sender<Question>,
    ids: Mutex<Vec<Sent>>,
}

impl Asking {
    /// Questions asked during request `sent` go to this call.
    pub(crate) fn bind(&self, sent: Sent) {
        let Some(holds) = self.0.holds.upgrade() else {
            return;
        };
        lock(&self.0.ids).push(sent);
        lock(&holds.asking).insert((self.0.server.clone(), sent), self.0.tx.clone());
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        let Some(holds) = self.holds.upgrade() else {
            return;
        };
        let ids = std::mem::take(&mut *lock(&self.ids));
        let mut asking = lock(&holds.asking);
        for id in ids {
            asking.remove(&(self.server.clone(), id));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// 128 random bits, in hex.
fn random_id() -> String {
    toolwire_protocol::hex::encode(&rand::random::<[u8; 16]>())
}

/// A duration in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_held_call_is_dropped_when_its_time_runs_out() {
        let holds = Arc::new(Holds::new(Duration::from_secs(5), 2));
        let (_asking, questions) = holds.asking(&Arc::from("up"));
        let (reply, mut refused) = oneshot::channel();
        let question = Question {
            request: InputRequest::ListRoots(Default::default()),
            reply,
        };
        let running = Running::spawn(Box::pin(std::future::pending()), questions);
        let id = holds
            .hold("up".into(), "up__t".into(), "-".into(), (question, running))
            .unwrap();
        assert_eq!(holds.len(), 1);
        // Its question is refused upstream (the reply dropped) once the time has run out.
        tokio::time::timeout(Duration::from_secs(6), &mut refused)
            .await
            .expect("dropped within its time")
            .expect_err("no answer");
        assert_eq!(holds.len(), 0);
        assert!(matches!(holds.take(&id), Err(HoldError::Unknown(_))));
    }

    /// A request as sent on a connection.
    fn sent(connection: u64, id: i64) -> Sent {
        Sent::new(connection, id)
    }

    #[tokio::test]
    async fn a_bound_request_is_unbound_when_the_call_ends() {
        let holds = Arc::new(Holds::new(Duration::from_secs(1), 2));
        let (asking, _questions) = holds.asking(&Arc::from("up"));
        asking.bind(sent(1, 7));
        assert!(holds.waiting("up", sent(1, 7)).is_some());
        assert!(holds.waiting("other", sent(1, 7)).is_none());
        drop(asking);
        assert!(holds.waiting("up", sent(1, 7)).is_none());
        assert_eq!(holds.len(), 0);
    }

    /// Two connections to one upstream (before and after a reconnection) use the same ids: a
    /// question asked on one never reaches a call bound on the other, and a call bound on the
    /// second does not take the first's place.
    #[tokio::test]
    async fn the_same_id_on_two_connections_names_two_calls() {
        let holds = Arc::new(Holds::new(Duration::from_secs(1), 2));
        let (alice, _alices) = holds.asking(&Arc::from("up"));
        alice.bind(sent(1, 5));
        let (bob, _bobs) = holds.asking(&Arc::from("up"));
        bob.bind(sent(2, 5));
        let to_alice = holds.waiting("up", sent(1, 5)).expect("alice's call");
        let to_bob = holds.waiting("up", sent(2, 5)).expect("bob's call");
        assert!(!to_alice.same_channel(&to_bob));
        drop(bob);
        assert!(holds.waiting("up", sent(2, 5)).is_none());
        assert!(holds.waiting("up", sent(1, 5)).is_some(), "alice's is kept");
    }
}
