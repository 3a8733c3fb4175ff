//! The upstreams on their first try, which the gateway's start waits for (up to
//! [`GatewayOptions::start_wait`](crate::GatewayOptions::start_wait)), its readiness reports,
//! and each upstream's follower ends.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch;

/// The upstreams on their first try (started and not yet listed, nor failed), and whether
/// [`Gateway::start`](crate::Gateway::start) has stopped waiting for them (an upstream that
/// answers later is logged): one value, so that an upstream's end and the start's are seen in
/// one order.
#[derive(Debug)]
pub(crate) struct Starting(watch::Sender<State>);

#[derive(Debug, Default)]
struct State {
    pending: BTreeSet<String>,
    serving: bool,
}

impl Starting {
    /// `names` on their first try, the start waiting for them.
    pub(crate) fn new(names: BTreeSet<String>) -> Starting {
        Starting(watch::Sender::new(State {
            pending: names,
            serving: false,
        }))
    }

    /// The upstreams still on their first try.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.borrow().pending.iter().cloned().collect()
    }

    /// Notes that `upstream`'s first try has ended; `true` when the start had stopped waiting
    /// for it (it answered late).
    pub(crate) fn tried(&self, upstream: &str) -> bool {
        let mut late = false;
        self.0.send_modify(|state| {
            state.pending.remove(upstream);
            late = state.serving;
        });
        late
    }

    /// Waits up to `wait` for every upstream's first try to end, then stops waiting: whether
    /// all were tried or the wait ran out, the gateway serves what it has.
    pub(crate) async fn wait(&self, wait: Duration) {
        let mut started = self.0.subscribe();
        let all_tried = started.wait_for(|state| state.pending.is_empty());
        let _ = tokio::time::timeout(wait, all_tried).await;
        self.0.send_modify(|state| state.serving = true);
    }
}
