//! A stdio server's process group: how closing reaches what the server started. Unix only;
//! elsewhere closing kills the child alone.

#[cfg(unix)]
pub(crate) use unix::ProcessGroup;

#[cfg(not(unix))]
pub(crate) use other::ProcessGroup;

#[cfg(unix)]
mod unix {
    use std::time::Duration;

    use tokio::process::Child;

    /// The child's process group: the child leads it (spawned with `process_group(0)`), and what
    /// it starts joins it unless it moves itself elsewhere (daemons do, by design). Dropping it
    /// kills the group, as `kill_on_drop` does the child.
    #[derive(Debug)]
    pub(crate) struct ProcessGroup(Option<rustix::process::Pid>);

    impl ProcessGroup {
        /// How often `terminate` checks whether the group is gone.
        const POLL: Duration = Duration::from_millis(10);

        pub(crate) fn of(child: &Child) -> Self {
            let pid = child.id().and_then(|id| i32::try_from(id).ok());
            ProcessGroup(pid.and_then(rustix::process::Pid::from_raw))
        }

        /// SIGTERM to the group, up to `grace` for every member to go, then SIGKILL. False if
        /// SIGKILL was needed. The same escalation as the official Python SDK's stdio client
        /// (`terminate_posix_process_tree` in `mcp/os/posix/utilities.py`).
        pub(crate) async fn terminate(&mut self, child: &mut Child, grace: Duration) -> bool {
            let Some(group) = self.0.take() else {
                return true;
            };
            if rustix::process::kill_process_group(group, rustix::process::Signal::TERM).is_err() {
                // ESRCH: nobody is left. (EPERM cannot happen: the members are our descendants.)
                return true;
            }
            let deadline = tokio::time::Instant::now() + grace;
            loop {
                // Reaps the leader: its zombie would keep the group alive. Orphaned members are
                // reaped by whoever adopts them.
                let _ = child.try_wait();
                if rustix::process::test_kill_process_group(group).is_err() {
                    return true;
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Self::POLL).await;
            }
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            false
        }
    }

    impl Drop for ProcessGroup {
        fn drop(&mut self) {
            if let Some(group) = self.0.take() {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        }
    }
}

#[cfg(not(unix))]
mod other {
    use std::time::Duration;

    use tokio::process::Child;

    /// No process groups here: the child alone is stopped.
    #[derive(Debug)]
    pub(crate) struct ProcessGroup;

    impl ProcessGroup {
        pub(crate) fn of(_child: &Child) -> Self {
            ProcessGroup
        }

        /// Kills the child (there is no SIGTERM to have been ignored).
        pub(crate) async fn terminate(&mut self, child: &mut Child, _grace: Duration) -> bool {
            let _ = child.start_kill();
            true
        }
    }
}
