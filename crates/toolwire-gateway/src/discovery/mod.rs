//! Discovery: how a caller comes to the tools it may use when there are too many to list. Per
//! caller (D-01), its `tools/list` holds either every tool it may use (`direct`) or only the
//! search tools — `search_tools`, `call_tool` — and the always-on tools it may see (`search`),
//! `auto` choosing search once it may use more tools than a threshold. A tool left out of a
//! list stays callable, by `call_tool` or directly (D-03), through the same checks.
//!
//! The index ([`toolwire_search::ToolIndex`]) holds exactly the definitions the gateway serves
//! — approved by their pins, as served — and is made again whole when the served set changes
//! (D-04). A search sees only the tools the caller may use (D-02): those its rules let it see
//! and its OAuth scopes permit, the server's own rule for lists and calls.
//!
//! With `discovery.embeddings`, search is hybrid once the served tools' vectors are ready
//! (computed in the background, never waited on); lexical until then and whenever the
//! endpoint fails for a query.
//!
//! - [`config`]: the `"discovery"` section as written, and compiled ([`Discovery`]).
//! - `semantic`: the embeddings endpoint, the tools' vectors and the query's.
//! - `tools`: the two search tools, their static definitions and handlers.

pub mod config;
mod semantic;
#[cfg(test)]
mod tests;
mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use arc_swap::{ArcSwap, ArcSwapOption};
use toolwire_host::HostConfig;
use toolwire_search::{Entry, ToolIndex};
use toolwire_server::{OfferKind, Server, ToolCheck, ToolVisibility, Viewer};

pub use config::{
    CallerMode, DEFAULT_EMBEDDINGS_TIMEOUT, DEFAULT_THRESHOLD, Discovery, DiscoveryConfig,
    DiscoveryError, EmbeddingsConfig, Mode,
};

use crate::policy::{Policy, Visibility, caller};
use config::Listed;
use semantic::{Fallback, Semantic};

/// The search tool's name. Qualified names hold `__`; these do not, so no prefixed tool can
/// take them (an unprefixed upstream is refused beside them: [`DiscoveryError::Unprefixed`]).
pub const SEARCH_TOOLS: &str = "search_tools";

/// The tool that calls a tool found by name.
pub const CALL_TOOL: &str = "call_tool";

/// Whether `name` is one of the search tools.
pub(crate) fn is_search_tool(name: &str) -> bool {
    name == SEARCH_TOOLS || name == CALL_TOOL
}

/// Why a tool is out of a list in search mode (callers never see it: a list says nothing of
/// what it leaves out).
const FOUND_BY_SEARCH: &str = "found with search_tools in search mode";
/// Why the search tools are out of a list in direct mode.
const LISTED_DIRECTLY: &str = "every tool is listed in direct mode";

/// What the gateway knows for search: the modes, the index and the rules.
pub(crate) struct Search {
    discovery: ArcSwap<Discovery>,
    catalogue: ArcSwap<Catalogue>,
    /// The generation of the served set the index was made from.
    indexed: std::sync::Mutex<Option<u64>>,
    /// Each upstream's prefix, by name (its name when it has none).
    prefixes: ArcSwap<HashMap<String, String>>,
    policy: Arc<Policy>,
    /// The rules as every caller's check: what a search may return.
    visibility: Visibility,
    /// The semantic stage, when `discovery.embeddings` configures one.
    semantic: ArcSwapOption<Semantic>,
    /// Searches answered lexically for want of vectors, by why, once the metrics are kept.
    fallbacks: std::sync::OnceLock<prometheus::IntCounterVec>,
}

impl Search {
    pub(crate) fn new(discovery: Discovery, policy: Arc<Policy>, config: &HostConfig) -> Search {
        let semantic = semantic_of(&discovery);
        Search {
            discovery: ArcSwap::from_pointee(discovery),
            catalogue: ArcSwap::from_pointee(Catalogue::default()),
            indexed: std::sync::Mutex::new(None),
            prefixes: ArcSwap::from_pointee(prefixes_of(config)),
            visibility: Visibility(policy.clone()),
            policy,
            semantic: ArcSwapOption::new(semantic),
            fallbacks: std::sync::OnceLock::new(),
        }
    }

    /// Replaces the modes and the upstreams' prefixes (a reload); the next update indexes
    /// again. A changed embeddings section replaces the semantic stage (its vectors computed
    /// again); an unchanged one keeps it, vectors and all.
    pub(crate) fn reload(&self, discovery: Discovery, config: &HostConfig) {
        let wanted = discovery.config().embeddings.as_ref();
        let current = self.semantic.load_full();
        if current.as_ref().map(|s| s.config()) != wanted {
            if let Some(old) = &current {
                old.stop();
            }
            self.semantic.store(semantic_of(&discovery));
        }
        self.discovery.store(Arc::new(discovery));
        self.prefixes.store(Arc::new(prefixes_of(config)));
        *self.indexed.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The modes now.
    pub(crate) fn discovery(&self) -> Arc<Discovery> {
        self.discovery.load_full()
    }

    /// The index now, with the scopes its tools need.
    pub(crate) fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue.load_full()
    }

    /// Makes the index again from the served definitions when they changed since it was made:
    /// `served` is their generation and, asked for only then, the definitions (served name,
    /// upstream, definition and scopes).
    pub(crate) fn update(
        &self,
        generation: u64,
        served: impl FnOnce() -> Vec<(String, String, Indexed)>,
    ) {
        let mut indexed = self.indexed.lock().unwrap_or_else(|e| e.into_inner());
        if *indexed == Some(generation) {
            return;
        }
        let prefixes = self.prefixes.load();
        let mut scoped = HashMap::new();
        let entries = served()
            .into_iter()
            .map(|(name, upstream, tool)| {
                if !tool.scopes.is_empty() {
                    scoped.insert(name.clone(), tool.scopes);
                }
                let server = prefixes.get(&upstream).cloned().unwrap_or(upstream);
                Entry::new(name, server, tool.definition)
            })
            .collect();
        let index = Arc::new(ToolIndex::new(entries));
        self.catalogue.store(Arc::new(Catalogue {
            index: index.clone(),
            scoped,
        }));
        *indexed = Some(generation);
        if let Some(semantic) = self.semantic.load_full() {
            semantic.refresh(index);
        }
    }

    /// Whether `viewer` may use a tool of `catalogue`, by name: its rules let it see the tool
    /// and its scopes permit it. The same as a call's checks before the call is made (the
    /// server's scopes, then the rules' [`Visibility`]), so that a search never finds a tool
    /// the caller could not call (D-02).
    pub(crate) fn allowed<'a>(
        &'a self,
        catalogue: &'a Catalogue,
        viewer: Viewer<'a>,
    ) -> impl Fn(&str) -> bool + 'a {
        let rules = self.visibility.check(viewer);
        move |tool| catalogue.permits(viewer.scopes, tool) && rules(tool).is_none()
    }

    /// How many served tools `viewer` may use, as [`Search::allowed`] decides: what its rules
    /// let it see, less the tools they let it see that its scopes do not permit (counted only
    /// for a caller with scopes, among the few tools that need some).
    fn usable(&self, viewer: &Viewer<'_>) -> usize {
        let usable = self.policy.usable(viewer);
        let catalogue = self.catalogue.load();
        if viewer.scopes.is_none() || catalogue.scoped.is_empty() {
            return usable;
        }
        let rules = self.visibility.check(*viewer);
        let refused = catalogue
            .scoped
            .keys()
            .filter(|tool| !catalogue.permits(viewer.scopes, tool) && rules(tool).is_none())
            .count();
        usable.saturating_sub(refused)
    }

    /// The semantic stage, when one is configured.
    pub(crate) fn semantic(&self) -> Option<Arc<Semantic>> {
        self.semantic.load_full()
    }

    /// Counts a search answered lexically though a semantic stage is configured.
    pub(crate) fn count_fallback(&self, why: Fallback) {
        if let Some(fallbacks) = self.fallbacks.get() {
            fallbacks.with_label_values(&[why.label()]).inc();
        }
    }

    /// Keeps the fallback counter in the downstream server's `metrics`.
    pub(crate) fn observe(&self, metrics: &toolwire_server::observe::Metrics) {
        if let Some(counter) = crate::observe::search_fallbacks(metrics) {
            let _ = self.fallbacks.set(counter);
        }
    }
}

/// A served tool as search indexes it: its definition as served (without `_meta`) and the
/// OAuth scopes a caller needs to use it (those the gateway's tool settings gave it).
#[derive(Debug, Clone)]
pub(crate) struct Indexed {
    pub(crate) definition: Arc<toolwire_protocol::Tool>,
    pub(crate) scopes: Arc<[String]>,
}

/// The index of the served tools, and the scopes those that need some need: made together,
/// so that a search reads both of one served set.
pub(crate) struct Catalogue {
    pub(crate) index: Arc<ToolIndex>,
    /// By served name, the tools that need scopes (most need none).
    scoped: HashMap<String, Arc<[String]>>,
}

impl Default for Catalogue {
    fn default() -> Self {
        Catalogue {
            index: Arc::new(ToolIndex::new(Vec::new())),
            scoped: HashMap::new(),
        }
    }
}

impl Catalogue {
    /// Whether a caller granted `granted` (`None`: the transport checks no tokens) may use
    /// `tool` for its scopes: the server's rule (T-03), every scope the tool needs granted.
    fn permits(&self, granted: Option<&[String]>, tool: &str) -> bool {
        match (granted, self.scoped.get(tool)) {
            (Some(granted), Some(needed)) => needed.iter().all(|s| granted.contains(s)),
            _ => true,
        }
    }
}

/// The semantic stage `discovery` configures, if any.
fn semantic_of(discovery: &Discovery) -> Option<Arc<Semantic>> {
    let config = discovery.config().embeddings.as_ref()?;
    Semantic::new(config).map(Arc::new)
}

/// Each upstream's prefix by name: what callers know it by (its name when it has none).
fn prefixes_of(config: &HostConfig) -> HashMap<String, String> {
    config
        .servers
        .iter()
        .map(|s| {
            let prefix = if s.prefix.is_empty() {
                &s.name
            } else {
                &s.prefix
            };
            (s.name.clone(), prefix.clone())
        })
        .collect()
}

/// The discovery settings for `config`'s upstreams: those `given`, refused when a caller may
/// be given the search tools beside an upstream with an empty prefix (its tools keep their own
/// names, which could be theirs); without any, `auto` — or `direct` beside such an upstream,
/// so that a gateway in front of one server under its own names works as it did.
pub(crate) fn chosen(
    given: Option<Discovery>,
    config: &HostConfig,
) -> Result<Discovery, DiscoveryError> {
    let unprefixed = config.servers.iter().find(|s| s.prefix.is_empty());
    match (given, unprefixed) {
        (Some(given), Some(server)) if given.may_search() => Err(DiscoveryError::Unprefixed {
            server: server.name.clone(),
        }),
        (Some(given), _) => Ok(given),
        (None, Some(server)) => {
            tracing::info!(
                upstream = %server.name,
                "every tool is listed (discovery mode \"direct\"): the upstream {} has an empty prefix, so the search tools' names could be its tools'",
                server.name
            );
            let direct = DiscoveryConfig {
                mode: Mode::Direct,
                ..DiscoveryConfig::default()
            };
            Discovery::compile(&direct)
        }
        (None, None) => Ok(Discovery::default()),
    }
}

/// The downstream server's [`ToolVisibility`]: the rules decide what each caller may use
/// (the search tools are every caller's), and its mode what its list holds of that.
pub(crate) struct Listing(pub(crate) Arc<Search>);

impl ToolVisibility for Listing {
    fn check<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        let rules = self.0.visibility.check(viewer);
        Box::new(move |tool| {
            if is_search_tool(tool) {
                None
            } else {
                rules(tool)
            }
        })
    }

    fn check_listed<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        let search = &self.0;
        let discovery = search.discovery();
        let listed = discovery.listed(|| caller(&viewer), || search.usable(&viewer));
        let rules = search.visibility.check(viewer);
        match listed {
            Listed::Direct => Box::new(move |tool| {
                if is_search_tool(tool) {
                    Some(LISTED_DIRECTLY.to_owned())
                } else {
                    rules(tool)
                }
            }),
            Listed::Search => Box::new(move |tool| {
                if is_search_tool(tool) {
                    None
                } else if discovery.always_on(tool) {
                    rules(tool)
                } else {
                    Some(FOUND_BY_SEARCH.to_owned())
                }
            }),
        }
    }

    fn check_offers<'a>(&'a self, viewer: Viewer<'a>, kind: OfferKind) -> ToolCheck<'a> {
        self.0.visibility.check_offers(viewer, kind)
    }
}

/// What serves the gateway's downstream server, held weakly by `call_tool` (whose handler
/// the server holds).
pub(crate) trait Downstream: Send + Sync {
    /// The downstream server.
    fn downstream(&self) -> &Server;
}

/// Serves the search tools on `server` when some caller may be given them, and takes them
/// away when none may (after a reload).
pub(crate) fn serve_tools(
    server: &Server,
    search: &Arc<Search>,
    downstream: Weak<dyn Downstream>,
) -> Result<(), toolwire_server::Error> {
    let served = server.tool_names().iter().any(|n| n == SEARCH_TOOLS);
    match (search.discovery().may_search(), served) {
        (true, false) => server.add_tools([
            tools::search_tools(search.clone()),
            tools::call_tool(downstream),
        ]),
        (false, true) => {
            server.remove_tools([SEARCH_TOOLS, CALL_TOOL]);
            Ok(())
        }
        _ => Ok(()),
    }
}
