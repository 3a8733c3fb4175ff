//! How a host command ended, when not with success or a plain error: the exit status, carried
//! up to `main` as an error after the command has said what it had to.

/// How a command ended, for the exit status.
#[derive(Debug)]
pub(crate) struct Ended(pub(crate) i32);

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Ended {}
