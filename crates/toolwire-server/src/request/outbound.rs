//! Where a request's messages go on their way to the client: serialized frames on a channel to
//! an HTTP response stream or the stdio writer, bounded by its capacity and, for stdio, by the
//! bytes queued and not yet written.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// One serialized message on its way to the client, tagged with the request it belongs to.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The JSON text of the message (one line, no newline).
    pub(crate) json: String,
    /// Whether this is the request's final response.
    pub(crate) last: bool,
    /// The error code of a final error response, for the HTTP status.
    pub(crate) error_code: Option<i64>,
    /// The request's cancellation; a cancelled request's frames are not written (S-08, H-08).
    pub(crate) cancel: CancellationToken,
    /// The frame's share of its writer's byte budget, held until the frame is written or
    /// dropped (stdio; see [`Outbound::bounded`]).
    pub(crate) charge: Option<OwnedSemaphorePermit>,
}

/// Where a request's messages go: an HTTP response stream or the stdio writer.
#[derive(Debug, Clone)]
pub(crate) struct Outbound {
    tx: mpsc::Sender<Frame>,
    /// Bytes queued and not yet written, at most the semaphore's permits.
    budget: Option<(Arc<Semaphore>, u32)>,
}

impl Outbound {
    /// Frames bounded by the channel's capacity only (an HTTP response: hyper pulls them as
    /// the client reads).
    pub(crate) fn new(tx: mpsc::Sender<Frame>) -> Self {
        Outbound { tx, budget: None }
    }

    /// Frames also bounded by the bytes queued and not yet written, at most `bytes` (a frame
    /// larger than that waits for the queue to empty and goes alone). A writer that cannot
    /// write (the client stopped reading) then holds back every sender within that many
    /// bytes, however large the frames.
    pub(crate) fn bounded(tx: mpsc::Sender<Frame>, bytes: u32) -> Self {
        let bytes = bytes.max(1);
        Outbound {
            tx,
            budget: Some((Arc::new(Semaphore::new(bytes as usize)), bytes)),
        }
    }

    /// Queues `frame`, waiting for room; false when the writer is gone.
    pub(crate) async fn send(&self, mut frame: Frame) -> bool {
        if let Some((budget, bytes)) = &self.budget {
            let size = u32::try_from(frame.json.len() + 1).unwrap_or(u32::MAX);
            match budget.clone().acquire_many_owned(size.min(*bytes)).await {
                Ok(charge) => frame.charge = Some(charge),
                Err(_) => return false,
            }
        }
        self.tx.send(frame).await.is_ok()
    }
}
