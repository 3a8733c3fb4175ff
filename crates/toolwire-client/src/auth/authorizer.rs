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
/// redirect to the listener (the one with the authorization's `state`) ends it, or the wait does (5 minutes unless
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
            // Only the redirect of this authorization, the one carrying its state, ends
            // the wait.
            let state = url::Url::parse(url)
                .ok()
                .and_then(|u| {
                    u.query_pairs()
                        .find(|(k, _)| k == "state")
                        .map(|(_, v)| v.into_owned())
                })
                .ok_or_else(|| AuthorizerError("the authorization URL has no state".into()))?;
            (self.show)(url);
            loopback
                .wait(&state, self.timeout)
                .await
                .map_err(|e| AuthorizerError(format!("{e}: it was not finished in the browser")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query parameter of an authorization URL.
    fn param(url: &str, name: &str) -> String {
        url::Url::parse(url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap()
    }

    /// Requests to the callback that do not carry the authorization's `state` (a local
    /// process, a page guessing the port) are answered 400 and waited past; the browser's
    /// redirect with the right state ends the wait.
    #[tokio::test]
    async fn only_the_callback_with_the_requests_state_ends_the_wait() {
        let (statuses_tx, mut statuses_rx) = tokio::sync::mpsc::unbounded_channel();
        let authorizer = LoopbackAuthorizer::new(move |url: &str| {
            let (url, statuses) = (url.to_owned(), statuses_tx.clone());
            tokio::spawn(async move {
                let (callback, state) = (param(&url, "redirect_uri"), param(&url, "state"));
                let http = reqwest::Client::new();
                for forged in [
                    callback.clone(),
                    format!("{callback}?code=evil"),
                    format!("{callback}?code=evil&state=guess"),
                    format!("{callback}?error=access_denied&state=guess"),
                    format!("{callback}?code=evil&state=guess&state={state}"),
                ] {
                    let status = http.get(&forged).send().await.map(|r| r.status().as_u16());
                    statuses.send((forged, status.ok())).unwrap();
                }
                let real = format!("{callback}?code=good&state={state}");
                let status = http.get(&real).send().await.map(|r| r.status().as_u16());
                statuses.send((real, status.ok())).unwrap();
            });
        })
        .timeout(Duration::from_secs(20));
        let redirect_uri = authorizer.redirect_uri().await.unwrap();
        let url = format!(
            "https://as.example/authorize?state=s3cret-state&redirect_uri={}",
            url::form_urlencoded::byte_serialize(redirect_uri.as_bytes()).collect::<String>()
        );
        let redirect = authorizer.authorize(&url).await.unwrap();
        assert_eq!(
            redirect,
            format!("{redirect_uri}?code=good&state=s3cret-state")
        );
        let mut statuses = Vec::new();
        while statuses.len() < 6 {
            statuses.push(statuses_rx.recv().await.unwrap());
        }
        for (sent, status) in &statuses[..5] {
            assert_eq!(*status, Some(400), "{sent}");
        }
        assert_eq!(statuses[5].1, Some(200));
    }
}
