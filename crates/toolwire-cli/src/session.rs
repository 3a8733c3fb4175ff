//! One client command's life: connect, work, close, and what a signal does meanwhile. A stdio
//! server runs in its own process group (so that closing reaches everything it started), which
//! also puts it out of reach of the terminal's Ctrl-C: SIGINT, SIGTERM and SIGHUP are therefore
//! caught here, and end the command by cancelling the work in flight and closing the client.

use toolwire_client::Client;

use crate::target::Target;
use crate::terminal::note;

/// A client command ended by a signal; the process exits with `status` (128 + its number).
#[derive(Debug)]
pub(crate) struct Interrupted {
    pub(crate) status: i32,
    name: &'static str,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted by {}", self.name)
    }
}

impl std::error::Error for Interrupted {}

/// The signals that end a client command. Listening starts when this is made: from then on they
/// no longer kill the process outright, so make it before anything is started.
pub(crate) struct Signals {
    #[cfg(unix)]
    streams: [(tokio::signal::unix::Signal, i32, &'static str); 3],
}

impl Signals {
    #[cfg(unix)]
    pub(crate) fn listen() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            streams: [
                (signal(SignalKind::interrupt())?, 130, "SIGINT"),
                (signal(SignalKind::terminate())?, 143, "SIGTERM"),
                (signal(SignalKind::hangup())?, 129, "SIGHUP"),
            ],
        })
    }

    #[cfg(not(unix))]
    pub(crate) fn listen() -> anyhow::Result<Signals> {
        Ok(Signals {})
    }

    /// The next signal.
    #[cfg(unix)]
    pub(crate) async fn next(&mut self) -> Interrupted {
        let [(int, i, in_), (term, t, tn), (hup, h, hn)] = &mut self.streams;
        let (status, name) = tokio::select! {
            _ = int.recv() => (*i, *in_),
            _ = term.recv() => (*t, *tn),
            _ = hup.recv() => (*h, *hn),
        };
        Interrupted { status, name }
    }

    /// The next Ctrl-C.
    #[cfg(not(unix))]
    pub(crate) async fn next(&mut self) -> Interrupted {
        let _ = tokio::signal::ctrl_c().await;
        Interrupted {
            status: 130,
            name: "Ctrl-C",
        }
    }
}

/// Connects to `target`, runs `work` and closes the client. A signal cancels what is in flight
/// (dropping a request sends `notifications/cancelled`) and closes the client, which stops a
/// stdio server's process group (stdin closed, then SIGTERM, then SIGKILL after the grace); a
/// second signal stops it at once. The error is then [`Interrupted`].
pub(crate) async fn session<T>(
    target: &Target,
    work: impl AsyncFnOnce(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut signals = Signals::listen()?;
    // Dropping a connection still being made drops its server process, which kills its group.
    let client = tokio::select! {
        client = target.connect() => client?,
        signal = signals.next() => return Err(signal.into()),
    };
    let outcome = tokio::select! {
        done = work(&client) => Ok(done),
        signal = signals.next() => Err(signal),
    };
    match outcome {
        Ok(done) => {
            client.close().await;
            done
        }
        Err(signal) => {
            // Closing stops a stdio server; an HTTP server is only disconnected from.
            let (closing, at_once) = if target.is_http() {
                ("closing the connection", "closing it at once")
            } else {
                ("stopping the server", "killing the server")
            };
            note(&format!("toolwire: {signal}: {closing}"));
            // A second signal drops the unfinished close, and with it the server process it
            // holds: its group is killed at once.
            tokio::select! {
                () = client.close() => {}
                again = signals.next() => note(&format!("toolwire: {again}: {at_once}")),
            }
            Err(signal.into())
        }
    }
}
