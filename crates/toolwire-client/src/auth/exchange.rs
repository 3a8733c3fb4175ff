//! RFC 8693 token exchange for one protected server, on behalf of callers who each hold their
//! own access token: a relay (a gateway) never sends a caller's token on (A-15, the spec's ban
//! on token passthrough), it trades it at the server's authorization server for a token for
//! that server, authenticating as itself. The new token acts for the caller (its `sub`) and
//! names the relay as the actor (`act`, RFC 8693 §4.1).
//!
//! Exchanged tokens are cached per caller token (by its SHA-256, never the token itself)
//! until shortly before they expire, in a bounded cache; a refusal is never cached. Calls of
//! one caller that miss the cache together wait for one exchange.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::discovery::{AuthorizationServerMetadata, DiscoveryError, server_metadata};
use super::http::AuthHttp;
use super::token::{ClientIdentity, ExchangeGrant, TokenError, exchange_token};

/// The gate of each caller's exchange under way, by the digest of the caller's token.
type Gates = HashMap<[u8; 32], Arc<tokio::sync::Mutex<()>>>;

/// How many callers' exchanged tokens one server's exchange keeps.
const CACHE_ENTRIES: usize = 1024;

/// How long before its expiry an exchanged token is no longer used: time enough for the
/// request it goes with.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// How long a token whose lifetime the server did not say is used.
const UNSAID_LIFETIME: Duration = Duration::from_secs(60);

/// Why no exchanged token could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The authorization server's metadata could not be had.
    #[error("the authorization server {issuer}: {error}")]
    Discovery {
        /// The configured issuer.
        issuer: String,
        /// Why.
        error: DiscoveryError,
    },
    /// The token endpoint refused the exchange or could not be reached.
    #[error("the token exchange at {issuer} failed: {error}")]
    Token {
        /// The configured issuer.
        issuer: String,
        /// Why.
        error: TokenError,
    },
}

/// How to exchange callers' tokens for one server's: the authorization server, the relay's
/// own client there, and what to ask for.
#[derive(Clone)]
pub struct TokenExchange {
    http: AuthHttp,
    client: ClientIdentity,
    resource: String,
    audience: Option<String>,
    scope: Option<String>,
    metadata: Arc<tokio::sync::OnceCell<AuthorizationServerMetadata>>,
    cache: Arc<Mutex<Cache>>,
    /// The exchanges under way, by caller token digest: one at a time per caller.
    pending: Arc<Mutex<Gates>>,
}

impl std::fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("issuer", &self.client.issuer)
            .field("client_id", &self.client.client_id)
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl TokenExchange {
    /// Exchanges at `client`'s issuer (its metadata discovered as for any flow) for tokens for
    /// the server at `server` (its URL), which is also the `resource` asked for unless
    /// [`resource`](TokenExchange::resource) says otherwise.
    pub fn new(server: impl Into<String>, client: ClientIdentity) -> TokenExchange {
        let server = server.into();
        TokenExchange {
            http: AuthHttp::new(server.clone()),
            client,
            resource: server,
            audience: None,
            scope: None,
            metadata: Arc::default(),
            cache: Arc::default(),
            pending: Arc::default(),
        }
    }

    /// The `resource` to ask for (RFC 8707) instead of the server's URL.
    pub fn resource(mut self, resource: impl Into<String>) -> TokenExchange {
        self.resource = resource.into();
        self
    }

    /// The `audience` to ask for too.
    pub fn audience(mut self, audience: impl Into<String>) -> TokenExchange {
        self.audience = Some(audience.into());
        self
    }

    /// The `scope` to ask for.
    pub fn scope(mut self, scope: impl Into<String>) -> TokenExchange {
        self.scope = Some(scope.into());
        self
    }

    /// Development only: a plain `http:` authorization server anywhere (see
    /// [`AuthHttp::allow_insecure_http`]).
    pub fn allow_insecure_http(mut self, allow: bool) -> TokenExchange {
        self.http = self.http.allow_insecure_http(allow);
        self
    }

    /// The authorization server's issuer.
    pub fn issuer(&self) -> &str {
        &self.client.issuer
    }

    /// A token for the server, acting for the bearer of `subject_token`: from the cache while
    /// it has time left, else exchanged at the token endpoint.
    pub async fn token_for(&self, subject_token: &str) -> Result<String, ExchangeError> {
        let key: [u8; 32] = Sha256::digest(subject_token.as_bytes()).into();
        if let Some(token) = self.cached().get(&key, Instant::now()) {
            return Ok(token);
        }
        let waiting = Waiting {
            gate: self.pending().entry(key).or_default().clone(),
            exchange: self,
            key,
        };
        let _turn = waiting.gate.lock().await;
        // The exchange of a call that went first may have filled the cache.
        let cached = self.cached().get(&key, Instant::now());
        match cached {
            Some(token) => Ok(token),
            None => self.exchange(subject_token, key).await,
        }
    }

    /// Forgets `token`, got for the bearer of `subject_token`, because the server refused it
    /// (HTTP 401: revoked, or signed with a key the server no longer trusts): the next
    /// [`token_for`](TokenExchange::token_for) exchanges again. A newer token got meanwhile by
    /// another call is kept.
    pub fn refused(&self, subject_token: &str, token: &str) {
        let key: [u8; 32] = Sha256::digest(subject_token.as_bytes()).into();
        let mut cache = self.cached();
        if cache
            .entries
            .get(&key)
            .is_some_and(|(kept, _)| kept == token)
        {
            cache.entries.remove(&key);
        }
    }

    /// Exchanges `subject_token` (whose digest is `key`) and caches the new token.
    async fn exchange(&self, subject_token: &str, key: [u8; 32]) -> Result<String, ExchangeError> {
        let issuer = &self.client.issuer;
        let metadata = self
            .metadata
            .get_or_try_init(|| server_metadata(&self.http, issuer))
            .await
            .map_err(|error| ExchangeError::Discovery {
                issuer: issuer.clone(),
                error,
            })?;
        let grant = ExchangeGrant {
            subject_token,
            resource: &self.resource,
            audience: self.audience.as_deref(),
            scope: self.scope.as_deref(),
        };
        let tokens = exchange_token(&self.http, metadata, &self.client, grant)
            .await
            .map_err(|error| ExchangeError::Token {
                issuer: issuer.clone(),
                error,
            })?;
        let lifetime = tokens
            .expires_in
            .map_or(UNSAID_LIFETIME, Duration::from_secs);
        self.cached()
            .put(key, tokens.access_token.clone(), lifetime, Instant::now());
        Ok(tokens.access_token)
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<tokio::sync::Mutex<()>>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call's place among those exchanging one caller's token; the last to leave (done or
/// cancelled) forgets the gate, so that only exchanges under way are kept.
struct Waiting<'a> {
    gate: Arc<tokio::sync::Mutex<()>>,
    exchange: &'a TokenExchange,
    key: [u8; 32],
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut pending = self.exchange.pending();
        // The map's and this call's: nobody else waits.
        if Arc::strong_count(&self.gate) == 2 {
            pending.remove(&self.key);
        }
    }
}

/// Exchanged tokens by the digest of the caller's token, each with the instant it stops
/// being used.
#[derive(Default)]
struct Cache {
    entries: HashMap<[u8; 32], (String, Instant)>,
}

impl Cache {
    /// The token for `key`, if it is still good at `now`.
    fn get(&self, key: &[u8; 32], now: Instant) -> Option<String> {
        self.entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(token, _)| token.clone())
    }

    /// Keeps `token`, good for `lifetime` from `now` less the margin (not kept if that
    /// leaves nothing). When full, the expired entries go, then the one closest to expiry.
    fn put(&mut self, key: [u8; 32], token: String, lifetime: Duration, now: Instant) {
        let Some(usable) = lifetime.checked_sub(EXPIRY_MARGIN.min(lifetime / 2)) else {
            return;
        };
        if usable.is_zero() {
            return;
        }
        if self.entries.len() >= CACHE_ENTRIES && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= CACHE_ENTRIES {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| *k);
                if let Some(soonest) = soonest {
                    self.entries.remove(&soonest);
                }
            }
        }
        self.entries.insert(key, (token, now + usable));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_used_until_shortly_before_it_expires() {
        let now = Instant::now();
        let cases = [
            // (lifetime, asked after, still used)
            (300, 0, true),
            (300, 269, true),
            (300, 270, false),
            (40, 19, true),
            (40, 20, false),
            (0, 0, false),
        ];
        for (lifetime, after, used) in cases {
            let mut cache = Cache::default();
            cache.put([1; 32], "t".into(), Duration::from_secs(lifetime), now);
            let got = cache.get(&[1; 32], now + Duration::from_secs(after));
            assert_eq!(got.is_some(), used, "{lifetime} {after}");
        }
    }

    #[test]
    fn the_cache_is_bounded_and_drops_the_soonest_to_expire() {
        let now = Instant::now();
        let mut cache = Cache::default();
        for i in 0..CACHE_ENTRIES {
            let key = Sha256::digest(i.to_le_bytes()).into();
            let lifetime = Duration::from_secs(100 + i as u64);
            cache.put(key, format!("t{i}"), lifetime, now);
        }
        let first: [u8; 32] = Sha256::digest(0usize.to_le_bytes()).into();
        cache.put([7; 32], "new".into(), Duration::from_secs(600), now);
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
        assert_eq!(cache.get(&first, now), None, "the soonest to expire went");
        assert_eq!(cache.get(&[7; 32], now).as_deref(), Some("new"));
    }
}
