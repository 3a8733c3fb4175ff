//! The authorization flow inside a client (A-08…A-18). [`OAuth`] (in `oauth.rs`) is its
//! configuration, given to [`ClientBuilder::oauth`](crate::ClientBuilder::oauth); [`Flow`] runs
//! it when the server challenges a request:
//!
//! 1. a 401 (or a 403 `insufficient_scope`) reaches the request path with its challenge;
//! 2. discovery: the resource metadata (which must name this server) and its authorization
//!    server's metadata, every time, so a server that moved to another authorization server is
//!    followed (and a new identity is used there, never the old one: A-10);
//! 3. on a 401, tokens already held for (issuer, resource) that the server has not refused yet,
//!    else a refresh when a refresh token was issued (A-17);
//! 4. otherwise an identity at that issuer (configured › kept from an earlier registration ›
//!    a Client ID Metadata Document › dynamic registration, A-11), and a grant: the
//!    authorization code through the [`Authorizer`] (PKCE, `state`, `resource`, `iss`:
//!    A-12…A-14) or client credentials for a machine client; the scope is the challenge's,
//!    else the resource's, and on a step-up the union of what was granted and what is asked
//!    (A-16);
//! 5. the tokens are kept in the [`CredentialStore`] under (issuer, resource) and the request
//!    is sent again with the new Bearer (A-15). The request path bounds the attempts.
//!
//! One flow runs at a time per client; requests refused meanwhile wait for it and then retry
//! with its token.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;

use reqwest::header::HeaderValue;

use super::authorizer::Authorizer;
use super::challenge::{self, Challenge};
use super::discovery::{self, Discovered};
use super::http::AuthHttp;
use super::oauth::{AuthError, Authorized, OAuth};
use super::request::{self, Pkce};
use super::store::StoredTokens;
use super::token::{self, ClientIdentity, TokenError, Tokens};

/// Challenges one request may answer by authorizing before its refusal is final (the
/// conformance suite's retry limit: at most three authorizations for one request).
pub(crate) const MAX_ATTEMPTS: usize = 3;

/// Whether a refusal is one the flow answers: a 401, or a 403 whose Bearer challenge says
/// `insufficient_scope` (a step-up, A-16). Any other 403 is final.
pub(crate) fn answerable(status: u16, header: Option<&str>) -> bool {
    status == 401
        || (status == 403
            && header
                .and_then(|h| challenge::bearer([h]))
                .is_some_and(|c| c.error() == Some("insufficient_scope")))
}

/// What the flow holds for its server.
#[derive(Default)]
struct Held {
    /// Bumped by every new token; a request refused with an older one just retries.
    generation: u64,
    /// The issuer and resource of the current tokens.
    issuer: String,
    resource: String,
    tokens: Option<StoredTokens>,
    /// The scope asked for, when the server did not say what it granted.
    requested: Option<String>,
    /// The issuer configured credentials without one were first used at.
    bound: Option<String>,
    /// The current token was just issued to this flow (by a grant or a refresh), not kept
    /// from before.
    fresh: bool,
}

/// The flow for one client's server.
pub(crate) struct Flow {
    config: OAuth,
    server: String,
    http: AuthHttp,
    /// The current `Authorization` value and its generation: read by every request, without
    /// a lock (written only when a token is installed).
    bearer: ArcSwap<(u64, Option<HeaderValue>)>,
    /// What the current token is, for the client's owner.
    authorized: RwLock<Option<Authorized>>,
    /// The newest token generation a request was answered with (not challenged).
    confirmed: AtomicU64,
    held: tokio::sync::Mutex<Held>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Flow {
    pub(crate) fn new(config: OAuth, server: String) -> Flow {
        let http = AuthHttp::new(server.clone()).allow_insecure_http(config.insecure_http);
        Flow {
            config,
            server,
            http,
            bearer: ArcSwap::from_pointee((0, None)),
            authorized: RwLock::new(None),
            confirmed: AtomicU64::new(0),
            held: tokio::sync::Mutex::new(Held::default()),
        }
    }

    /// The `Authorization` header to send and the generation of its token.
    pub(crate) fn bearer(&self) -> (u64, Option<HeaderValue>) {
        let current = self.bearer.load();
        (current.0, current.1.clone())
    }

    /// The authorization the client holds, once it has one.
    pub(crate) fn authorized(&self) -> Option<Authorized> {
        self.authorized
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answers a challenge to a request sent with the token of `generation`: `Ok` when a new
    /// token is in place and the request should be sent again.
    pub(crate) async fn answer(
        &self,
        generation: u64,
        status: u16,
        header: Option<&str>,
    ) -> Result<(), AuthError> {
        let challenge = header.and_then(|h| challenge::bearer([h]));
        let mut held = self.held.lock().await;
        if held.generation != generation {
            // Another request renewed the token meanwhile.
            return Ok(());
        }
        let found = discovery::discover(&self.http, challenge.as_ref()).await?;
        let issuer = found.authorization_server.issuer.clone();
        let resource = found.resource.resource.clone();
        let step_up = status == 403;
        if !step_up {
            // A token just issued (not one kept from before), refused before the server
            // accepted it once: another from the same authorization server for the same
            // resource would be refused too, and asking the person again would only loop.
            let unconfirmed = self.confirmed.load(Ordering::Acquire) < held.generation;
            if held.fresh && unconfirmed && held.issuer == issuer && held.resource == resource {
                return Err(AuthError::Refused {
                    server: self.server.clone(),
                    issuer,
                });
            }
            if let Some((tokens, fresh)) = self.kept(&held, &found).await? {
                self.install(&mut held, &issuer, &resource, tokens, None)?;
                held.fresh = fresh;
                return Ok(());
            }
        }
        let scope = self.scope(&held, &found, challenge.as_ref(), step_up);
        let tokens = self.grant(&mut held, &found, scope.as_deref()).await?;
        self.config.store.save_tokens(&issuer, &resource, &tokens)?;
        self.install(&mut held, &issuer, &resource, tokens, scope)?;
        held.fresh = true;
        Ok(())
    }

    /// Records that a request sent with the token of `generation` was answered (not
    /// challenged): the token works.
    pub(crate) fn confirm(&self, generation: u64) {
        self.confirmed.fetch_max(generation, Ordering::AcqRel);
    }

    fn install(
        &self,
        held: &mut Held,
        issuer: &str,
        resource: &str,
        tokens: StoredTokens,
        requested: Option<String>,
    ) -> Result<(), AuthError> {
        let value = HeaderValue::from_str(&format!("Bearer {}", tokens.tokens.access_token))
            .map_err(|_| {
                TokenError::Transport("the access token is not a valid header value".into())
            })?;
        held.generation += 1;
        held.fresh = false;
        held.issuer = issuer.to_owned();
        held.resource = resource.to_owned();
        if requested.is_some() || held.tokens.is_none() {
            held.requested = requested;
        }
        *self.authorized.write().unwrap_or_else(|e| e.into_inner()) = Some(Authorized {
            issuer: issuer.to_owned(),
            resource: resource.to_owned(),
            scope: tokens.tokens.scope.clone(),
            expires_at: tokens.tokens.expires_in.map(|ttl| tokens.obtained_at + ttl),
            refreshable: tokens.tokens.refresh_token.is_some(),
        });
        held.tokens = Some(tokens);
        self.bearer.store(Arc::new((held.generation, Some(value))));
        Ok(())
    }

    /// Tokens for (issuer, resource) other than the refused ones: still valid in the store
    /// (another run got them), or refreshed (A-17; then `true`: just issued). A failed
    /// refresh is not an error: a new authorization follows.
    async fn kept(
        &self,
        held: &Held,
        found: &Discovered,
    ) -> Result<Option<(StoredTokens, bool)>, AuthError> {
        let server = &found.authorization_server;
        let (issuer, resource) = (server.issuer.as_str(), found.resource.resource.as_str());
        let refused = held.tokens.as_ref().map(|t| t.tokens.access_token.as_str());
        let Some(stored) = self.config.store.tokens(issuer, resource)? else {
            return Ok(None);
        };
        if Some(stored.tokens.access_token.as_str()) != refused && !stored.expired(30) {
            return Ok(Some((stored, false)));
        }
        let Some(refresh_token) = stored.tokens.refresh_token.clone() else {
            return Ok(None);
        };
        let Some(identity) = self.config.store.identity(issuer)? else {
            return Ok(None);
        };
        match token::refresh(&self.http, server, &identity, &refresh_token, resource).await {
            Ok(mut tokens) => {
                // A server that issues no new refresh token keeps the old one valid.
                tokens.refresh_token.get_or_insert(refresh_token);
                if tokens.scope.is_none() {
                    tokens.scope = stored.tokens.scope.clone();
                }
                let tokens = StoredTokens::now(tokens);
                self.config.store.save_tokens(issuer, resource, &tokens)?;
                tracing::info!(%issuer, "access token refreshed");
                Ok(Some((tokens, true)))
            }
            Err(error) => {
                // Another process may have spent the same refresh token a moment ago (a server
                // that rotates them refuses it the second time): its tokens are in the store.
                if let Some(newer) = self.config.store.tokens(issuer, resource)? {
                    let token = newer.tokens.access_token.as_str();
                    if token != stored.tokens.access_token
                        && Some(token) != refused
                        && !newer.expired(30)
                    {
                        tracing::info!(%issuer, "tokens renewed by another process are used");
                        return Ok(Some((newer, false)));
                    }
                }
                tracing::info!(%issuer, %error, "the refresh token was refused; authorizing again");
                Ok(None)
            }
        }
    }

    /// The scope to ask for (A-16): configured, else on a step-up the union of what was
    /// granted and what the challenge asks, else the challenge's or the resource's; with
    /// `offline_access` where the authorization server lists it and a person authorizes (a
    /// refresh token spares asking again).
    fn scope(
        &self,
        held: &Held,
        found: &Discovered,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Option<String> {
        if let Some(scope) = &self.config.scope {
            return Some(scope.clone());
        }
        let challenged = challenge.and_then(Challenge::scope).unwrap_or_default();
        let mut scope = if step_up {
            let granted = held
                .tokens
                .as_ref()
                .and_then(|t| t.tokens.scope.clone())
                .or_else(|| held.requested.clone());
            Some(request::step_up_scope(granted.as_deref(), challenged)).filter(|s| !s.is_empty())
        } else {
            request::initial_scope(challenge, &found.resource)
        };
        let server = &found.authorization_server;
        if !self.config.machine
            && server
                .scopes_supported
                .iter()
                .any(|s| s == "offline_access")
        {
            let with = request::step_up_scope(scope.as_deref(), "offline_access");
            scope = Some(with);
        }
        scope
    }

    /// New tokens from the authorization server `found` names.
    async fn grant(
        &self,
        held: &mut Held,
        found: &Discovered,
        scope: Option<&str>,
    ) -> Result<StoredTokens, AuthError> {
        let server = &found.authorization_server;
        let resource = &found.resource.resource;
        let mut tokens = if self.config.machine {
            let identity = self.identity(held, found, None).await?;
            token::client_credentials(&self.http, server, &identity, resource, scope).await?
        } else {
            let authorizer =
                self.config
                    .authorizer
                    .as_ref()
                    .ok_or_else(|| AuthError::NoAuthorizer {
                        server: self.server.clone(),
                    })?;
            let redirect_uri = authorizer.redirect_uri().await?;
            let identity = self.identity(held, found, Some(&redirect_uri)).await?;
            self.authorization_code(authorizer.as_ref(), found, &identity, &redirect_uri, scope)
                .await?
        };
        if tokens.scope.is_none() {
            // RFC 6749 §5.1: an omitted scope is the scope requested.
            tokens.scope = scope.map(str::to_owned);
        }
        Ok(StoredTokens::now(tokens))
    }

    async fn authorization_code(
        &self,
        authorizer: &dyn Authorizer,
        found: &Discovered,
        identity: &ClientIdentity,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<Tokens, AuthError> {
        let server = &found.authorization_server;
        let (pkce, state) = (Pkce::new(), request::random_token());
        let asked = request::AuthorizationRequest {
            client_id: &identity.client_id,
            redirect_uri,
            scope,
            state: &state,
            pkce: &pkce,
        };
        let url = request::authorization_url(server, &found.resource, &asked)?;
        let redirect = authorizer.authorize(&url).await?;
        let code = request::read_redirect(&redirect, server, &state)?;
        let grant = token::CodeGrant {
            code: &code,
            redirect_uri,
            verifier: &pkce.verifier,
            resource: &found.resource.resource,
        };
        Ok(token::exchange_code(&self.http, server, identity, grant).await?)
    }

    /// The client's identity at the issuer `found` names (A-10, A-11): configured for it,
    /// kept from an earlier registration there, a metadata document, or a new registration
    /// (for `redirect_uri`; a machine client registers nothing).
    async fn identity(
        &self,
        held: &mut Held,
        found: &Discovered,
        redirect_uri: Option<&str>,
    ) -> Result<ClientIdentity, AuthError> {
        let server = &found.authorization_server;
        let issuer = &server.issuer;
        if let Some(configured) = &self.config.configured {
            let usable = match (&configured.issuer, &held.bound) {
                (Some(theirs), _) => theirs == issuer,
                (None, Some(bound)) => bound == issuer,
                (None, None) => true,
            };
            if usable {
                if configured.issuer.is_none() {
                    held.bound = Some(issuer.clone());
                }
                let mut identity = ClientIdentity::new(
                    issuer.clone(),
                    configured.client_id.clone(),
                    configured.client_secret.clone(),
                );
                identity.private_key = configured.private_key.clone();
                return Ok(identity);
            }
            if self.config.machine {
                return Err(AuthError::NoIdentity {
                    issuer: issuer.clone(),
                    why: format!(
                        "the configured client belongs to {}, and credentials are never taken \
                         to another authorization server",
                        configured
                            .issuer
                            .as_deref()
                            .or(held.bound.as_deref())
                            .unwrap_or("?")
                    ),
                });
            }
        }
        if let Some(identity) = self.config.store.identity(issuer)? {
            return Ok(identity);
        }
        if let Some(document) = &self.config.metadata_document {
            if server.client_id_metadata_document_supported {
                return Ok(ClientIdentity::new(issuer.clone(), document.clone(), None));
            }
        }
        if server.registration_endpoint.is_none() {
            return Err(AuthError::NoIdentity {
                issuer: issuer.clone(),
                why: "it offers no dynamic registration and no client ID metadata documents; \
                      register a client there and configure its id"
                    .into(),
            });
        }
        let redirect_uris: Vec<String> = redirect_uri.map(str::to_owned).into_iter().collect();
        let identity =
            token::register(&self.http, server, &self.config.client_name, &redirect_uris).await?;
        self.config.store.save_identity(&identity)?;
        tracing::info!(%issuer, client_id = %identity.client_id, "registered with the authorization server");
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{CredentialStore, MemoryStore};

    #[test]
    fn only_a_401_or_an_insufficient_scope_403_is_answered() {
        assert!(answerable(401, None));
        assert!(answerable(401, Some(r#"Bearer error="invalid_token""#)));
        assert!(answerable(
            403,
            Some(r#"Bearer error="insufficient_scope", scope="math""#)
        ));
        // Any other 403 is final: authorizing again would not change the answer.
        assert!(!answerable(403, None));
        assert!(!answerable(403, Some(r#"Bearer error="invalid_token""#)));
        assert!(!answerable(403, Some(r#"Basic realm="x""#)));
    }

    /// Two processes hold the same expired token: the other refreshed first, and this one's
    /// refresh, with the refresh token the other spent, is refused (a server that rotates
    /// refresh tokens). The tokens the other kept are used, nobody is asked again.
    #[tokio::test]
    async fn a_refresh_lost_to_another_process_uses_its_tokens() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let (issuer, resource) = (origin.clone(), format!("{origin}/mcp"));
        let store = Arc::new(MemoryStore::new());
        let tokens = |access: &str, refresh: &str, ttl: u64| {
            StoredTokens::now(Tokens {
                access_token: access.into(),
                token_type: "Bearer".into(),
                expires_in: Some(ttl),
                refresh_token: Some(refresh.into()),
                scope: None,
            })
        };
        store
            .save_tokens(&issuer, &resource, &tokens("old", "spent", 0))
            .unwrap();
        store
            .save_identity(&ClientIdentity::new(issuer.clone(), "c", None))
            .unwrap();
        // The token endpoint: meanwhile the other process kept its new tokens.
        let other = (store.clone(), issuer.clone(), resource.clone());
        let app = axum::Router::new().route(
            "/token",
            axum::routing::post(move || {
                let (store, issuer, resource) = other.clone();
                async move {
                    store
                        .save_tokens(&issuer, &resource, &tokens("theirs", "next", 3600))
                        .unwrap();
                    (
                        axum::http::StatusCode::BAD_REQUEST,
                        [("content-type", "application/json")],
                        r#"{"error":"invalid_grant"}"#,
                    )
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let flow = Flow::new(OAuth::new().store(store.clone()), resource.clone());
        let found = Discovered {
            metadata_url: String::new(),
            resource: serde_json::from_value(serde_json::json!({
                "resource": resource, "authorization_servers": [issuer]
            }))
            .unwrap(),
            authorization_server: serde_json::from_value(serde_json::json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token")
            }))
            .unwrap(),
        };
        let kept = flow.kept(&Held::default(), &found).await.unwrap();
        let (tokens, fresh) = kept.expect("the other process's tokens");
        assert_eq!(tokens.tokens.access_token, "theirs");
        assert!(!fresh);
    }

    #[test]
    fn configured_credentials_bind_to_the_first_issuer() {
        let flow = Flow::new(
            OAuth::new()
                .client(None, "svc", Some("s".into()))
                .client_credentials(),
            "https://mcp.example/mcp".into(),
        );
        let found = |issuer: &str| Discovered {
            metadata_url: String::new(),
            resource: serde_json::from_value(serde_json::json!({
                "resource": "https://mcp.example/mcp",
                "authorization_servers": [issuer]
            }))
            .unwrap(),
            authorization_server: serde_json::from_value(serde_json::json!({"issuer": issuer}))
                .unwrap(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut held = Held::default();
        let first = runtime
            .block_on(flow.identity(&mut held, &found("https://as1"), None))
            .unwrap();
        assert_eq!(
            (first.issuer.as_str(), first.client_id.as_str()),
            ("https://as1", "svc")
        );
        // The server moved: the secret is not taken to the new authorization server.
        match runtime.block_on(flow.identity(&mut held, &found("https://as2"), None)) {
            Err(AuthError::NoIdentity { issuer, why }) => {
                assert_eq!(issuer, "https://as2");
                assert!(why.contains("https://as1"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }
}
