//! JWT access tokens (RFC 9068) verified against the issuer's JWKS (A-05): an allowlist of
//! asymmetric algorithms (never `none`, never HMAC, so a public key can never be used as an HMAC
//! secret), `typ` `at+jwt`, the exact issuer, this resource in `aud` (RFC 8707), `exp` and `nbf`
//! with a small leeway. The JWKS is found through the issuer's RFC 8414 or OpenID metadata (or
//! configured), fetched on first use, and fetched again once, rate-limited, when a token names a
//! key it does not hold, so key rotation works without a restart. Verified tokens are cached by
//! a SHA-256 of the token, bounded and until they expire.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::cache::{TokenCache, digest};
use crate::discovery::{get_json, http_client, issuer_metadata, same_resource};
use crate::{TokenError, TokenVerifier, VerifiedToken};

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

pub(crate) fn system_clock() -> Clock {
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
    cache: TokenCache,
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
pub(crate) enum Audience {
    One(String),
    Many(Vec<String>),
}

impl JwtVerifier {
    /// A verifier; the JWKS is fetched on first use.
    pub fn new(config: JwtConfig) -> Self {
        let cache = TokenCache::new(config.cache_capacity);
        JwtVerifier {
            config,
            http: http_client(),
            keys: RwLock::new(Arc::new(Keys::default())),
            refreshed: tokio::sync::Mutex::new(None),
            cache,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Verifies `token`: its identity and scopes, or why it is refused. A token verified
    /// before is answered from the cache until it expires (plus the leeway).
    pub async fn verify(&self, token: &str) -> Result<Arc<VerifiedToken>, TokenError> {
        let now = (self.config.clock)();
        let digest = digest(token);
        if let Some(verified) = self.cache.get(&digest, now) {
            return Ok(verified);
        }
        let verified = Arc::new(self.verify_uncached(token, now).await?);
        let until = verified
            .expires_at
            .unwrap_or(now)
            .saturating_add(self.config.leeway.as_secs());
        self.cache.insert(digest, verified.clone(), until);
        Ok(verified)
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
        let all = jsonwebtoken::decode::<serde_json::Value>(token, &key.decoding, &validation)
            .map_err(|e| TokenError::Invalid(format!("the signature does not verify ({e})")))?
            .claims;
        let claims = Claims::deserialize(&all)
            .map_err(|e| TokenError::Invalid(format!("the token's claims do not read ({e})")))?;
        let mut verified = self.check_claims(claims, now)?;
        if let serde_json::Value::Object(all) = all {
            verified.claims = Arc::new(all);
        }
        Ok(verified)
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
        if !audiences
            .iter()
            .any(|a| same_resource(a, &self.config.resource))
        {
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
        let scopes: Vec<String> = claims
            .scope
            .unwrap_or_default()
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect();
        let mut verified = VerifiedToken::new(self.config.issuer.clone(), subject, scopes);
        verified.client_id = claims.client_id;
        verified.audiences = audiences;
        verified.expires_at = Some(exp.max(0.0) as u64);
        verified.token_id = claims.jti;
        Ok(verified)
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
            None => issuer_metadata(&self.http, &self.config.issuer, "jwks_uri", |m| {
                m.jwks_uri.is_some()
            })
            .await?
            .jwks_uri
            .unwrap_or_default(),
        };
        let set: JwkSet = get_json(&self.http, &jwks_uri).await?;
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
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>> {
        Box::pin(JwtVerifier::verify(self, token))
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

/// The fuzz target's entry (`fuzz/`), since a token is untrusted input: a token's header as `verify` reads it, and its
/// claims (the payload segment, or the input itself as JSON) through the same checks as a
/// verified token's. The signature is jsonwebtoken's to check and is not reached.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_jwt(data: &[u8]) {
    use base64::Engine as _;
    static VERIFIER: std::sync::OnceLock<JwtVerifier> = std::sync::OnceLock::new();
    let verifier = VERIFIER.get_or_init(|| {
        JwtVerifier::new(JwtConfig::new(
            "https://issuer.example",
            "https://mcp.example/mcp",
        ))
    });
    let check = |json: &[u8]| {
        if let Ok(claims) = serde_json::from_slice::<Claims>(json) {
            let _ = verifier.check_claims(claims, 1_800_000_000);
        }
    };
    check(data);
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let _ = jsonwebtoken::decode_header(token);
    if let Some(payload) = token.split('.').nth(1) {
        if let Ok(json) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) {
            check(&json);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_is_never_configurable() {
        let config = JwtConfig::new("i", "r").algorithms([Algorithm::HS256, Algorithm::ES256]);
        assert_eq!(config.algorithms, [Algorithm::ES256]);
        assert!(DEFAULT_ALGORITHMS.iter().all(|a| !is_hmac(*a)));
    }
}
