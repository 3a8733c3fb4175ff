//! What the sandbox refused that the client saw: the proxy's answers to a server that
//! asked for a host it may not reach. Denials the kernel makes (Landlock, seccomp) reach only
//! the kernel's audit log, which an unprivileged client cannot read; the server sees `EACCES`.

use std::fmt;
use std::sync::Arc;

/// One refusal by the sandbox's proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The `host:port` the server asked for.
    pub target: String,
    /// How it asked: `CONNECT` or a plain-HTTP method.
    pub method: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} refused: not among the hosts this server may reach",
            self.method, self.target
        )
    }
}

/// Told of each [`Refusal`], on the proxy's thread: it should return quickly.
#[derive(Clone)]
pub struct Watch(Arc<dyn Fn(&Refusal) + Send + Sync>);

impl Watch {
    /// Calls `f` with each refusal.
    pub fn new(f: impl Fn(&Refusal) + Send + Sync + 'static) -> Watch {
        Watch(Arc::new(f))
    }

    /// Tells it of `refusal`.
    pub fn tell(&self, refusal: &Refusal) {
        (self.0)(refusal)
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Watch(..)")
    }
}
