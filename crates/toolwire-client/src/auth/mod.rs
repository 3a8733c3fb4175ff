//! OAuth for protected servers (the 2026-07-28 authorization spec, A-08…A-18), as far as it is
//! built: reading a server's challenge ([`challenge`]) and finding its authorization server
//! ([`discovery`]). Registration, the authorization code flow with PKCE, token storage and
//! step-up come next (issue 14).

pub mod challenge;
pub mod discovery;

pub use challenge::Challenge;
pub use discovery::{
    AuthorizationServerMetadata, Discovered, DiscoveryError, ResourceMetadata, discover,
};
