//! OAuth for protected servers (the 2026-07-28 authorization spec, A-08…A-18), as far as it is
//! built: reading a server's challenge ([`challenge`]), finding its authorization server
//! ([`discovery`]), and the authorization request and its answer as pure functions
//! ([`request`]: PKCE, the authorization URL, the redirect's `iss` and `state`, scopes).
//! Registration, the token exchange, token storage and the flow that ties them to the client
//! come next (issue 14).

pub mod challenge;
pub mod discovery;
pub mod request;

pub use challenge::Challenge;
pub use discovery::{
    AuthorizationServerMetadata, Discovered, DiscoveryError, ResourceMetadata, discover,
};
pub use request::{AuthorizationError, Pkce};
