//! The upstream tools as the downstream server serves them: each host tool made a server
//! tool under its qualified name (its schemas, annotations and icons as listed, and where it
//! comes from in `_meta`), and the served set kept in step with the host's list.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolwire_host::{Host, HostTool, PinState};
use toolwire_server::{RequestContext, Server, Tool};

use crate::gateway::ToolSettings;

/// The key of a served tool's `_meta` that says where it comes from:
/// `{"server", "tool", "annotationsTrusted"}`. An upstream's annotations are claims unless
/// its configuration says `"trust": true`.
pub const UPSTREAM_META_KEY: &str = "dev.toolwire/upstream";

/// What the gateway serves, against what the host lists.
pub(crate) struct Mirror {
    settings: Option<ToolSettings>,
    state: Mutex<Served>,
}

#[derive(Default)]
struct Served {
    /// The tools served, by name, with a digest of what they were made from.
    tools: HashMap<String, u64>,
    /// Tools the server refused to register (a schema it does not accept), by name, with
    /// the digest refused: said once per definition.
    refused: HashMap<String, u64>,
    /// Tools withheld because their definition changed since it was pinned: said once.
    withheld: HashSet<String>,
}

impl Mirror {
    pub(crate) fn new(settings: Option<ToolSettings>) -> Mirror {
        Mirror {
            settings,
            state: Mutex::new(Served::default()),
        }
    }

    /// Serves on `server` what `host` lists: new and changed tools added, gone ones removed,
    /// and a tool whose definition changed since it was pinned withheld until approved.
    pub(crate) fn sync(&self, host: &Arc<Host>, server: &Server, trusted: impl Fn(&str) -> bool) {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let tools = host.tools();
        let mut wanted: HashMap<&str, (u64, &HostTool)> = HashMap::new();
        let mut withheld = HashSet::new();
        for tool in tools.iter() {
            if let Some(PinState::Changed { pinned, listed }) = host.pin_state(&tool.qualified) {
                if !served.withheld.contains(&tool.qualified) {
                    tracing::warn!(
                        tool = %tool.qualified,
                        upstream = %tool.server,
                        %pinned,
                        %listed,
                        "{}: its definition changed since it was approved; it is withheld from every caller until an operator approves the change",
                        tool.qualified
                    );
                }
                withheld.insert(tool.qualified.clone());
                continue;
            }
            let digest = digest(tool, trusted(&tool.server));
            wanted.insert(tool.qualified.as_str(), (digest, tool));
        }
        served.withheld = withheld;
        served.tools.retain(|name, digest| {
            let keep = wanted.get(name.as_str()).is_some_and(|(d, _)| d == digest);
            if !keep {
                if let Err(error) = server.remove_tool(name) {
                    tracing::warn!(tool = %name, %error, "a tool no longer listed upstream could not be removed");
                }
            }
            keep
        });
        let mut names: Vec<&str> = wanted.keys().copied().collect();
        // In the host's order, so that instances that saw the same lists serve the same order.
        names.sort_unstable();
        for name in names {
            let (digest, tool) = wanted[name];
            if served.tools.contains_key(name) || served.refused.get(name) == Some(&digest) {
                continue;
            }
            if let Some(why) = unservable(&tool.definition) {
                tracing::warn!(tool = %name, upstream = %tool.server, "{name} is not served: {why}");
                served.refused.insert(name.to_owned(), digest);
                continue;
            }
            match server.add_tool(self.served(host, tool, trusted(&tool.server))) {
                Ok(()) => {
                    served.refused.remove(name);
                    served.tools.insert(name.to_owned(), digest);
                }
                Err(error) => {
                    tracing::warn!(
                        tool = %name,
                        upstream = %tool.server,
                        %error,
                        "{name} is not served: its definition is refused"
                    );
                    served.refused.insert(name.to_owned(), digest);
                }
            }
        }
    }

    /// The server tool that stands for `tool`: its definition as listed upstream, under its
    /// qualified name, calling it through the host.
    fn served(&self, host: &Arc<Host>, tool: &HostTool, trusted: bool) -> Tool {
        let definition = &tool.definition;
        let qualified: Arc<str> = tool.qualified.as_str().into();
        let host = host.clone();
        let mut served = Tool::raw(
            tool.qualified.clone(),
            Value::Object(definition.input_schema.clone()),
            move |arguments: Value, ctx: RequestContext| {
                crate::forward::call(host.clone(), qualified.clone(), arguments, ctx)
            },
        );
        if let Some(description) = &definition.description {
            served = served.description(description.clone());
        }
        if let Some(title) = &definition.title {
            served = served.title(title.clone());
        }
        if let Some(annotations) = &definition.annotations {
            served = served.annotations(annotations.clone());
        }
        if let Some(icons) = &definition.icons {
            served = served.icons(icons.clone());
        }
        if let Some(schema) = &definition.output_schema {
            served = served.output_schema(Value::Object(schema.clone()));
        }
        let mut meta = definition.meta.clone().unwrap_or_default();
        meta.insert(
            UPSTREAM_META_KEY.to_owned(),
            json!({"server": tool.server, "tool": definition.name, "annotationsTrusted": trusted}),
        );
        served = served.meta(meta);
        match &self.settings {
            Some(settings) => settings(tool, served),
            None => served,
        }
    }
}

/// Why the gateway cannot serve an upstream tool, if it cannot: one its upstream runs only as
/// a task (the 2025-11-25 `execution.taskSupport: "required"`), since the gateway makes every
/// upstream call a plain call, which such an upstream refuses; served, it would fail every time.
fn unservable(definition: &toolwire_protocol::Tool) -> Option<&'static str> {
    let task_support = definition
        .extra
        .get("execution")
        .and_then(|execution| execution.get("taskSupport"));
    (task_support.and_then(Value::as_str) == Some("required")).then_some(
        "its upstream runs it only as a task (execution.taskSupport \"required\"), and the gateway calls upstream tools as plain calls",
    )
}

/// What a served tool is made from: its upstream, its definition and whether its annotations
/// are trusted.
fn digest(tool: &HostTool, trusted: bool) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tool.server.hash(&mut hasher);
    serde_json::to_string(&tool.definition)
        .unwrap_or_default()
        .hash(&mut hasher);
    trusted.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool as an upstream lists it, with `more` of its members.
    fn listed(more: &Value) -> toolwire_protocol::Tool {
        let mut tool = json!({"name": "t", "inputSchema": {"type": "object"}});
        if let (Some(tool), Some(more)) = (tool.as_object_mut(), more.as_object()) {
            tool.extend(more.clone());
        }
        serde_json::from_value(tool).expect("a tool")
    }

    #[test]
    fn a_tool_its_upstream_runs_only_as_a_task_is_not_served() {
        let cases = [
            (json!({}), false),
            (json!({"execution": {"taskSupport": "forbidden"}}), false),
            (json!({"execution": {"taskSupport": "optional"}}), false),
            (json!({"execution": {}}), false),
            (json!({"execution": {"taskSupport": "required"}}), true),
        ];
        for (more, refused) in cases {
            let why = unservable(&listed(&more));
            assert_eq!(why.is_some(), refused, "{more}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("task"), "{why}");
            }
        }
    }
}
