//! JWT access tokens (RFC 9068) verified against the issuer's JWKS (A-05): an allowlist of
//! asymmetric algorithms (never `none`, never HMAC, so a public key can never be used as an HMAC
//! secret), `typ` `at+jwt`, the exact issuer, this resource in `aud` (RFC 8707), `exp` and `nbf`
//! with a small leeway. The JWKS is found through the issuer's RFC 8414 or OpenID metadata (or
//! configured), fetched on first use, and fetched again once, rate-limited, when a token names a
//! key it does not hold, so key rotation works without a restart. Verified tokens are cached by
//! a SHA-256 of the token, bounded and until they expire.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::{TokenError, VerifiedToken};

/// The algorithms accepted by default: every asymmetric one the library knows. HMAC is never
/// accepted, whatever the configuration says.
pub const DEFAULT_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// A source of Unix time in seconds (injectable for tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

/// How JWT access tokens are checked.
#[derive(Clone)]
pub struct JwtConfig {
    issuer: String,
    resource: String,
    jwks_uri: Option<String>,
    algorithms: Vec<Algorithm>,
    leeway: Duration,
    min_refresh_interval: Duration,
    cache_capacity: usize,
    clock: Clock,
}

impl std::fmt::Debug for JwtConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtConfig")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("jwks_uri", &self.jwks_uri)
            .field("algorithms", &self.algorithms)
            .field("leeway", &self.leeway)
            .finish_non_exhaustive()
    }
}

impl JwtConfig {
    /// Tokens of `issuer` (compared exactly) for `resource`, the canonical URI of this MCP
    /// endpoint (it must be in `aud`). Defaults: every asymmetric algorithm, 60 s leeway, a
    /// JWKS refresh at most every 10 s, 10,000 cached tokens.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        JwtConfig {
            issuer: issuer.into(),
            resource: resource.into(),
            jwks_uri: None,
            algorithms: DEFAULT_ALGORITHMS.to_vec(),
            leeway: Duration::from_secs(60),
            min_refresh_interval: Duration::from_secs(10),
            cache_capacity: 10_000,
            clock: system_clock(),
        }
    }

    /// The JWKS URL, instead of finding it in the issuer's metadata.
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwks_uri = Some(uri.into());
        self
    }

    /// The accepted algorithms; HMAC ones are dropped.
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = Algorithm>) -> Self {
        self.algorithms = algorithms.into_iter().filter(|a| !is_hmac(*a)).collect();
        self
    }

    /// How far `exp` and `nbf` may be off (default 60 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// The least time between two JWKS fetches caused by unknown key ids (default 10 s).
    pub fn min_refresh_interval(mut self, interval: Duration) -> Self {
        self.min_refresh_interval = interval;
        self
    }

    /// How many verified tokens are remembered (default 10,000; 0 turns the cache off).
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// The clock, for tests.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The resource.
    pub fn resource(&self) -> &str {
        &self.resource
    }
}

fn is_hmac(algorithm: Algorithm) -> bool {
    matches!(
        algorithm,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    )
}

/// The issuer's signing keys.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, Key>,
    /// Keys without a `kid`, tried when a token names none.
    unnamed: Vec<Key>,
}

#[derive(Clone)]
struct Key {
    decoding: DecodingKey,
    /// The `alg` the JWK is restricted to, if it says.
    algorithm: Option<Algorithm>,
}

/// Verifies JWT access tokens of one issuer for one resource.
pub struct JwtVerifier {
    config: JwtConfig,
    http: reqwest::Client,
    keys: RwLock<Arc<Keys>>,
    /// When the JWKS was last fetched (seconds), under an async lock so that concurrent
    /// requests naming a new key cause one fetch.
    refreshed: tokio::sync::Mutex<Option<u64>>,
    cache: Mutex<TokenCache>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The RFC 9068 claims read here.
#[derive(Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    exp: Option<f64>,
    nbf: Option<f64>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    jti: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl JwtVerifier {
    /// A verifier; the JWKS is fetched on first use.
    pub fn new(config: JwtConfig) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let cache = TokenCache::new(config.cache_capacity);
        JwtVerifier {
            config,
            http,
            keys: RwLock::new(Arc::new(Keys::default())),
            refreshed: tokio::sync::Mutex::new(None),
            cache: Mutex::new(cache),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Verifies `token`: its identity and scopes, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, TokenError> {
        let now = (self.config.clock)();
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verified) = self.cache().get(&digest, now, self.config.leeway.as_secs()) {
            return Ok(verified);
        }
        let verified = self.verify_uncached(token, now).await?;
        self.cache().insert(digest, verified.clone());
        Ok(verified)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, TokenCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn verify_uncached(&self, token: &str, now: u64) -> Result<VerifiedToken, TokenError> {
        let invalid = |why: &str| TokenError::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            TokenError::Invalid(format!("not a JWT with a supported algorithm ({e})"))
        })?;
        if is_hmac(header.alg) || !self.config.algorithms.contains(&header.alg) {
            return Err(TokenError::Invalid(format!(
                "the algorithm {:?} is not accepted",
                header.alg
            )));
        }
        match header.typ.as_deref() {
            Some(t)
                if t.eq_ignore_ascii_case("at+jwt")
                    || t.eq_ignore_ascii_case("application/at+jwt") => {}
            _ => return Err(invalid("the token's typ is not at+jwt (RFC 9068)")),
        }
        let key = self.key_for(header.kid.as_deref(), now).await?;
        if key.algorithm.is_some_and(|a| a != header.alg) {
            return Err(invalid("the token's algorithm is not its key's"));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let claims = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
            .map_err(|e| TokenError::Invalid(format!("the signature does not verify ({e})")))?
            .claims;
        self.check_claims(claims, now)
    }

    fn check_claims(&self, claims: Claims, now: u64) -> Result<VerifiedToken, TokenError> {
        let invalid = |why: String| Err(TokenError::Invalid(why));
        let leeway = self.config.leeway.as_secs() as f64;
        let now_f = now as f64;
        if claims.iss.as_deref() != Some(self.config.issuer.as_str()) {
            return invalid(format!("the issuer is not {}", self.config.issuer));
        }
        let audiences = match claims.aud {
            Some(Audience::One(a)) => vec![a],
            Some(Audience::Many(a)) => a,
            None => Vec::new(),
        };
        if !audiences.iter().any(|a| a == &self.config.resource) {
            return invalid(format!("the token is not for {}", self.config.resource));
        }
        let Some(exp) = claims.exp else {
            return invalid("the token has no exp".into());
        };
        if now_f > exp + leeway {
            return invalid("the token expired".into());
        }
        if claims.nbf.is_some_and(|nbf| nbf > now_f + leeway) {
            return invalid("the token is not valid yet".into());
        }
        let Some(subject) = claims.sub.filter(|s| !s.is_empty()) else {
            return invalid("the token has no sub".into());
        };
        Ok(VerifiedToken {
            issuer: self.config.issuer.clone(),
            subject,
            client_id: claims.client_id,
            scopes: claims
                .scope
                .unwrap_or_default()
                .split_ascii_whitespace()
                .map(str::to_owned)
                .collect(),
            audiences,
            expires_at: exp.max(0.0) as u64,
            token_id: claims.jti,
        })
    }

    /// The key a token names, fetching the JWKS on first use and once more (rate-limited) when
    /// the key is unknown.
    async fn key_for(&self, kid: Option<&str>, now: u64) -> Result<Key, TokenError> {
        if let Some(key) = self.lookup(kid) {
            return Ok(key);
        }
        let mut refreshed = self.refreshed.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = self.lookup(kid) {
            return Ok(key);
        }
        let interval = self.config.min_refresh_interval.as_secs();
        if refreshed.is_some_and(|at| now < at.saturating_add(interval)) {
            return Err(TokenError::Invalid(format!(
                "the key {} is unknown",
                kid.unwrap_or("(no kid)")
            )));
        }
        *refreshed = Some(now);
        let keys = self.fetch_keys().await?;
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
        self.lookup(kid).ok_or_else(|| {
            TokenError::Invalid(format!("the key {} is unknown", kid.unwrap_or("(no kid)")))
        })
    }

    fn lookup(&self, kid: Option<&str>) -> Option<Key> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner()).clone();
        match kid {
            Some(kid) => keys.by_id.get(kid).cloned(),
            None if keys.unnamed.len() + keys.by_id.len() == 1 => keys
                .unnamed
                .first()
                .or_else(|| keys.by_id.values().next())
                .cloned(),
            None => None,
        }
    }

    async fn fetch_keys(&self) -> Result<Keys, TokenError> {
        let jwks_uri = match &self.config.jwks_uri {
            Some(uri) => uri.clone(),
            None => self.discover_jwks_uri().await?,
        };
        let set: JwkSet = self.get_json(&jwks_uri).await?;
        let mut keys = Keys::default();
        for jwk in &set.keys {
            let Some(key) = signing_key(jwk) else {
                continue;
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_id.insert(kid.clone(), key);
                }
                None => keys.unnamed.push(key),
            }
        }
        tracing::debug!(keys = keys.by_id.len() + keys.unnamed.len(), %jwks_uri, "JWKS fetched");
        Ok(keys)
    }

    /// The `jwks_uri` of the issuer's RFC 8414 metadata, else of its OpenID configuration; the
    /// metadata must name the same issuer.
    async fn discover_jwks_uri(&self) -> Result<String, TokenError> {
        #[derive(Deserialize)]
        struct Metadata {
            issuer: String,
            jwks_uri: Option<String>,
        }
        let issuer = self.config.issuer.trim_end_matches('/');
        let (origin, path) = split_origin(issuer);
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut last = String::new();
        for url in candidates {
            match self.get_json::<Metadata>(&url).await {
                Ok(meta) if meta.issuer == self.config.issuer => {
                    if let Some(jwks) = meta.jwks_uri {
                        return Ok(jwks);
                    }
                    last = format!("{url} names no jwks_uri");
                }
                Ok(meta) => last = format!("{url} names another issuer ({})", meta.issuer),
                Err(e) => last = e.to_string(),
            }
        }
        Err(TokenError::Unavailable(format!(
            "cannot find the issuer's keys: {last}"
        )))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, TokenError> {
        let unavailable = |e: String| TokenError::Unavailable(format!("{url}: {e}"));
        let response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        response
            .json()
            .await
            .map_err(|e| unavailable(e.to_string()))
    }
}

/// `scheme://host[:port]` and the path of a URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// A JWK usable to verify signatures: an asymmetric public key, not marked for encryption.
fn signing_key(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    if matches!(
        jwk.algorithm,
        jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
    ) {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        Some(KeyAlgorithm::RS256) => Some(Algorithm::RS256),
        Some(KeyAlgorithm::RS384) => Some(Algorithm::RS384),
        Some(KeyAlgorithm::RS512) => Some(Algorithm::RS512),
        Some(KeyAlgorithm::PS256) => Some(Algorithm::PS256),
        Some(KeyAlgorithm::PS384) => Some(Algorithm::PS384),
        Some(KeyAlgorithm::PS512) => Some(Algorithm::PS512),
        Some(KeyAlgorithm::ES256) => Some(Algorithm::ES256),
        Some(KeyAlgorithm::ES384) => Some(Algorithm::ES384),
        Some(KeyAlgorithm::EdDSA) => Some(Algorithm::EdDSA),
        Some(KeyAlgorithm::HS256 | KeyAlgorithm::HS384 | KeyAlgorithm::HS512) => return None,
        _ => None,
    };
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        decoding,
        algorithm,
    })
}

/// Verified tokens by the SHA-256 of their text, oldest evicted first beyond the capacity.
struct TokenCache {
    entries: HashMap<[u8; 32], VerifiedToken>,
    order: VecDeque<[u8; 32]>,
    capacity: usize,
}

impl TokenCache {
    fn new(capacity: usize) -> Self {
        TokenCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    fn get(&mut self, digest: &[u8; 32], now: u64, leeway: u64) -> Option<VerifiedToken> {
        let verified = self.entries.get(digest)?;
        if now > verified.expires_at.saturating_add(leeway) {
            self.entries.remove(digest);
            return None;
        }
        Some(verified.clone())
    }

    fn insert(&mut self, digest: [u8; 32], verified: VerifiedToken) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.insert(digest, verified).is_none() {
            self.order.push_back(digest);
        }
        while self.entries.len() > self.capacity || self.order.len() > 2 * self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_split_for_rfc_8414_path_insertion() {
        assert_eq!(
            split_origin("https://as.example.com"),
            ("https://as.example.com", "")
        );
        assert_eq!(
            split_origin("https://as.example.com/tenant1"),
            ("https://as.example.com", "/tenant1")
        );
        assert_eq!(
            split_origin("http://127.0.0.1:4000/a/b"),
            ("http://127.0.0.1:4000", "/a/b")
        );
    }

    #[test]
    fn hmac_is_never_configurable() {
        let config = JwtConfig::new("i", "r").algorithms([Algorithm::HS256, Algorithm::ES256]);
        assert_eq!(config.algorithms, [Algorithm::ES256]);
        assert!(DEFAULT_ALGORITHMS.iter().all(|a| !is_hmac(*a)));
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_expired_tokens() {
        let token = |exp| VerifiedToken {
            issuer: "i".into(),
            subject: "s".into(),
            client_id: None,
            scopes: Vec::new(),
            audiences: Vec::new(),
            expires_at: exp,
            token_id: None,
        };
        let mut cache = TokenCache::new(2);
        cache.insert([1; 32], token(100));
        cache.insert([2; 32], token(100));
        cache.insert([3; 32], token(100));
        assert!(cache.get(&[1; 32], 0, 0).is_none(), "the oldest went");
        assert!(cache.get(&[3; 32], 100, 0).is_some());
        assert!(cache.get(&[3; 32], 101, 0).is_none(), "expired");
        assert!(cache.get(&[2; 32], 130, 60).is_some(), "within the leeway");
        assert!(cache.entries.len() <= 2 && cache.order.len() <= 4);
    }
}
