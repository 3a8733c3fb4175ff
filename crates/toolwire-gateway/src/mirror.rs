//! The upstream tools as the downstream server serves them: each host tool made a server
//! tool under its qualified name (its schemas, annotations and icons as listed, and where it
//! comes from in `_meta`), and the served set kept in step with the host's list.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolwire_client::ServerEra;
use toolwire_host::{Host, HostTool, PinState, ServerState, Tools};
use toolwire_server::{RequestContext, Server, TaskSupport, Tool};

use crate::discovery::Indexed;
use crate::exchange::Exchanges;
use crate::forward::Route;
use crate::hold::Holds;
use crate::options::ToolSettings;
use crate::policy::{Policy, facts_of};
use crate::relay::Unrelayable;

/// The key of a served tool's `_meta` that says where it comes from:
/// `{"server", "tool", "annotationsTrusted"}`, and while its upstream is failing,
/// `"unavailable": {"reason", "listedAt"}` (why, and when the list it is from was taken, in
/// Unix seconds). An upstream's annotations are claims unless its configuration says
/// `"trust": true`.
pub const UPSTREAM_META_KEY: &str = "dev.toolwire/upstream";

/// The key of a served tool's `_meta` that holds this gateway process's mark (random at each
/// start), by which it knows its own tools should one of its upstreams be itself. Outside
/// `dev.toolwire/`, so that a host pinning the gateway's tools does not see them change when
/// the gateway restarts (pins leave out other `_meta` entries).
pub const LOOP_META_KEY: &str = "dev.toolwire.gateway/mark";

/// The served definitions: each one's served name, upstream and definition with its scopes
/// (as indexed).
pub(crate) type Definitions = Vec<(String, String, Indexed)>;

/// What the gateway serves, against what the host lists.
pub(crate) struct Mirror {
    /// Where the served tools' upstream calls are counted (set once the gateway exists).
    observed: Arc<std::sync::OnceLock<crate::observe::GatewayMetrics>>,
    /// Replaced by a reload; each tool is made with the settings of the moment.
    settings: Mutex<Option<ToolSettings>>,
    /// The definitions hidden characters were removed from, said once each.
    cleaned: Mutex<HashSet<(String, String, u64)>>,
    policy: Arc<Policy>,
    /// The questions of legacy upstreams, which calls check.
    unrelayable: Arc<Unrelayable>,
    /// The upstreams' token exchanges, which their tools' calls use.
    exchanges: Arc<Exchanges>,
    /// The calls held while their callers answer a legacy upstream's question.
    holds: Arc<Holds>,
    state: Mutex<Served>,
}

/// A tool not served, and why.
struct Refused {
    digest: u64,
    upstream: String,
    why: String,
}

/// A tool an upstream lists that the gateway does not serve, and why (beside those hidden by
/// the configuration or a rule, which the host reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    /// The upstream's name.
    pub upstream: String,
    /// The tool's served name (`prefix__tool`).
    pub tool: String,
    /// Why it is not served.
    pub why: String,
}

#[derive(Default)]
struct Served {
    /// The tools served, by name, with a digest of what they were made from.
    tools: HashMap<String, u64>,
    /// The definitions served, by name, with their upstream: what search indexes.
    definitions: HashMap<String, (String, Indexed)>,
    /// Counts the changes of `definitions`.
    generation: u64,
    /// Tools not served: the gateway cannot serve them, or the server refused to register
    /// them (a schema it does not accept); by name, with the digest refused (said once per
    /// definition), the upstream and why.
    refused: HashMap<String, Refused>,
    /// Tools withheld because their definition changed since it was pinned: said once.
    withheld: HashSet<String>,
    /// Upstreams found to be this gateway itself (a loop), none of whose offers is served:
    /// said once.
    looped: HashSet<String>,
}

impl Mirror {
    pub(crate) fn new(
        settings: Option<ToolSettings>,
        policy: Arc<Policy>,
        (unrelayable, holds): (Arc<Unrelayable>, Arc<Holds>),
        exchanges: Arc<Exchanges>,
        observed: Arc<std::sync::OnceLock<crate::observe::GatewayMetrics>>,
    ) -> Mirror {
        Mirror {
            observed,
            settings: Mutex::new(settings),
            cleaned: Mutex::default(),
            policy,
            unrelayable,
            exchanges,
            holds,
            state: Mutex::new(Served::default()),
        }
    }

    /// The upstreams found to be this gateway itself, as of the last sync.
    pub(crate) fn looped(&self) -> HashSet<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .looped
            .clone()
    }

    /// Replaces the settings each served tool is made with (a reload): the next sync makes
    /// every served tool again, all in one change of the list; a call in flight ends with the
    /// tool it started with.
    pub(crate) fn set_settings(&self, settings: Option<ToolSettings>) {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *self.settings.lock().unwrap_or_else(|e| e.into_inner()) = settings;
        // No tool is made from nothing: a digest of 0 differs from every wanted one.
        for digest in served.tools.values_mut() {
            *digest = 0;
        }
        served.refused.clear();
    }

    /// The tools the upstreams list that are not served, and why, by name.
    pub(crate) fn unserved(&self) -> Vec<Unserved> {
        let served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut unserved: Vec<Unserved> = served
            .refused
            .iter()
            .map(|(tool, refused)| Unserved {
                upstream: refused.upstream.clone(),
                tool: tool.clone(),
                why: refused.why.clone(),
            })
            .collect();
        unserved.sort_by(|a, b| a.tool.cmp(&b.tool));
        unserved
    }

    /// Serves on `server` what `host` lists: new and changed tools added, gone ones removed,
    /// and a tool whose definition changed since it was pinned withheld until approved.
    pub(crate) fn sync(&self, host: &Arc<Host>, server: &Server, trusted: impl Fn(&str) -> bool) {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let tools = host.tools();
        let (unavailable, modern) = upstreams(host);
        let mark = self.holds.instance().to_owned();
        let wanted = served.wanted(&tools, &unavailable, &modern, (&trusted, &mark));
        self.policy.set_facts(
            wanted
                .values()
                .map(|(_, tool, _)| (tool.qualified.clone(), Arc::new(facts_of(tool))))
                .collect(),
        );
        // A tool no longer listed is no longer refused either.
        served
            .refused
            .retain(|name, _| wanted.contains_key(name.as_str()));
        let gone: Vec<String> = served
            .tools
            .iter()
            .filter(|(name, digest)| wanted.get(name.as_str()).is_none_or(|(d, ..)| d != *digest))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &gone {
            served.tools.remove(name);
            served.definitions.remove(name);
        }
        let names = served.new_or_changed(&wanted);
        if !gone.is_empty() || !names.is_empty() {
            served.generation += 1;
        }
        let make = |name: &str| {
            let (_, tool, down) = wanted[name];
            let tasks = modern.contains(&tool.server);
            self.served(host, tool, (trusted(&tool.server), tasks), down)
        };
        // All at once, the tools gone and the tools changed or new (one list change, one
        // rebuild of the list; a tool whose definition changed is never missing from a list
        // in between); if the server refuses one, one by one, so that the others are served.
        let made: Vec<Tool> = names.iter().map(|name| make(name)).collect();
        let definitions: Vec<_> = made.iter().map(indexed).collect();
        let batch = server.replace_tools(gone.iter().map(String::as_str), made);
        if batch.is_ok() {
            for (name, definition) in names.into_iter().zip(definitions) {
                served.serve(name, wanted[name], definition);
            }
            return;
        }
        server.remove_tools(gone.iter().map(String::as_str));
        for name in names {
            let (digest, tool, _) = wanted[name];
            let made = make(name);
            let definition = indexed(&made);
            match server.add_tool(made) {
                Ok(()) => served.serve(name, wanted[name], definition),
                Err(error) => {
                    tracing::warn!(
                        tool = %name,
                        upstream = %tool.server,
                        %error,
                        "{name} is not served: its definition is refused"
                    );
                    let refused = Refused {
                        digest,
                        upstream: tool.server.clone(),
                        why: format!("its definition is refused: {error}"),
                    };
                    served.refused.insert(name.to_owned(), refused);
                }
            }
        }
    }

    /// Every tool served now, made again with `settings` (what a reload would serve), for a
    /// check of the server's new defaults against them before anything changes.
    pub(crate) fn remade(
        &self,
        host: &Arc<Host>,
        trusted: impl Fn(&str) -> bool,
        settings: Option<&ToolSettings>,
    ) -> Vec<Tool> {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let tools = host.tools();
        let (unavailable, modern) = upstreams(host);
        let mark = self.holds.instance().to_owned();
        let wanted = served.wanted(&tools, &unavailable, &modern, (&trusted, &mark));
        served
            .tools
            .keys()
            .filter_map(|name| wanted.get(name.as_str()))
            .map(|(_, tool, down)| {
                let tasks = modern.contains(&tool.server);
                let made = self.made(host, tool, (trusted(&tool.server), tasks), *down);
                match settings {
                    Some(settings) => settings(tool, made),
                    None => made,
                }
            })
            .collect()
    }

    /// The server tool that stands for `tool`: its definition as listed upstream, under its
    /// qualified name, calling it through the host. A 2026-07-28 upstream's tool may run as a
    /// task (`tasks`): that upstream decides, call by call, whether to make a task (its list
    /// does not say which tools may), so the served tool becomes the caller's task exactly
    /// when the upstream makes one (a deferred task), and answers as a plain call otherwise.
    fn served(
        &self,
        host: &Arc<Host>,
        tool: &HostTool,
        modes: (bool, bool),
        unavailable: Option<&Value>,
    ) -> Tool {
        let made = self.made(host, tool, modes, unavailable);
        let settings = self
            .settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match settings {
            Some(settings) => settings(tool, made),
            None => made,
        }
    }

    /// [`Mirror::served`] before the settings: the tool as the gateway makes it.
    fn made(
        &self,
        host: &Arc<Host>,
        tool: &HostTool,
        (trusted, tasks): (bool, bool),
        unavailable: Option<&Value>,
    ) -> Tool {
        let definition = &tool.definition;
        let route = Arc::new(Route {
            qualified: tool.qualified.as_str().into(),
            server: tool.server.as_str().into(),
            asked: self.unrelayable.counter(&tool.server),
            exchange: self.exchanges.of_server(&tool.server),
            holds: self.holds.clone(),
            modern: tasks,
            observed: self.observed.clone(),
        });
        let host = host.clone();
        let policy = self.policy.clone();
        // The text a person does not see goes, as it goes from results (see `clean`).
        let mut input = Value::Object(definition.input_schema.clone());
        let mut removed = crate::clean::texts_in(&mut input);
        let mut served = Tool::raw(
            tool.qualified.clone(),
            input,
            move |arguments: Value, ctx: RequestContext| {
                crate::forward::call(host.clone(), policy.clone(), route.clone(), arguments, ctx)
            },
        );
        let mut description = definition.description.clone();
        removed += crate::clean::optional(&mut description);
        if let Some(description) = description {
            served = served.description(description);
        }
        let mut title = definition.title.clone();
        removed += crate::clean::optional(&mut title);
        if let Some(title) = title {
            served = served.title(title);
        }
        if let Some(annotations) = &definition.annotations {
            let mut annotations = annotations.clone();
            removed += crate::clean::optional(&mut annotations.title);
            served = served.annotations(annotations);
        }
        if let Some(icons) = &definition.icons {
            served = served.icons(icons.clone());
        }
        if let Some(schema) = &definition.output_schema {
            let mut output = Value::Object(schema.clone());
            removed += crate::clean::texts_in(&mut output);
            served = served.output_schema(output);
        }
        crate::clean::said_once(
            &self.cleaned,
            (&tool.server, &tool.qualified, removed as u64),
            removed,
        );
        if tasks {
            served = served.task_support(TaskSupport::Optional).deferred_task();
        }
        let mut meta = definition.meta.clone().unwrap_or_default();
        let mut upstream =
            json!({"server": tool.server, "tool": definition.name, "annotationsTrusted": trusted});
        if let Some(unavailable) = unavailable {
            upstream["unavailable"] = unavailable.clone();
        }
        meta.insert(UPSTREAM_META_KEY.to_owned(), upstream);
        meta.insert(LOOP_META_KEY.to_owned(), json!(self.holds.instance()));
        served.meta(meta)
    }
}

/// The tools to serve, by served name: each one's digest, its host tool and, when its
/// upstream is down, why.
type Wanted<'a> = HashMap<&'a str, (u64, &'a HostTool, Option<&'a Value>)>;

/// Why each upstream that is down is down, and when its tools were last listed, by name;
/// and the upstreams that speak 2026-07-28, whose tools may run as tasks.
fn upstreams(host: &Host) -> (HashMap<String, Value>, HashSet<String>) {
    let mut unavailable = HashMap::new();
    let mut modern = HashSet::new();
    for s in host.servers() {
        if matches!(s.era, Some(ServerEra::Modern { .. })) {
            modern.insert(s.name.clone());
        }
        if let ServerState::Failed { error } = s.state {
            let listed_at = s
                .listed_at
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs());
            unavailable.insert(s.name, json!({"reason": error, "listedAt": listed_at}));
        }
    }
    (unavailable, modern)
}

/// A served tool's definition as search indexes it: as served, without its `_meta` (which
/// says where it comes from and whether its upstream is up, and holds this process's mark:
/// none of it describes the tool, and the index's version must not change with it); with the
/// scopes its settings gave it, which a caller needs to find it.
fn indexed(tool: &Tool) -> Indexed {
    let mut definition = tool.definition().clone();
    definition.meta = None;
    Indexed {
        definition: Arc::new(definition),
        scopes: tool.required_scopes().into(),
    }
}

impl Served {
    /// Notes `name` served, made from `digest` as `definition`.
    fn serve(
        &mut self,
        name: &str,
        (digest, tool, _): (u64, &HostTool, Option<&Value>),
        definition: Indexed,
    ) {
        self.refused.remove(name);
        self.tools.insert(name.to_owned(), digest);
        self.definitions
            .insert(name.to_owned(), (tool.server.clone(), definition));
    }

    /// The tools of `tools` to serve; those whose definition changed since it was pinned are
    /// withheld instead (and said so once).
    fn wanted<'a>(
        &mut self,
        tools: &'a Tools,
        unavailable: &'a HashMap<String, Value>,
        modern: &HashSet<String>,
        (trusted, mark): (&impl Fn(&str) -> bool, &str),
    ) -> Wanted<'a> {
        let mut wanted = Wanted::new();
        let mut withheld = HashSet::new();
        let looped = self.looped(tools.iter(), mark);
        for tool in tools.iter() {
            if looped.contains(&tool.server) {
                continue;
            }
            if let Some(PinState::Changed { pinned, listed }) = tools.pin_state(&tool.qualified) {
                if !self.withheld.contains(&tool.qualified) {
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
            let down = unavailable.get(&tool.server);
            let pinned = match tools.pin_state(&tool.qualified) {
                Some(PinState::Pinned(hash)) => Some(hash.as_str()),
                _ => None,
            };
            let served_as = (trusted(&tool.server), modern.contains(&tool.server));
            let digest = digest(tool, pinned, served_as, down);
            wanted.insert(tool.qualified.as_str(), (digest, tool, down));
        }
        self.withheld = withheld;
        wanted
    }

    /// The upstreams among `tools`' that are this gateway itself, reached through their own
    /// configuration (a loop that would serve `remote__remote__…` without end): one that lists
    /// a tool this gateway serves (its `_meta` carries `mark`, this gateway's), or a tool
    /// named under the upstream's own prefix (`remote__x` from `remote`, as another instance
    /// of this gateway behind the same address lists it). Said once per upstream.
    fn looped<'a>(
        &mut self,
        tools: impl Iterator<Item = &'a HostTool>,
        mark: &str,
    ) -> HashSet<String> {
        let mut looped = HashSet::new();
        for tool in tools {
            if looped.contains(&tool.server) {
                continue;
            }
            let name = &tool.definition.name;
            let ours = tool
                .definition
                .meta
                .as_ref()
                .and_then(|meta| meta.get(LOOP_META_KEY))
                .is_some_and(|theirs| theirs == mark);
            let prefix = tool
                .qualified
                .strip_suffix(name.as_str())
                .and_then(|p| p.strip_suffix("__"))
                .unwrap_or_default();
            let nested = !prefix.is_empty() && name.starts_with(&format!("{prefix}__"));
            if ours || nested {
                if !self.looped.contains(&tool.server) {
                    tracing::error!(
                        upstream = %tool.server,
                        tool = %tool.qualified,
                        "the upstream {} is this gateway itself (it lists {}, {}): none of its tools, prompts or resources is served; point it at another server",
                        tool.server,
                        name,
                        if ours { "a tool this gateway serves" } else { "a tool under the upstream's own prefix" }
                    );
                }
                looped.insert(tool.server.clone());
            }
        }
        self.looped.clone_from(&looped);
        looped
    }

    /// The wanted tools not served yet (nor refused as they are now), in the host's order, so
    /// that instances that saw the same lists serve the same order; one that cannot be
    /// served is refused here, said once.
    fn new_or_changed<'a>(&mut self, wanted: &Wanted<'a>) -> Vec<&'a str> {
        let mut names: Vec<&str> = wanted
            .iter()
            .filter(|(name, (digest, ..))| {
                !self.tools.contains_key(**name)
                    && self.refused.get(**name).map(|r| r.digest) != Some(*digest)
            })
            .map(|(name, _)| *name)
            .collect();
        names.sort_unstable();
        names.retain(|name| {
            let (digest, tool, _) = wanted[name];
            let Some(why) = unservable(&tool.definition) else {
                return true;
            };
            tracing::warn!(tool = %name, upstream = %tool.server, "{name} is not served: {why}");
            let why = why.to_owned();
            let upstream = tool.server.clone();
            let refused = Refused {
                digest,
                upstream,
                why,
            };
            self.refused.insert((*name).to_owned(), refused);
            false
        });
        names
    }
}

/// Why the gateway cannot serve an upstream tool, if it cannot: one a 2025-11-25 upstream runs
/// only as a task (its `execution.taskSupport: "required"`), since the gateway follows only
/// 2026-07-28 tasks (a legacy task is another protocol: a `task` param, `tasks/result`) and
/// calls a legacy upstream's tools as plain calls, which such an upstream refuses; served, it
/// would fail every time. (A 2026-07-28 upstream's list does not say which tools run only as
/// tasks: it decides call by call, and the gateway follows its tasks.)
fn unservable(definition: &toolwire_protocol::Tool) -> Option<&'static str> {
    let task_support = definition
        .extra
        .get("execution")
        .and_then(|execution| execution.get("taskSupport"));
    (task_support.and_then(Value::as_str) == Some("required")).then_some(
        "its 2025-11-25 upstream runs it only as a task (execution.taskSupport \"required\"), and the gateway calls a 2025-11-25 upstream's tools as plain calls (it follows only 2026-07-28 tasks)",
    )
}

/// What a served tool is made from: its upstream, its definition, whether its annotations
/// are trusted and whether it may run as a task.
/// The definition is read by its pinned hash (computed once per list) where it has one.
fn digest(
    tool: &HostTool,
    pinned: Option<&str>,
    (trusted, tasks): (bool, bool),
    unavailable: Option<&Value>,
) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tool.server.hash(&mut hasher);
    match pinned {
        Some(hash) => hash.hash(&mut hasher),
        None => serde_json::to_string(&*tool.definition)
            .unwrap_or_default()
            .hash(&mut hasher),
    }
    trusted.hash(&mut hasher);
    tasks.hash(&mut hasher);
    unavailable.map(Value::to_string).hash(&mut hasher);
    hasher.finish()
}

impl Mirror {
    /// The generation of the served definitions, and a way to read them (served name,
    /// upstream, definition as indexed): what search indexes.
    pub(crate) fn served_definitions(&self) -> (u64, impl FnOnce() -> Definitions + '_) {
        let generation = self.lock().generation;
        (generation, move || {
            self.lock()
                .definitions
                .iter()
                .map(|(name, (upstream, tool))| (name.clone(), upstream.clone(), tool.clone()))
                .collect()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Served> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a tool is withheld for a changed definition.
    pub(crate) fn withholds(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .withheld
            .is_empty()
    }
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
