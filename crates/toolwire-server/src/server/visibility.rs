//! What each caller may see of a running server: the checks of its
//! [`ToolVisibility`](crate::tools::visibility::ToolVisibility) for one request, and, for a
//! listener, whether a change of the tool set changed the list it sees.

use std::hash::{Hash as _, Hasher as _};

use crate::request::context::RequestContext;
use crate::server::Server;
use crate::tools::catalog::{Entry as _, permits};
use crate::tools::offered::Change;
use crate::tools::visibility::{Follower, OfferKind, ToolCheck, Viewer};

/// What one follower's tool list looks like, to tell it of a change of the tool set only when
/// its own list changed.
pub(crate) struct SeenTools {
    follower: Follower,
    /// The digest of its list, where callers see different lists ([`Server::seen_tools`]).
    seen: Option<u64>,
}

impl SeenTools {
    /// `follower`'s list as of now.
    pub(crate) fn new(server: &Server, follower: Follower) -> SeenTools {
        let seen = server.seen_tools(&follower);
        SeenTools { follower, seen }
    }

    /// Whether `change` is news to the follower: a change of the tool set is when the list it
    /// sees changed; any other change is.
    pub(crate) fn is_news(&mut self, server: &Server, change: &Change) -> bool {
        let (Change::Tools, Some(before)) = (change, self.seen) else {
            return true;
        };
        self.seen = server.seen_tools(&self.follower);
        self.seen != Some(before)
    }
}

impl Server {
    /// `ctx`'s caller's check of `kind`, when the server has a
    /// [`ToolVisibility`](crate::tools::visibility::ToolVisibility).
    pub(crate) fn offer_check<'a>(
        &'a self,
        ctx: &'a RequestContext,
        kind: OfferKind,
    ) -> Option<ToolCheck<'a>> {
        let visibility = self.config().tool_visibility.as_ref()?;
        Some(visibility.check_offers(Viewer::of(ctx), kind))
    }

    /// Whether `ctx`'s caller may not see the `kind` named `key`; a refusal by the
    /// visibility is counted (`reason="policy"`).
    pub(crate) fn hides_offer(&self, ctx: &RequestContext, kind: OfferKind, key: &str) -> bool {
        let hidden = self
            .offer_check(ctx, kind)
            .is_some_and(|check| check(key).is_some());
        if hidden {
            self.count_refusal(crate::observe::RefusalReason::Policy);
        }
        hidden
    }

    /// A digest of the tool list `follower` sees (the definitions of the tools its scopes and
    /// the server's [`ToolVisibility`](crate::tools::visibility::ToolVisibility) list for it,
    /// `check_listed`: a tool it may call but is not listed is not news when it changes),
    /// for telling it of a change of the tool set only when its own list changed: a caller is
    /// not told when tools it cannot see come and go. `None` when every caller sees the whole list (no visibility rule, no OAuth): then
    /// every change is its change. Made once per change of the tool set per subscription.
    fn seen_tools(&self, follower: &Follower) -> Option<u64> {
        let visibility = self.config().tool_visibility.as_ref();
        if visibility.is_none() && follower.scopes.is_none() {
            return None;
        }
        let check = visibility.map(|v| v.check_listed(follower.viewer()));
        let snapshot = self.registry().snapshot();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for tool in &snapshot.items {
            let seen = permits(follower.scopes.as_deref(), tool.scopes())
                && check
                    .as_ref()
                    .is_none_or(|check| check(tool.key()).is_none());
            if seen {
                tool.listed().get().hash(&mut hasher);
            }
        }
        Some(hasher.finish())
    }
}
