//! Listen fan-out: how a change (a tool, prompt or resource set that changed, a resource
//! updated) reaches every listen stream and legacy session stream, on this instance and, with a
//! shared store, on every other. [`MemoryFanOut`] is this process's own bus; a shared backend
//! (`Store::change_fan_out`) carries the changes between instances too.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::broadcast;

/// A change that listen streams (and legacy sessions' streams) may be told about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The tool set changed.
    Tools,
    /// The prompt set changed.
    Prompts,
    /// The resource or template set changed.
    Resources,
    /// A resource's contents changed.
    ResourceUpdated(Arc<str>),
    /// Changes may have been lost on the way between instances (the link to the shared store
    /// broke for a while): every stream is told that everything it follows may have changed,
    /// as after falling behind.
    Missed,
    /// A task's record was changed by an instance other than the one running its handler (a
    /// cancellation, answers to its input requests): the instance running it reads it again.
    /// Streams are not told.
    Task(Arc<str>),
}

/// Carries [`Change`]s to every subscriber: those of this instance and, for a shared backend,
/// those of every instance sharing its store. Each subscriber gets each change once, and the
/// changes of one instance in the order they were published.
///
/// `toolwire_server::contract::change_fan_out` (feature `contract-tests`) is the test suite
/// every implementation must pass.
pub trait ChangeFanOut: Send + Sync + 'static {
    /// Delivers `change` to this instance's subscribers at once, and to every other
    /// instance's as soon as the backend can. Never blocks and never fails: a shared backend
    /// that cannot reach the others tells their subscribers [`Change::Missed`] once it can.
    fn publish(&self, change: Change);

    /// The changes published from now on, by any instance. A subscriber that falls too far
    /// behind gets `RecvError::Lagged` and then the newer changes.
    fn subscribe(&self) -> broadcast::Receiver<Change>;

    /// Waits until changes published by other instances reach this one (at once for a
    /// backend of one process). A shared backend that cannot reach its store waits until it
    /// can: bound the wait with a timeout.
    fn connected(&self) -> BoxFuture<'_, ()>;
}

/// How many changes a subscriber may fall behind before it is told it lagged.
pub(crate) const CHANGE_BACKLOG: usize = 1024;

/// The fan-out of one process: a broadcast channel, what every server had before there were
/// shared stores.
#[derive(Debug)]
pub struct MemoryFanOut {
    changes: broadcast::Sender<Change>,
}

impl Default for MemoryFanOut {
    fn default() -> Self {
        MemoryFanOut {
            changes: broadcast::channel(CHANGE_BACKLOG).0,
        }
    }
}

impl ChangeFanOut for MemoryFanOut {
    fn publish(&self, change: Change) {
        // Nobody listening is fine.
        let _ = self.changes.send(change);
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn connected(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_memory_fan_out_keeps_the_contract() {
        crate::state::contract::change_fan_out(|| {
            vec![Arc::new(MemoryFanOut::default()) as Arc<dyn ChangeFanOut>]
        })
        .await;
    }
}
