//! The request path every transport shares: a frame is read and its `_meta` checked
//! ([`frame`]), its params parsed into a route ([`route`]), and the method run (by the server)
//! with a [`context::RequestContext`] for the handler, which knows how the request arrived
//! ([`incoming`]); what it ends with is an [`outcome`]. A connection keeps the `_meta` it sent
//! last ([`last_meta`]). Lists page with [`cursor`]s and
//! handlers ask for input through [`mrtr`]; `subscriptions/listen`, which streams changes, is
//! the server's.

pub(crate) mod context;
pub(crate) mod cursor;
pub(crate) mod followed;
pub(crate) mod frame;
pub(crate) mod incoming;
pub(crate) mod last_meta;
pub(crate) mod mrtr;
pub(crate) mod outbound;
pub(crate) mod outcome;
pub(crate) mod route;
