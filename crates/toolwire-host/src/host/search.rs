//! [`Host::search_tools`]: the host's tools found by a task described in words, for agent
//! programs that give a model a few definitions at a time rather than all of them.

use std::sync::{Arc, Mutex};

use toolwire_search::{Entry, Query, SearchError, ToolIndex};

use super::view::View;
use super::{Host, HostTool};
use crate::pins::PinState;

/// One tool [`Host::search_tools`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FoundTool {
    /// The tool, as [`Host::tools`] lists it (call it by its qualified name).
    pub tool: HostTool,
    /// How well it matched: higher is better, comparable within one search only.
    pub score: f32,
}

/// The index of one view's tools, made at the first search after the view changed.
#[derive(Default)]
pub(super) struct SearchCache(Mutex<Option<(Arc<View>, Arc<ToolIndex>)>>);

impl SearchCache {
    /// The index of `view`'s tools: the one made before while the view is the same.
    fn index(&self, view: &Arc<View>) -> Arc<ToolIndex> {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, index)) = cached.as_ref() {
            if Arc::ptr_eq(seen, view) {
                return Arc::clone(index);
            }
        }
        let index = Arc::new(index_of(view));
        *cached = Some((Arc::clone(view), Arc::clone(&index)));
        index
    }
}

/// The index of the tools of `view` that may be called as listed: a definition that changed
/// since it was pinned is not found until the change is approved.
fn index_of(view: &View) -> ToolIndex {
    let callable = view.tools.iter().filter(|tool| {
        !matches!(
            view.pin_states.get(&tool.qualified),
            Some(PinState::Changed { .. })
        )
    });
    ToolIndex::new(
        callable
            .map(|tool| {
                let prefix = tool
                    .qualified
                    .strip_suffix(tool.definition.name.as_str())
                    .and_then(|p| p.strip_suffix("__"))
                    .unwrap_or(&tool.server);
                Entry::new(&tool.qualified, prefix, Arc::clone(&tool.definition))
            })
            .collect(),
    )
}

impl Host {
    /// The tools best matching `query` (a task in words, or a tool's exact name), best first,
    /// at most `limit` (1 to [`toolwire_search::MAX_LIMIT`]): ranked by
    /// [`toolwire_search`]'s lexical index over each tool's name (split into words), server,
    /// title, description and parameters, offline. Only the tools [`Host::tools`] lists and
    /// that may be called as listed are found; the index is made again at the first search
    /// after the tools change.
    pub fn search_tools(&self, query: &str, limit: usize) -> Result<Vec<FoundTool>, SearchError> {
        let view = self.view.load_full();
        let index = self.search.index(&view);
        let query = Query {
            limit,
            ..Query::new(query)
        };
        let found = index.search(&query, &|_| true)?;
        Ok(found
            .hits
            .iter()
            .filter_map(|hit| {
                Some(FoundTool {
                    tool: view.tool(&hit.entry.name)?.clone(),
                    score: hit.score,
                })
            })
            .collect())
    }
}
