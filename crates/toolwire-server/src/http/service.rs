//! What [`super::serve`] puts in front of the router (each connection's service, called by
//! the accept loop of `accept.rs`): `POST` on the MCP path goes straight to
//! its handler; everything else (GET and DELETE of legacy sessions, OAuth metadata, 404 and
//! 405) goes through the axum router as before.
//!
//! Every message of 2026-07-28 is a POST, so this is the request path. Going through the router
//! costs its path lookup, its method router, a `oneshot` per layer, the extractors and a
//! response mapping: about 6,000 of the 60,000 instructions of the bench's HTTP echo request in
//! callgrind. The handler and what it answers are the same either way.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use futures::future::BoxFuture;
use http::Method;
use tower::Service;

use super::{HttpState, post_on};
use crate::request::last_meta::LastMeta;

/// Makes a [`Mcp`] service per connection, knowing its peer's address.
#[derive(Clone)]
pub(super) struct MakeMcp {
    pub(super) state: Arc<HttpState>,
    pub(super) router: Router,
}

impl MakeMcp {
    /// The service of a connection from `peer`.
    pub(super) fn connection(&self, peer: SocketAddr) -> Mcp {
        Mcp {
            state: self.state.clone(),
            router: self.router.clone(),
            peer: ConnectInfo(peer),
            last_meta: Arc::default(),
        }
    }
}

/// One connection's service.
pub(super) struct Mcp {
    state: Arc<HttpState>,
    router: Router,
    /// As `into_make_service_with_connect_info` would give it, for the flood limit and quotas.
    peer: ConnectInfo<SocketAddr>,
    /// The `_meta` this connection sent last, kept read (`request::last_meta`).
    last_meta: Arc<LastMeta>,
}

impl Mcp {
    /// Answers one request of the connection.
    pub(super) fn handle(
        &self,
        mut request: Request,
    ) -> BoxFuture<'static, Result<Response, Infallible>> {
        request.extensions_mut().insert(self.peer);
        if request.method() == Method::POST && request.uri().path() == self.state.config.path {
            let state = self.state.clone();
            let last_meta = self.last_meta.clone();
            Box::pin(async move { Ok(post_on(&state, request, Some(&last_meta)).await) })
        } else {
            let mut router = self.router.clone();
            Box::pin(async move { router.call(request).await })
        }
    }
}
