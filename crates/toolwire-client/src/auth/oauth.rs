//! How a client is configured to authorize ([`OAuth`], given to
//! [`ClientBuilder::oauth`](crate::ClientBuilder::oauth)), what it holds once authorized
//! ([`Authorized`]), and why the flow got no token ([`AuthError`]). The flow that runs it is in
//! `flow.rs`.

use std::sync::Arc;

use super::authorizer::{Authorizer, AuthorizerError};
use super::discovery::DiscoveryError;
use super::request::AuthorizationError;
use super::store::{CredentialStore, MemoryStore, StoreError};
use super::token::{PrivateKey, TokenError};

/// Why the flow got no token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The server's authorization server could not be found, or its metadata is not to be
    /// trusted.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The authorization request or its answer (PKCE, state, iss, the server's refusal).
    #[error(transparent)]
    Authorization(#[from] AuthorizationError),
    /// Registration or the token endpoint.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The credential store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The person's step ([`Authorizer`]).
    #[error(transparent)]
    Authorizer(#[from] AuthorizerError),
    /// The client has no identity it may use at this authorization server.
    #[error("no client identity for the authorization server {issuer}: {why}")]
    NoIdentity {
        /// The issuer.
        issuer: String,
        /// What was missing.
        why: String,
    },
    /// The server refused a token its authorization server had just issued, before accepting
    /// one: no other is asked for (nor the person asked again).
    #[error(
        "the server {server} refused the token its authorization server {issuer} just issued \
         (is the server configured for that authorization server and this resource?)"
    )]
    Refused {
        /// The MCP server.
        server: String,
        /// The authorization server.
        issuer: String,
    },
    /// The server wants a person to authorize, and the client has no [`Authorizer`].
    #[error(
        "the server {server} needs a person to sign in, and this client has no one to ask (no \
         Authorizer): sign in beforehand (`toolwire login`) or configure client credentials"
    )]
    NoAuthorizer {
        /// The MCP server.
        server: String,
    },
}

/// Credentials registered with an authorization server beforehand.
#[derive(Debug, Clone)]
pub(super) struct Configured {
    /// The issuer they belong to; `None`: the server's, whichever it names first (then bound
    /// to it for the life of the client).
    pub(super) issuer: Option<String>,
    pub(super) client_id: String,
    pub(super) client_secret: Option<String>,
    pub(super) private_key: Option<PrivateKey>,
}

/// How a client authorizes with protected servers: where credentials are kept, who does the
/// person's step, and which identity and grant to use. Without an authorizer and client
/// credentials, a server that challenges gets only tokens already in the store.
#[derive(Clone)]
pub struct OAuth {
    pub(super) store: Arc<dyn CredentialStore>,
    pub(super) authorizer: Option<Arc<dyn Authorizer>>,
    pub(super) client_name: String,
    pub(super) configured: Option<Configured>,
    pub(super) metadata_document: Option<String>,
    pub(super) machine: bool,
    pub(super) scope: Option<String>,
    pub(super) insecure_http: bool,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("client_name", &self.client_name)
            .field("authorizer", &self.authorizer.is_some())
            .field("machine", &self.machine)
            .field("insecure_http", &self.insecure_http)
            .finish_non_exhaustive()
    }
}

impl Default for OAuth {
    fn default() -> Self {
        OAuth::new()
    }
}

impl OAuth {
    /// Authorization with credentials kept in memory, the name `toolwire` at registration, and
    /// no authorizer yet.
    pub fn new() -> OAuth {
        OAuth {
            store: Arc::new(MemoryStore::new()),
            authorizer: None,
            client_name: "toolwire".into(),
            configured: None,
            metadata_document: None,
            machine: false,
            scope: None,
            insecure_http: false,
        }
    }

    /// Where identities and tokens are kept: a [`FileStore`](super::FileStore) for a
    /// program people run again, or any [`CredentialStore`].
    pub fn store(mut self, store: Arc<dyn CredentialStore>) -> OAuth {
        self.store = store;
        self
    }

    /// Who has a person authorize (the authorization code grant).
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> OAuth {
        self.authorizer = Some(authorizer);
        self
    }

    /// The `client_name` sent at dynamic registration.
    pub fn client_name(mut self, name: impl Into<String>) -> OAuth {
        self.client_name = name.into();
        self
    }

    /// A client registered beforehand: used at `issuer` only, or, with `None`, at the
    /// authorization server the protected server names first, and at no other afterwards.
    /// A secret makes a confidential client (authenticated as the server lists: basic or
    /// post).
    pub fn client(
        mut self,
        issuer: Option<String>,
        client_id: impl Into<String>,
        client_secret: Option<String>,
    ) -> OAuth {
        self.configured = Some(Configured {
            issuer,
            client_id: client_id.into(),
            client_secret,
            private_key: None,
        });
        self
    }

    /// Authenticates the configured client with a signed assertion (`private_key_jwt`, RFC
    /// 7523) instead of a secret: the key in PEM and its algorithm (`ES256`, `RS256`, …).
    pub fn private_key(mut self, pem: impl Into<String>, algorithm: impl Into<String>) -> OAuth {
        let key = PrivateKey {
            pem: pem.into(),
            algorithm: algorithm.into(),
        };
        match &mut self.configured {
            Some(configured) => configured.private_key = Some(key),
            None => {
                self.configured = Some(Configured {
                    issuer: None,
                    client_id: String::new(),
                    client_secret: None,
                    private_key: Some(key),
                })
            }
        }
        self
    }

    /// The URL of this client's Client ID Metadata Document, used as its `client_id` where the
    /// authorization server accepts such documents.
    pub fn client_metadata_document(mut self, url: impl Into<String>) -> OAuth {
        self.metadata_document = Some(url.into());
        self
    }

    /// A machine client: the client credentials grant with the configured client, no person.
    pub fn client_credentials(mut self) -> OAuth {
        self.machine = true;
        self
    }

    /// The scope to ask for instead of the challenge's or the resource's.
    pub fn scope(mut self, scope: impl Into<String>) -> OAuth {
        self.scope = Some(scope.into());
        self
    }

    /// Development only: authorization servers and metadata on plain `http:` anywhere. By
    /// default they are reached over `https:`, and over plain `http:` only at the MCP server's
    /// own origin (see [`AuthHttp`](super::AuthHttp)). Link-local addresses stay refused, and the sign-in page
    /// must still be `https:` or on this machine.
    pub fn allow_insecure_http(mut self) -> OAuth {
        self.insecure_http = true;
        self
    }
}

/// The authorization a client holds: where its token comes from and what it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Authorized {
    /// The authorization server (issuer) of the token.
    pub issuer: String,
    /// The resource it is for (the server's protected resource metadata).
    pub resource: String,
    /// The scopes granted (or asked for, when the server did not say).
    pub scope: Option<String>,
    /// When the access token expires (seconds since the Unix epoch), if the server said.
    pub expires_at: Option<u64>,
    /// Whether a refresh token was issued.
    pub refreshable: bool,
}
