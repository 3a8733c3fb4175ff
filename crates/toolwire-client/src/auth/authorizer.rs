//! The step of an authorization that needs a person: someone opens the authorization
//! URL in a browser, signs in and consents, and the authorization server redirects to the
//! client's `redirect_uri`. [`Authorizer`] is that step as a trait, so that each host does it
//! its own way; [`LoopbackAuthorizer`] is the usual way for a program on the person's own
//! machine: the redirect is caught on a 127.0.0.1 listener (RFC 8252 §7.3), and a callback
//! shows the URL (prints it, opens a browser).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use super::loopback::Loopback;

/// Why the person's step gave no redirect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the authorization was not completed: {0}")]
pub struct AuthorizerError(pub String);

/// What an [`Authorizer`]'s methods return.
pub type AuthorizerFuture<'a> = BoxFuture<'a, Result<String, AuthorizerError>>;

/// Has a person authorize: the flow asks for the redirect URI first (it is registered with
/// the authorization server and sent in the request), then hands over the authorization URL
/// and waits for the URL the server redirected to. The flow checks that redirect's `iss` and
/// `state` itself ([`read_redirect`](super::request::read_redirect)).
pub trait Authorizer: Send + Sync {
    /// The `redirect_uri` of the next authorization.
    fn redirect_uri(&self) -> AuthorizerFuture<'_>;

    /// Has the authorization at `url` done; returns the full URL of the redirect it ended
    /// with (query included).
    fn authorize<'a>(&'a self, url: &'a str) -> AuthorizerFuture<'a>;
}

/// Called with the authorization URL: show it to the person (and open a browser).
pub type ShowUrl = Arc<dyn Fn(&str) + Send + Sync>;

/// An [`Authorizer`] for a program on the person's machine: each authorization listens on a
/// fresh 127.0.0.1 port ([`Loopback`]), `show` is called with the URL, and the browser's
/// redirect to the listener ends it, or the wait does (5 minutes unless
/// [`timeout`](LoopbackAuthorizer::timeout) says otherwise).
pub struct LoopbackAuthorizer {
    show: ShowUrl,
    timeout: Duration,
    /// The listener whose redirect URI was handed out, until `authorize` takes it.
    listening: Mutex<Option<Loopback>>,
}

impl LoopbackAuthorizer {
    /// An authorizer that calls `show` with each authorization URL.
    pub fn new(show: impl Fn(&str) + Send + Sync + 'static) -> LoopbackAuthorizer {
        LoopbackAuthorizer {
            show: Arc::new(show),
            timeout: Duration::from_secs(300),
            listening: Mutex::new(None),
        }
    }

    /// How long the person has to finish in the browser.
    pub fn timeout(mut self, timeout: Duration) -> LoopbackAuthorizer {
        self.timeout = timeout;
        self
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Loopback>> {
        self.listening.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Authorizer for LoopbackAuthorizer {
    fn redirect_uri(&self) -> AuthorizerFuture<'_> {
        Box::pin(async move {
            if let Some(listening) = self.slot().as_ref() {
                return Ok(listening.redirect_uri().to_owned());
            }
            let loopback = Loopback::bind()
                .await
                .map_err(|e| AuthorizerError(e.to_string()))?;
            let uri = loopback.redirect_uri().to_owned();
            *self.slot() = Some(loopback);
            Ok(uri)
        })
    }

    fn authorize<'a>(&'a self, url: &'a str) -> AuthorizerFuture<'a> {
        Box::pin(async move {
            let loopback = match self.slot().take() {
                Some(loopback) => loopback,
                None => {
                    return Err(AuthorizerError(
                        "authorize was called before redirect_uri".into(),
                    ));
                }
            };
            (self.show)(url);
            loopback
                .wait(self.timeout)
                .await
                .map_err(|e| AuthorizerError(format!("{e}: it was not finished in the browser")))
        })
    }
}
