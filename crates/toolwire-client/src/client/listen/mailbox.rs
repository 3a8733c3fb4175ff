//! The notifications waiting for a subscription's consumer: a bounded queue where repeats
//! merge and what does not fit is counted in one `Missed`, ended by the listen task's side
//! (`Outbox`) when it stops.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::{Notification, Subscription};
use crate::error::{Error, Result};

pub(super) fn lock(mailbox: &Mutex<Mailbox>) -> std::sync::MutexGuard<'_, Mailbox> {
    mailbox.lock().unwrap_or_else(|p| p.into_inner())
}

/// The notifications waiting for a subscription's consumer (see [`Subscription`]).
#[derive(Debug, Default)]
pub(super) struct Mailbox {
    items: VecDeque<Notification>,
    /// The error that ended the subscription, delivered after the items.
    error: Option<Error>,
    /// Nothing more will be added.
    ended: bool,
    waker: Option<Waker>,
}

impl Mailbox {
    pub(super) fn push(&mut self, notification: Notification) {
        let mergeable = !matches!(
            notification,
            Notification::Other { .. } | Notification::Missed { .. }
        );
        if mergeable && self.items.contains(&notification) {
            return;
        }
        if self.items.len() >= Subscription::CAPACITY {
            // Dropped: counted in a `Missed` at the end of the queue (at most one slot over).
            match self.items.back_mut() {
                Some(Notification::Missed { count }) => *count += 1,
                _ => self.items.push_back(Notification::Missed { count: 1 }),
            }
        } else {
            self.items.push_back(notification);
        }
        self.wake();
    }

    pub(super) fn end(&mut self, error: Option<Error>) {
        self.error = self.error.take().or(error);
        self.ended = true;
        self.wake();
    }

    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    pub(super) fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Notification>>> {
        if let Some(item) = self.items.pop_front() {
            return Poll::Ready(Some(Ok(item)));
        }
        if let Some(error) = self.error.take() {
            return Poll::Ready(Some(Err(error)));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        self.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The listen task's side of a mailbox: ends the subscription when dropped (the task ended or
/// was aborted), so the consumer gets `None` after what is waiting.
#[derive(Debug)]
pub(super) struct Outbox(Arc<Mutex<Mailbox>>);

impl Outbox {
    pub(super) fn push(&self, notification: Notification) {
        lock(&self.0).push(notification);
    }

    pub(super) fn fail(&self, error: Error) {
        lock(&self.0).end(Some(error));
    }

    /// Whether the consumer is gone.
    pub(super) fn is_closed(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        lock(&self.0).end(None);
    }
}

/// A mailbox and its sending side.
pub(super) fn mailbox() -> (Arc<Mutex<Mailbox>>, Outbox) {
    let mailbox = Arc::new(Mutex::new(Mailbox::default()));
    (mailbox.clone(), Outbox(mailbox))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::sync::Mutex;
    use std::task::{Context, Poll};

    use super::*;

    fn take(mailbox: &Mutex<Mailbox>) -> Option<Result<Notification>> {
        let waker = futures::task::noop_waker();
        match lock(mailbox).poll_take(&mut Context::from_waker(&waker)) {
            Poll::Ready(item) => item,
            Poll::Pending => panic!("nothing waiting"),
        }
    }

    fn other(n: u64) -> Notification {
        Notification::Other {
            method: "notifications/custom".into(),
            params: json!({"n": n}),
        }
    }

    #[test]
    fn repeats_merge_and_the_rest_is_bounded_and_counted() {
        let (inbox, outbox) = mailbox();
        let updated = |uri: &str| Notification::ResourceUpdated { uri: uri.into() };
        for n in 0..1_000 {
            outbox.push(Notification::ToolsListChanged);
            outbox.push(updated("file:///a"));
            outbox.push(updated(if n % 2 == 0 { "file:///b" } else { "file:///a" }));
            outbox.push(Notification::Reconnected);
            outbox.push(other(n));
        }
        outbox.fail(Error::Transport("gone".into()));
        drop(outbox);
        let mut seen = Vec::new();
        while let Some(item) = take(&inbox) {
            seen.push(item);
        }
        // Four merged kinds, then the others that fit, then one count of the rest, the error.
        let fitted = Subscription::CAPACITY - 4;
        assert_eq!(seen.len(), 4 + fitted + 2);
        let kinds: Vec<_> = seen[..4]
            .iter()
            .map(|i| i.as_ref().unwrap().clone())
            .collect();
        assert_eq!(
            kinds,
            [
                Notification::ToolsListChanged,
                updated("file:///a"),
                updated("file:///b"),
                Notification::Reconnected
            ]
        );
        for (n, item) in seen[4..4 + fitted].iter().enumerate() {
            assert_eq!(item.as_ref().unwrap(), &other(n as u64));
        }
        let missed = (1_000 - fitted) as u64;
        assert_eq!(
            seen[4 + fitted].as_ref().unwrap(),
            &Notification::Missed { count: missed }
        );
        assert!(matches!(&seen[5 + fitted], Err(Error::Transport(m)) if m == "gone"));
    }

    #[test]
    fn a_drop_is_counted_in_order_with_what_came_before_and_after() {
        let (inbox, outbox) = mailbox();
        let cap = Subscription::CAPACITY as u64;
        for n in 0..cap + 2 {
            outbox.push(other(n));
        }
        // Full: the last two were dropped and counted after what fitted. Taking two makes room
        // for one more after the count; the next is dropped again, counted after it.
        assert_eq!(take(&inbox).unwrap().unwrap(), other(0));
        assert_eq!(take(&inbox).unwrap().unwrap(), other(1));
        outbox.push(other(1_000));
        outbox.push(other(1_001));
        drop(outbox);
        let rest: Vec<_> = std::iter::from_fn(|| take(&inbox))
            .map(Result::unwrap)
            .collect();
        let n = rest.len();
        assert_eq!(n, (cap - 2) as usize + 3);
        assert_eq!(rest[n - 4], other(cap - 1));
        assert_eq!(rest[n - 3], Notification::Missed { count: 2 });
        assert_eq!(rest[n - 2], other(1_000));
        assert_eq!(rest[n - 1], Notification::Missed { count: 1 });
    }
}
