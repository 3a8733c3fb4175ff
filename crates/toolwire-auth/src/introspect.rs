//! Opaque access tokens, verified by asking their issuer (RFC 7662 token introspection): the
//! resource server authenticates to the introspection endpoint with its own client credentials
//! (HTTP Basic, RFC 6749 §2.3.1) and accepts a token only if the answer says it is `active`,
//! was issued by the configured issuer, names this resource in `aud` (RFC 8707: a token for
//! another server is refused, A-05), and is within `exp`/`nbf` (with the leeway). Answers are
//! cached by the token's SHA-256, no longer than the token lives and no longer than
//! [`IntrospectionConfig::cache_for`] (so a revoked token stops working within that time).
//! Refusals are not cached; at most [`IntrospectionConfig::max_concurrent`] introspection calls
//! are in flight, so a flood of junk tokens cannot turn into a flood on the issuer.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use tokio::sync::{OnceCell, Semaphore};

use crate::cache::{TokenCache, digest};
use crate::discovery::{http_client, issuer_metadata, same_resource};
use crate::jwt::{Audience, Clock, system_clock};
use crate::{TokenError, TokenVerifier, VerifiedToken};

/// How opaque tokens are introspected.
#[derive(Clone)]
pub struct IntrospectionConfig {
    issuer: String,
    resource: String,
    endpoint: Option<String>,
    client_id: String,
    client_secret: String,
    leeway: Duration,
    cache_for: Duration,
    cache_capacity: usize,
    max_concurrent: usize,
    clock: Clock,
}

impl std::fmt::Debug for IntrospectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client secret is never printed.
        f.debug_struct("IntrospectionConfig")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("cache_for", &self.cache_for)
            .finish_non_exhaustive()
    }
}

impl IntrospectionConfig {
    /// Tokens of `issuer` for `resource` (this MCP endpoint's canonical URI), introspected with
    /// the resource server's client credentials. The endpoint is the issuer's
    /// `introspection_endpoint` (RFC 8414 metadata) unless [`IntrospectionConfig::endpoint`]
    /// names it. Defaults: 60 s leeway, answers cached for at most 60 s, 10,000 cached tokens,
    /// 32 calls in flight.
    pub fn new(
        issuer: impl Into<String>,
        resource: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        IntrospectionConfig {
            issuer: issuer.into(),
            resource: resource.into(),
            endpoint: None,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            leeway: Duration::from_secs(60),
            cache_for: Duration::from_secs(60),
            cache_capacity: 10_000,
            max_concurrent: 32,
            clock: system_clock(),
        }
    }

    /// The introspection endpoint, instead of finding it in the issuer's metadata.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// How far `exp` and `nbf` may be off (default 60 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// The longest an answer is trusted before the issuer is asked again (default 60 s; zero
    /// asks on every request): the longest a revoked token keeps working.
    pub fn cache_for(mut self, duration: Duration) -> Self {
        self.cache_for = duration;
        self
    }

    /// How many answers are remembered (default 10,000).
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// The most introspection calls in flight at once (default 32; at least 1).
    pub fn max_concurrent(mut self, calls: usize) -> Self {
        self.max_concurrent = calls.max(1);
        self
    }

    /// The clock, for tests.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }
}

/// Verifies opaque access tokens by introspection.
pub struct Introspector {
    config: IntrospectionConfig,
    http: reqwest::Client,
    /// The endpoint, configured or discovered once.
    endpoint: OnceCell<String>,
    in_flight: Semaphore,
    cache: TokenCache,
}

impl std::fmt::Debug for Introspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The RFC 7662 answer, the fields read here.
#[derive(Deserialize)]
struct Introspected {
    #[serde(default)]
    active: bool,
    scope: Option<String>,
    client_id: Option<String>,
    sub: Option<String>,
    aud: Option<Audience>,
    iss: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
    jti: Option<String>,
    token_type: Option<String>,
}

impl Introspector {
    /// An introspector; the endpoint is discovered on first use if not configured.
    pub fn new(config: IntrospectionConfig) -> Self {
        let endpoint = match &config.endpoint {
            Some(url) => OnceCell::new_with(Some(url.clone())),
            None => OnceCell::new(),
        };
        Introspector {
            http: http_client(),
            endpoint,
            in_flight: Semaphore::new(config.max_concurrent),
            cache: TokenCache::new(config.cache_capacity),
            config,
        }
    }

    /// Verifies `token` by introspection, or from the cache.
    pub async fn verify(&self, token: &str) -> Result<Arc<VerifiedToken>, TokenError> {
        let now = (self.config.clock)();
        let digest = digest(token);
        if let Some(verified) = self.cache.get(&digest, now) {
            return Ok(verified);
        }
        let all = self.introspect(token).await?;
        let answer = Introspected::deserialize(&all)
            .map_err(|e| TokenError::Unavailable(format!("not an introspection answer ({e})")))?;
        let mut verified = self.check(answer, now)?;
        if let serde_json::Value::Object(all) = all {
            verified.claims = Arc::new(all);
        }
        let verified = Arc::new(verified);
        let trusted_until = now.saturating_add(self.config.cache_for.as_secs());
        let until = verified.expires_at.map_or(trusted_until, |exp| {
            exp.saturating_add(self.config.leeway.as_secs())
                .min(trusted_until)
        });
        if !self.config.cache_for.is_zero() {
            self.cache.insert(digest, verified.clone(), until);
        }
        Ok(verified)
    }

    async fn introspect(&self, token: &str) -> Result<serde_json::Value, TokenError> {
        // Discovery too is a call to the issuer: it waits for a permit like the rest, so an
        // issuer whose metadata is down is not asked more than max_concurrent times at once.
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| TokenError::Unavailable("the introspector is closed".into()))?;
        let endpoint = self
            .endpoint
            .get_or_try_init(|| async {
                let meta = issuer_metadata(
                    &self.http,
                    &self.config.issuer,
                    "introspection_endpoint",
                    |m| m.introspection_endpoint.is_some(),
                )
                .await?;
                Ok::<_, TokenError>(meta.introspection_endpoint.unwrap_or_default())
            })
            .await?;
        let unavailable = |e: String| TokenError::Unavailable(format!("{endpoint}: {e}"));
        let response = self
            .http
            .post(endpoint)
            .basic_auth(
                form_encode(&self.config.client_id),
                Some(form_encode(&self.config.client_secret)),
            )
            .header("accept", "application/json")
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            // 401 here means the resource server's own credentials are wrong, and 400
            // `unsupported_token_type` that the issuer cannot introspect this kind of token
            // (oidc-provider refuses JWTs): the operator's problem, not the caller's, so the
            // request is 503, not 401. The issuer's own words go to the log.
            let body = response.text().await.unwrap_or_default();
            let said: String = body.chars().take(200).collect();
            return Err(unavailable(format!("HTTP {status}: {said}")));
        }
        response
            .json()
            .await
            .map_err(|e| unavailable(format!("not an introspection answer ({e})")))
    }

    fn check(&self, answer: Introspected, now: u64) -> Result<VerifiedToken, TokenError> {
        let invalid = |why: String| Err(TokenError::Invalid(why));
        if !answer.active {
            return invalid("the issuer says the token is not active".into());
        }
        if answer
            .iss
            .as_ref()
            .is_some_and(|iss| *iss != self.config.issuer)
        {
            return invalid(format!("the issuer is not {}", self.config.issuer));
        }
        if let Some(kind) = &answer.token_type {
            if !kind.eq_ignore_ascii_case("bearer") && kind != "access_token" {
                return invalid(format!("the token is a {kind} token, not a Bearer token"));
            }
        }
        let audiences = match answer.aud {
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
        let leeway = self.config.leeway.as_secs() as f64;
        if answer.exp.is_some_and(|exp| now as f64 > exp + leeway) {
            return invalid("the token expired".into());
        }
        if answer.nbf.is_some_and(|nbf| nbf > now as f64 + leeway) {
            return invalid("the token is not valid yet".into());
        }
        // A client-credentials token has no user: its subject is the client, as in RFC 9068.
        let subject = answer
            .sub
            .filter(|s| !s.is_empty())
            .or_else(|| answer.client_id.clone().filter(|c| !c.is_empty()));
        let Some(subject) = subject else {
            return invalid("the token has neither sub nor client_id".into());
        };
        let scopes: Vec<String> = answer
            .scope
            .unwrap_or_default()
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect();
        let mut verified = VerifiedToken::new(self.config.issuer.clone(), subject, scopes);
        verified.client_id = answer.client_id;
        verified.audiences = audiences;
        verified.expires_at = answer.exp.map(|exp| exp.max(0.0) as u64);
        verified.token_id = answer.jti;
        Ok(verified)
    }
}

impl TokenVerifier for Introspector {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>> {
        Box::pin(Introspector::verify(self, token))
    }
}

/// `application/x-www-form-urlencoded` encoding of a client id or secret before HTTP Basic
/// (RFC 6749 §2.3.1).
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn introspector() -> Introspector {
        Introspector::new(
            IntrospectionConfig::new("https://id", "https://mcp/mcp", "rs", "secret")
                .endpoint("https://id/introspect")
                .clock(Arc::new(|| 1_000)),
        )
    }

    fn answer(json: serde_json::Value) -> Introspected {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn only_an_active_token_for_this_resource_passes() {
        let i = introspector();
        let good = serde_json::json!({"active": true, "aud": "https://mcp/mcp", "client_id": "c",
            "scope": "a b", "exp": 2000, "iss": "https://id", "token_type": "Bearer"});
        let verified = i.check(answer(good.clone()), 1_000).unwrap();
        assert_eq!(verified.principal(), "https://id c");
        assert_eq!(&*verified.scopes, ["a", "b"]);
        let refuse = |patch: serde_json::Value| {
            let mut json = good.clone();
            json.as_object_mut()
                .unwrap()
                .extend(patch.as_object().unwrap().clone());
            match i.check(answer(json), 1_000) {
                Err(TokenError::Invalid(why)) => why,
                other => panic!("{patch}: {other:?}"),
            }
        };
        assert!(refuse(serde_json::json!({"active": false})).contains("not active"));
        assert!(refuse(serde_json::json!({"aud": "https://other/mcp"})).contains("not for"));
        assert!(refuse(serde_json::json!({"aud": null})).contains("not for"));
        assert!(refuse(serde_json::json!({"iss": "https://evil"})).contains("issuer"));
        assert!(refuse(serde_json::json!({"exp": 900})).contains("expired"));
        assert!(refuse(serde_json::json!({"nbf": 1_100})).contains("not valid yet"));
        assert!(
            refuse(serde_json::json!({"token_type": "refresh_token"})).contains("not a Bearer")
        );
        assert!(refuse(serde_json::json!({"client_id": null})).contains("neither"));
        assert!(
            i.check(answer(serde_json::json!({})), 1_000).is_err(),
            "no active"
        );
    }

    #[test]
    fn credentials_are_form_encoded_and_never_printed() {
        assert_eq!(form_encode("a b:c%"), "a+b%3Ac%25");
        let debug = format!("{:?}", introspector());
        assert!(!debug.contains("secret\""), "{debug}");
    }
}
