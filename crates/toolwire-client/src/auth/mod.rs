//! OAuth for protected servers (the 2026-07-28 authorization spec, A-08…A-18), as far as it is
//! built: reading a server's challenge ([`challenge`]), finding its authorization server
//! ([`discovery`]), with every request sent only where [`http`] allows (`https:`, plain `http:`
//! only at the server's own origin unless allowed for development, never a link-local
//! address), the authorization request and its answer as pure functions ([`request`]: PKCE,
//! the authorization URL, the redirect's `iss` and `state`, scopes), and the client's identity
//! and tokens ([`token`]: dynamic registration, the code exchange, refresh, client
//! credentials, and RFC 8693 token exchange for a relay: [`TokenExchange`]), kept in a
//! [`CredentialStore`] ([`store`]: a private file or memory), and the
//! redirect caught on 127.0.0.1 ([`loopback`]). [`OAuth`] ties them into a client
//! ([`ClientBuilder::oauth`](crate::ClientBuilder::oauth)): a challenged request runs the flow
//! and is sent again with the new token; the person's step is an [`Authorizer`]
//! ([`LoopbackAuthorizer`] on the person's own machine).

mod authorizer;
pub mod challenge;
pub mod discovery;
mod exchange;
pub(crate) mod flow;
pub mod http;
pub mod loopback;
mod oauth;
pub mod request;
pub mod store;
pub mod token;

pub use authorizer::{Authorizer, AuthorizerError, AuthorizerFuture, LoopbackAuthorizer, ShowUrl};
pub use challenge::Challenge;
pub use discovery::{
    AuthorizationServerMetadata, Discovered, DiscoveryError, ResourceMetadata, discover,
};
pub use exchange::{ExchangeError, TokenExchange};
pub use http::{AuthHttp, UrlError};
pub use loopback::Loopback;
pub use oauth::{AuthError, Authorized, OAuth};
pub use request::{AuthorizationError, AuthorizationRequest, Pkce};
pub use store::{CredentialStore, FileStore, MemoryStore, StoredTokens};
pub use token::{ClientIdentity, CodeGrant, ExchangeGrant, PrivateKey, TokenError, Tokens};
