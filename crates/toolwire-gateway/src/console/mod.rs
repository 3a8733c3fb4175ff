//! The gateway's console: a few server-rendered HTML pages for an operator, meant for the
//! admin address (never the MCP one): the upstreams and their state, the tools as served,
//! the definitions waiting for approval with what changed and an Approve button, and the
//! audit logs with a search box and the verification of the hash chain. No script runs in
//! it (its Content-Security-Policy allows none); every piece of text from an upstream is
//! escaped.
//!
//! Who may use it (it approves definitions):
//! - on a loopback admin address without a token, whoever can connect there, for requests
//!   addressed to that address or `localhost:PORT` (so a page using DNS rebinding gets 403);
//! - on any other address, nobody (403, saying why) unless a token is configured
//!   ([`ConsoleOptions::token`]);
//! - with a token, a browser signed in with it: each sign-in gets a session of its own, its
//!   cookie random (`HttpOnly`, `SameSite=Strict`, `Path=/console`, an 8-hour `Max-Age`,
//!   `Secure` behind TLS, never the token), ended by its expiry or Sign out; token and cookie
//!   are compared in constant time; wrong tokens are throttled per address (5 a minute), and a
//!   token easy to guess is refused at start;
//! - every POST (Approve, sign-in, sign-out) carries a CSRF token — the session's own once
//!   signed in — and the console's own `Origin`; GET never changes anything. Every answer
//!   forbids scripts, framing and caching.
//!
//! ```
//! # async fn mount(gateway: toolwire_gateway::Gateway) -> Result<(), toolwire_gateway::console::ConsoleError> {
//! use toolwire_gateway::console::{ConsoleOptions, router};
//! let admin: std::net::SocketAddr = "127.0.0.1:9090".parse().unwrap();
//! let console = router(
//!     gateway.clone(),
//!     ConsoleOptions::new(admin).host_audit_log("/var/lib/toolwire/audit.jsonl"),
//! )?;
//! let app = toolwire_server::observe::admin_router(gateway.server().clone()).merge(console);
//! # let _ = app;
//! # Ok(())
//! # }
//! ```

mod access;
mod approvals;
mod audit;
mod html;
mod login;
mod pages;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::Gateway;

pub use access::{
    MIN_TOKEN_BITS, MIN_TOKEN_CHARS, MOST_SESSIONS, MOST_TRIES, SESSION_TTL, TRIES_WINDOW,
};

/// The console's first page; every other page is under it.
pub const CONSOLE_PATH: &str = "/console";
pub(crate) const HOME_PATH: &str = CONSOLE_PATH;
pub(crate) const LOGIN_PATH: &str = "/console/login";
/// Where a signed-in browser signs out.
pub(crate) const LOGOUT_PATH: &str = "/console/logout";

/// Why the console cannot be served as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The console token is too short to resist guessing.
    #[error(
        "the console token has {chars} characters; it needs at least {MIN_TOKEN_CHARS} \
         (e.g. `openssl rand -hex 32`)"
    )]
    ShortToken {
        /// How many characters it has.
        chars: usize,
    },
    /// The console token is long enough but easy to guess (`aaaaaaaaaaaaaaaa`).
    #[error(
        "the console token is too easy to guess ({bits:.0} bits of entropy; it needs at least \
         {MIN_TOKEN_BITS:.0}): use a random one, e.g. `openssl rand -hex 32`"
    )]
    WeakToken {
        /// The entropy it shows, in bits.
        bits: f64,
    },
}

/// An audit log the console shows.
#[derive(Debug, Clone)]
pub(crate) struct AuditFile {
    /// What it is, for the page.
    pub(crate) label: &'static str,
    /// The query value that picks it.
    pub(crate) key: &'static str,
    pub(crate) path: PathBuf,
    /// Whether it is hash-chained (and so verified).
    pub(crate) chained: bool,
}

/// How the console is served: where the admin address listens (its access rules depend on
/// it), its token, and the audit logs it shows.
#[derive(Clone)]
pub struct ConsoleOptions {
    admin: SocketAddr,
    token: Option<String>,
    logs: Vec<AuditFile>,
}

/// The token is never shown, only whether there is one.
impl std::fmt::Debug for ConsoleOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleOptions")
            .field("admin", &self.admin)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("logs", &self.logs)
            .finish()
    }
}

impl ConsoleOptions {
    /// The console of an admin address listening on `admin` (the bound address, after any
    /// port 0 was chosen). Without a token it is served only when `admin` is a loopback
    /// address; elsewhere every page answers 403 with the reason.
    pub fn new(admin: SocketAddr) -> ConsoleOptions {
        ConsoleOptions {
            admin,
            token: None,
            logs: Vec::new(),
        }
    }

    /// A browser must sign in with `token` (once; it then holds a session cookie), on any
    /// address. At least [`MIN_TOKEN_CHARS`] characters.
    pub fn token(mut self, token: impl Into<String>) -> ConsoleOptions {
        self.token = Some(token.into());
        self
    }

    /// Whether a token is configured.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether [`router`] takes these options: a token, when there is one, long and random
    /// enough. Checked by `router` too; a program checks first to refuse bad options before it
    /// starts anything else.
    pub fn check(&self) -> Result<(), ConsoleError> {
        if let Some(token) = &self.token {
            let chars = token.chars().count();
            if chars < MIN_TOKEN_CHARS {
                return Err(ConsoleError::ShortToken { chars });
            }
            let bits = access::token_bits(token);
            if bits < MIN_TOKEN_BITS {
                return Err(ConsoleError::WeakToken { bits });
            }
        }
        Ok(())
    }

    /// The admin address it was made for.
    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    /// Shows the host's hash-chained audit log at `path` (upstream events: tools changed,
    /// changes approved, servers failing, reloads), with the verification of its chain.
    pub fn host_audit_log(mut self, path: impl Into<PathBuf>) -> ConsoleOptions {
        self.logs.push(AuditFile {
            label: "Upstream events (hash-chained)",
            key: "host",
            path: path.into(),
            chained: true,
        });
        self
    }

    /// Shows the downstream server's audit log at `path` (one JSON record per call, as
    /// `gateway.audit.file` writes it; not chained).
    pub fn calls_audit_log(mut self, path: impl Into<PathBuf>) -> ConsoleOptions {
        self.logs.push(AuditFile {
            label: "Calls",
            key: "calls",
            path: path.into(),
            chained: false,
        });
        self
    }
}

/// What every console route shares.
pub(crate) struct Console {
    pub(crate) gateway: Gateway,
    pub(crate) access: Arc<access::Access>,
    pub(crate) logs: Vec<AuditFile>,
}

/// The console's routes under [`CONSOLE_PATH`], guarded by its access rules: merge it into the
/// admin router (`toolwire_server::observe::admin_router`), never the MCP one.
pub fn router(gateway: Gateway, options: ConsoleOptions) -> Result<Router, ConsoleError> {
    options.check()?;
    let access = Arc::new(access::Access::new(options.admin, options.token.as_deref()));
    let console = Arc::new(Console {
        gateway,
        access: access.clone(),
        logs: options.logs,
    });
    Ok(Router::new()
        .route(HOME_PATH, get(pages::upstreams))
        .route("/console/tools", get(pages::tools))
        .route(
            approvals::PATH,
            get(approvals::show).post(approvals::approve),
        )
        .route("/console/audit", get(audit::show))
        .route(LOGIN_PATH, get(login::show).post(login::submit))
        .route(LOGOUT_PATH, axum::routing::post(login::sign_out))
        .with_state(console)
        .layer(axum::middleware::from_fn_with_state(access, access::guard)))
}
