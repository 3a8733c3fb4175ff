//! Which tools, prompts, resources and resource templates a caller may see and use beyond its
//! scopes: a server author's (or a gateway's) rule over who is asking and which one, applied to
//! every list page, every `tools/call`, `prompts/get`, `resources/read` and
//! `completion/complete`; and which of the tools a caller may use its list shows.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolwire_protocol::Implementation;

use crate::request::context::Claims;
use crate::request::context::RequestContext;

/// Who is asking, as a [`ToolVisibility`] sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Viewer<'a> {
    /// The principal, as the transport established it; `None` without authentication.
    pub principal: Option<&'a str>,
    /// The scopes its access token grants; `None` when the transport checks no tokens.
    pub scopes: Option<&'a [String]>,
    /// Every claim of its access token; `None` when the transport checks no tokens.
    pub claims: Option<&'a Map<String, Value>>,
    /// The client's `clientInfo`, when it sent one.
    pub client: Option<&'a Implementation>,
}

impl<'a> Viewer<'a> {
    /// The caller of `ctx`.
    pub fn of(ctx: &'a RequestContext) -> Viewer<'a> {
        Viewer {
            principal: ctx.principal(),
            scopes: ctx.scopes(),
            claims: ctx.claims(),
            client: ctx.client_info(),
        }
    }
}

/// One caller's view: for a tool's name (or a prompt's name, a resource's URI, a template's URI
/// template), `None` if the caller may see and use it, else why not, in words the caller may
/// read.
pub type ToolCheck<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// What a [`ToolVisibility::check_offers`] check is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OfferKind {
    /// Prompts, by name.
    Prompt,
    /// Resources, by URI.
    Resource,
    /// Resource templates, by URI template.
    Template,
}

/// Decides which tools each caller may see and call, on top of the tools' scopes. A tool it
/// hides is left out of that caller's `tools/list` (whose pages are then `cacheScope:
/// private`), and a call of it is refused (-32602) with the reason. A tool may also be usable
/// and yet left out of the list ([`ToolVisibility::check_listed`]): a caller offered a search
/// over many tools rather than all of them.
///
/// A closure `Fn(&Viewer, &str) -> Option<String>` is one; an implementation that prepares
/// something per caller (reads its claims once for a whole list) implements
/// [`ToolVisibility::check`] itself.
pub trait ToolVisibility: Send + Sync + 'static {
    /// The check of `viewer`'s requests: made once per list page or call.
    fn check<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a>;

    /// The check of `viewer`'s `tools/list` pages, and of the list its `list_changed` notices
    /// follow: a tool it hides is out of that caller's list (and a change of it is no news to
    /// that caller), yet a call of it is decided by [`ToolVisibility::check`] alone. It must
    /// hide at least what `check` hides; by default it is `check`, at no further cost.
    fn check_listed<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        self.check(viewer)
    }

    /// The check of `viewer`'s prompts, resources or resource templates (`kind`), each by its
    /// name, URI or URI template. One it hides is left out of that caller's list (whose pages
    /// are then `cacheScope: private`) and is, to that caller, unknown: `prompts/get`,
    /// `resources/read` and `completion/complete` answer exactly as they answer a name or URI
    /// the server does not have, so that a caller cannot tell a hidden one from none. Every one
    /// is visible unless an implementation says otherwise.
    fn check_offers<'a>(&'a self, viewer: Viewer<'a>, kind: OfferKind) -> ToolCheck<'a> {
        let _ = (viewer, kind);
        Box::new(|_| None)
    }
}

impl<F> ToolVisibility for F
where
    F: Fn(&Viewer<'_>, &str) -> Option<String> + Send + Sync + 'static,
{
    fn check<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        Box::new(move |tool| self(&viewer, tool))
    }
}

/// A server's [`ToolVisibility`], shared by its clones.
#[derive(Clone)]
pub(crate) struct SharedVisibility(pub(crate) std::sync::Arc<dyn ToolVisibility>);

impl std::fmt::Debug for SharedVisibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolVisibility")
    }
}

impl std::ops::Deref for SharedVisibility {
    type Target = dyn ToolVisibility;

    fn deref(&self) -> &(dyn ToolVisibility + 'static) {
        &*self.0
    }
}

/// A caller kept for the life of its subscription: what [`Viewer`] borrows, owned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Follower {
    pub(crate) principal: Option<Arc<str>>,
    pub(crate) scopes: Option<Arc<[String]>>,
    pub(crate) claims: Option<Claims>,
    pub(crate) client: Option<Implementation>,
}

impl Follower {
    /// The caller of `ctx`.
    pub(crate) fn of(ctx: &RequestContext) -> Follower {
        Follower {
            principal: ctx.shared_principal(),
            scopes: ctx.shared_scopes(),
            claims: ctx.shared_claims(),
            client: ctx.client_info().cloned(),
        }
    }

    pub(crate) fn viewer(&self) -> Viewer<'_> {
        Viewer {
            principal: self.principal.as_deref(),
            scopes: self.scopes.as_deref(),
            claims: self.claims.as_deref(),
            client: self.client.as_ref(),
        }
    }
}
