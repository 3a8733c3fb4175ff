//! The process's stdin and stdout as the runtime's own non-blocking pipes, where they are pipes.
//!
//! `tokio::io::stdin()` and `stdout()` read and write on the blocking thread pool: every read
//! and every write is a hand-off to another thread and back. An MCP client that starts the
//! server as a child process gives it pipes, and a pipe can be registered with the reactor like
//! a socket instead. Measured on `bench/run`'s stdio scenario (16 requests in flight, server
//! pinned to one core), the hand-offs were most of the server's CPU per request: a third of its
//! samples were in the kernel's context switch.
//!
//! Making a pipe non-blocking changes its open file description, which the parent or a sibling
//! process may share; [`Restore`] makes both ends blocking again when serving ends. Anything
//! else (a terminal, a file, a socket) keeps tokio's blocking-pool stdin and stdout.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// What serving reads from and writes to.
pub(super) type Reader = Box<dyn AsyncRead + Unpin + Send>;
pub(super) type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// Stdin and stdout, each as a reactor-driven pipe where it is one, with the guard that makes
/// them blocking again.
pub(super) fn open() -> (Reader, Writer, Restore) {
    let mut restore = Restore(Vec::new());
    let stdin = std::io::stdin();
    let reader: Reader = match duplicate(stdin.as_fd()).and_then(pipe::Receiver::from_file) {
        Ok(receiver) => {
            restore.0.push(Stream::Stdin);
            Box::new(receiver)
        }
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let stdout = std::io::stdout();
    let writer: Writer = match duplicate(stdout.as_fd()).and_then(pipe::Sender::from_file) {
        Ok(sender) => {
            restore.0.push(Stream::Stdout);
            Box::new(sender)
        }
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (reader, writer, restore)
}

/// A second descriptor of the same open file, so that dropping the pipe does not close the
/// process's fd 0 or 1.
fn duplicate(fd: BorrowedFd<'_>) -> std::io::Result<File> {
    Ok(File::from(fd.try_clone_to_owned()?))
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdin,
    Stdout,
}

/// Makes the standard streams it names blocking again when dropped.
pub(super) struct Restore(Vec<Stream>);

impl Drop for Restore {
    fn drop(&mut self) {
        for stream in &self.0 {
            let (result, name) = match stream {
                Stream::Stdin => (blocking(std::io::stdin().as_fd()), "stdin"),
                Stream::Stdout => (blocking(std::io::stdout().as_fd()), "stdout"),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, stream = name, "could not make the stream blocking again");
            }
        }
    }
}

fn blocking(fd: BorrowedFd<'_>) -> rustix::io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(fd)?;
    if flags.contains(OFlags::NONBLOCK) {
        fcntl_setfl(fd, flags - OFlags::NONBLOCK)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A pipe made non-blocking for the reactor carries bytes, and is blocking again once
    /// `blocking` has run on it (what the guard does to fd 0 and 1).
    #[tokio::test]
    async fn pipes_are_driven_by_the_reactor_and_restored() {
        let (mut sender, receiver) = pipe::pipe().unwrap();
        let mut receiver = pipe::Receiver::from_file(duplicate(receiver.as_fd()).unwrap()).unwrap();
        let nonblocking = |fd: BorrowedFd<'_>| {
            rustix::fs::fcntl_getfl(fd)
                .unwrap()
                .contains(rustix::fs::OFlags::NONBLOCK)
        };
        assert!(nonblocking(receiver.as_fd()) && nonblocking(sender.as_fd()));
        sender.write_all(b"ping\n").await.unwrap();
        let mut buf = [0u8; 5];
        receiver.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping\n");
        blocking(receiver.as_fd()).unwrap();
        blocking(sender.as_fd()).unwrap();
        assert!(!nonblocking(receiver.as_fd()) && !nonblocking(sender.as_fd()));
    }
}
