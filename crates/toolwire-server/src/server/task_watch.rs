//! Tasks across instances sharing a task store. The instance that runs a task's handler owns
//! it (the record names it) and says it is alive with a heartbeat; any instance may read,
//! answer or cancel the task:
//! - a cancellation or answers recorded by another instance are announced on the change
//!   fan-out ([`Change::Task`]), and the owner reads the record again at once; at every
//!   heartbeat it also reads the records of all its running tasks, so that a lost notice
//!   delays them by one beat at most;
//! - a task whose owner's heartbeat has expired is ended as failed ("the instance running it
//!   stopped") by the first instance that reads it, through the versioned compare-and-swap,
//!   so that no task stays `working` after its instance died.

use std::sync::{Arc, Weak};

use tokio::sync::broadcast::error::RecvError;
use toolwire_protocol::{ErrorObject, InputResponses, TaskStatus};

use crate::server::{Server, ServerInner};
use crate::state::StoreError;
use crate::state::task_store::TaskRecord;
use crate::tools::offered::Change;

/// What the watch does next.
enum Watch {
    /// Beat, and read every running task's record.
    Beat,
    /// Read this running task's record.
    Task(Arc<str>),
    /// Read every running task's record (notices were missed).
    All,
}

impl Server {
    /// Says that this instance is alive, unless it did within a beat: before a task is
    /// started, so that no other instance finds its owner dead.
    pub(crate) async fn beating(&self) -> Result<(), StoreError> {
        let tasks = self.tasks();
        let fresh = tasks
            .last_beat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < tasks.heartbeat);
        if !fresh {
            self.beat().await?;
        }
        Ok(())
    }

    async fn beat(&self) -> Result<(), StoreError> {
        let tasks = self.tasks();
        let at = std::time::Instant::now();
        tasks
            .store
            .heartbeat(&tasks.instance, tasks.heartbeat_ttl_ms())
            .await?;
        *tasks.last_beat.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
        Ok(())
    }

    /// Starts, once, the watch over this instance's running tasks: the heartbeat, and the
    /// cancellations and answers other instances record. It ends with the server.
    pub(crate) fn watch_tasks(&self, inner: Weak<ServerInner>) {
        if self.tasks().watching.set(()).is_err() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut changes = self.subscribe_changes();
        let shutdown = self.shutdown_token();
        let mut beat = tokio::time::interval(self.tasks().heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        runtime.spawn(async move {
            loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = beat.tick() => Watch::Beat,
                    change = changes.recv() => match change {
                        Ok(Change::Task(id)) => Watch::Task(id),
                        Ok(_) => continue,
                        Err(RecvError::Lagged(_)) => Watch::All,
                        Err(RecvError::Closed) => return,
                    },
                };
                let Some(server) = Server::from_inner(&inner) else {
                    return;
                };
                server.watch(next).await;
            }
        });
    }

    async fn watch(&self, next: Watch) {
        match next {
            Watch::Beat => {
                if let Err(error) = self.beat().await {
                    tracing::warn!(%error, "this instance's heartbeat could not be stored; other instances may end its tasks as failed");
                }
                self.read_running().await;
            }
            Watch::Task(id) => self.read_again(&id).await,
            Watch::All => self.read_running().await,
        }
    }

    async fn read_running(&self) {
        let ids: Vec<String> = self.tasks().running().keys().cloned().collect();
        for id in ids {
            self.read_again(&id).await;
        }
    }

    /// Reads a task this instance runs again: stops its handler if it ended elsewhere
    /// (cancelled, or found dead) or is gone, and hands it answers given elsewhere.
    async fn read_again(&self, task_id: &str) {
        let running = self
            .tasks()
            .running()
            .get(task_id)
            .map(|r| (r.cancel.clone(), r.inbox.clone()));
        let Some((cancel, inbox)) = running else {
            return;
        };
        let record = match self.tasks().store.get(task_id, self.clock().now_ms()).await {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(task_id, %error, "a running task's record could not be read");
                return;
            }
        };
        match record {
            None => cancel.cancel(),
            Some(record) if record.info.status.is_terminal() => cancel.cancel(),
            Some(record) if record.answers.is_some() => {
                let mut taken = None;
                let took = self
                    .set(task_id, |r| {
                        taken = r.answers.take();
                        taken.is_some()
                    })
                    .await;
                match (took, taken) {
                    (Ok(true), Some(answers)) => inbox.deliver(answers),
                    (Err(error), _) => {
                        tracing::warn!(task_id, %error, "answers given elsewhere could not be taken");
                    }
                    _ => {}
                }
            }
            Some(_) => {}
        }
    }

    /// Records answers for a task that runs on another instance, for its owner to take, and
    /// tells it; answers to no open request are dropped, as on the owner.
    pub(crate) async fn answer_elsewhere(
        &self,
        task_id: &str,
        responses: &InputResponses,
    ) -> Result<(), StoreError> {
        let recorded = self.set(task_id, |r| r.answer(responses, true)).await?;
        if recorded {
            self.notify(Change::Task(task_id.into()));
        }
        Ok(())
    }

    /// The record as it stands once a dead owner is accounted for: a task that has not ended
    /// and whose owner (another instance) no longer beats is ended as failed. A store that
    /// cannot say whether the owner lives leaves the record as it is.
    pub(crate) async fn reaped(&self, record: TaskRecord) -> Result<TaskRecord, StoreError> {
        let tasks = self.tasks();
        let Some(owner) = record.owner.as_deref() else {
            return Ok(record);
        };
        if record.info.status.is_terminal() || owner == tasks.instance {
            return Ok(record);
        }
        match tasks.store.is_alive(owner).await {
            Ok(false) => {}
            Ok(true) => return Ok(record),
            Err(error) => {
                tracing::warn!(%error, "whether a task's instance lives could not be read");
                return Ok(record);
            }
        }
        let task_id = record.info.task_id.clone();
        tracing::warn!(
            task_id,
            owner,
            "a task's instance stopped beating; the task failed"
        );
        let error = ErrorObject::internal("The task failed: the instance running it stopped");
        self.finish(&task_id, TaskStatus::Failed, None, Some(error))
            .await?;
        Ok(tasks
            .store
            .get(&task_id, self.clock().now_ms())
            .await?
            .unwrap_or(record))
    }
}
