//! The example tools `toolwire serve` offers: small, but each shows one kind of tool.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::{DeadlinesConfig, ServeConfig, ToolConfig};
use crate::notes::Notes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwire_server::protocol::ToolAnnotations;
use toolwire_server::{
    AuditSink, Elicited, InputRequired, MemoryReplayGuard, NoArgs, Reconfigure, RequestContext,
    Server, ServerBuilder, Store, Structured, Tool, ToolError,
};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// The text to send back.
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// First addend.
    a: f64,
    /// Second addend.
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    /// a + b.
    #[serde(serialize_with = "as_written")]
    sum: f64,
}

/// A number as a person writes it: a whole one without a fraction (2 + 3 is `5`, not `5.0`),
/// while it is exact as an integer; any other as it is.
fn as_written<S: serde::Serializer>(number: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    /// The largest whole numbers an f64 holds exactly.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if number.fract() == 0.0 && number.abs() <= EXACT {
        serializer.serialize_i64(*number as i64)
    } else {
        serializer.serialize_f64(*number)
    }
}

#[derive(Deserialize, JsonSchema)]
struct Text {
    /// The text to count.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Counts {
    /// Words (whitespace-separated).
    words: usize,
    /// Lines.
    lines: usize,
    /// Unicode scalar values.
    characters: usize,
}

#[derive(Deserialize, JsonSchema)]
struct CountSlowly {
    /// Count from 1 to this number (at most 100).
    #[schemars(range(min = 1, max = 100))]
    to: u32,
    /// Pause between numbers, in milliseconds (at most 1000).
    #[serde(default = "default_delay")]
    #[schemars(range(max = 1000))]
    delay_ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct NameForm {
    /// Your name.
    name: String,
}

/// The tool `toggle_shout` adds and removes.
fn shout() -> Tool {
    Tool::new("shout", |args: Text, _: RequestContext| async move {
        args.text.to_uppercase()
    })
    .description("Returns the text in capitals")
    .annotations(read_only())
}

/// Asks the user for their name (elicitation), then greets them. One handler for both eras:
/// a 2026-07-28 client answers the input request and retries; for a legacy client the server
/// asks it with `elicitation/create` and runs the handler again.
fn greet() -> Tool {
    Tool::new("greet", |_: NoArgs, ctx: RequestContext| async move {
        match ctx.elicited::<NameForm>("name")? {
            Some(Elicited::Accepted(form)) => Ok::<_, ToolError>(format!("Hello, {}!", form.name)),
            Some(_) => Ok("Hello, whoever you are!".to_owned()),
            None => Err(InputRequired::new()
                .elicit::<NameForm>("name", "What is your name?")
                .into()),
        }
    })
    .description("Asks for your name (elicitation), then greets you")
    .annotations(read_only())
}

#[derive(Deserialize, JsonSchema)]
struct ColourForm {
    /// Your favourite colour.
    colour: String,
}

/// What `introduce` keeps between its two questions, sealed in the `requestState`.
#[derive(Serialize, Deserialize)]
struct Introduced {
    name: String,
}

/// Two questions in two rounds: your name, then your favourite colour. The name travels in the
/// sealed `requestState` of the second round, not in the server's memory, so the retry that
/// answers the second question may reach any instance that shares the key ring (and each
/// state is accepted once).
fn introduce() -> Tool {
    Tool::new("introduce", |_: NoArgs, ctx: RequestContext| async move {
        if let Some(Introduced { name }) = ctx.request_state::<Introduced>()? {
            return match ctx.elicited::<ColourForm>("colour")? {
                Some(Elicited::Accepted(form)) => {
                    Ok::<_, ToolError>(format!("{name} likes {}.", form.colour))
                }
                Some(_) => Ok(format!("{name} keeps their favourite colour to themselves.")),
                None => Err(ask_colour(name)),
            };
        }
        match ctx.elicited::<NameForm>("name")? {
            Some(Elicited::Accepted(form)) => Err(ask_colour(form.name)),
            Some(_) => Ok("Nobody introduced themselves.".to_owned()),
            None => Err(InputRequired::new()
                .elicit::<NameForm>("name", "What is your name?")
                .into()),
        }
    })
    .description("Asks two questions in two rounds (your name, then your favourite colour) and says what it heard")
    .annotations(read_only())
}

/// The second question of `introduce`, with the first answer sealed in its state.
fn ask_colour(name: String) -> ToolError {
    InputRequired::new()
        .elicit::<ColourForm>("colour", format!("{name}, what is your favourite colour?"))
        .state(Introduced { name })
        .into()
}

/// Adds the `shout` tool, or removes it: the tool list changes and clients are told.
fn toggle_shout(server: Arc<OnceLock<Server>>) -> Tool {
    Tool::new("toggle_shout", move |_: NoArgs, _: RequestContext| {
        let server = server.get().cloned();
        async move {
            let server = server.ok_or_else(|| ToolError::failed("the server is starting"))?;
            if server.tool_names().iter().any(|n| n == "shout") {
                server.remove_tool("shout").map_err(ToolError::internal)?;
                Ok::<_, ToolError>("Removed the shout tool.".to_owned())
            } else {
                server.add_tool(shout()).map_err(ToolError::internal)?;
                Ok("Added the shout tool.".to_owned())
            }
        }
    })
    .description("Adds the shout tool, or removes it if present; the tool list changes")
    .annotations(ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        idempotent_hint: Some(false),
        open_world_hint: Some(false),
        ..Default::default()
    })
}

fn default_delay() -> u64 {
    100
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        open_world_hint: Some(false),
        ..Default::default()
    }
}

/// Which clients the example server answers (`--modern-only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clients {
    /// Those of 2026-07-28 and legacy (2025-11-25) ones.
    All,
    /// Only those of 2026-07-28: legacy clients are refused.
    ModernOnly,
}

/// The example server; `clients` says whether legacy (2025-11-25) clients are refused,
/// `settings` is the `--config` file (scopes, limits, deadlines and output guard of each
/// tool), `notes` where the notes tools keep notes, `store` the shared store of every other
/// state (`--store`; in this process without it).
pub(crate) fn server(
    clients: Clients,
    settings: &ServeConfig,
    audit: Option<Arc<dyn AuditSink>>,
    notes: &Notes,
    store: Option<&Store>,
    metrics: Option<toolwire_server::observe::Metrics>,
) -> anyhow::Result<(Server, Examples)> {
    let examples = Examples {
        handle: Arc::new(OnceLock::new()),
        notes: notes.clone(),
    };
    let tools = examples.tools(&settings.tools)?;
    let mut builder = Server::builder("toolwire-examples", env!("CARGO_PKG_VERSION"));
    if clients == Clients::ModernOnly {
        builder = builder.modern_only();
    }
    if let Some(metrics) = metrics {
        builder = builder.metrics(metrics);
    }
    let server = configured_builder(builder, settings, audit, store)
        .title("Toolwire examples")
        .instructions("Small example tools: echo, arithmetic, text statistics, a slow counter with progress, the time, a greeting that asks your name, two questions in two rounds, a tool that changes the tool list, and notes kept by handle (note_create, note_append, note_read).")
        .tools(tools)
        .build()?;
    let _ = examples.handle.set(server.clone());
    Ok((server, examples))
}

/// What makes the example tools again, with other settings (a reload).
pub(crate) struct Examples {
    /// The server, for `toggle_shout`.
    handle: Arc<OnceLock<Server>>,
    notes: Notes,
}

impl Examples {
    /// Every example tool with the settings of its `[tools.NAME]` section.
    pub(crate) fn tools(
        &self,
        settings: &BTreeMap<String, ToolConfig>,
    ) -> anyhow::Result<Vec<Tool>> {
        let mut tools = tools(self.handle.clone());
        tools.extend(crate::notes::tools(&self.notes));
        configured(tools, settings)
    }
}

/// The server-wide settings of a `--config` file a running server takes (output guard, tool
/// quota, deadlines): what [`configured_builder`] sets at start, for a reload.
pub(crate) fn reconfigure(settings: &ServeConfig) -> Reconfigure {
    let mut reconfigure = Reconfigure::new();
    if let Some(output) = &settings.output {
        reconfigure = reconfigure.output_guard(output.guard());
    }
    if let Some(limits) = &settings.limits {
        reconfigure = limits.reconfigure(reconfigure);
    }
    match &settings.deadlines {
        Some(DeadlinesConfig {
            off: Some(reason), ..
        }) => reconfigure.no_tool_timeout(reason.clone()),
        Some(DeadlinesConfig {
            tool_timeout_ms: Some(ms),
            ..
        }) => reconfigure.tool_timeout(Duration::from_millis(*ms)),
        _ => reconfigure,
    }
}

/// `builder` with the server-wide settings of a `--config` file (output guard, audit sink,
/// limits, deadlines) and the state store: what `toolwire serve` and `toolwire gateway` share.
pub(crate) fn configured_builder(
    mut builder: ServerBuilder,
    settings: &ServeConfig,
    audit: Option<Arc<dyn AuditSink>>,
    store: Option<&Store>,
) -> ServerBuilder {
    // A sealed requestState answers one retry (M-08): one copied from a log or a proxy cannot
    // run a round again. A shared store remembers redemptions for every instance (and holds
    // their key ring, tasks and legacy sessions).
    builder = match store {
        Some(store) => builder.store(store.clone()),
        None => builder.single_use_request_state(MemoryReplayGuard::default()),
    };
    if let Some(output) = &settings.output {
        builder = builder.output_guard(output.guard());
    }
    if let Some(sink) = audit {
        builder = builder.audit_sink(sink);
    }
    if let Some(limits) = &settings.limits {
        builder = limits.apply(builder);
    }
    match &settings.deadlines {
        Some(DeadlinesConfig {
            off: Some(reason), ..
        }) => builder.no_tool_timeout(reason.clone()),
        Some(DeadlinesConfig {
            tool_timeout_ms: Some(ms),
            ..
        }) => builder.tool_timeout(Duration::from_millis(*ms)),
        _ => builder,
    }
}

/// The tools with the settings of their `[tools.NAME]` sections.
fn configured(
    mut tools: Vec<Tool>,
    settings: &BTreeMap<String, ToolConfig>,
) -> anyhow::Result<Vec<Tool>> {
    let names: Vec<String> = tools.iter().map(|t| t.definition().name.clone()).collect();
    for (name, config) in settings {
        let Some(at) = names.iter().position(|n| n == name) else {
            anyhow::bail!(
                "[tools.{name}] names no example tool; they are {}",
                names.join(", ")
            );
        };
        let tool = configured_tool(tools.remove(at), config);
        tools.insert(at, tool);
    }
    Ok(tools)
}

/// `tool` with the settings of its `[tools.NAME]` section.
pub(crate) fn configured_tool(tool: Tool, config: &ToolConfig) -> Tool {
    let mut tool = tool.scopes(config.scopes.clone());
    if let Some(reason) = &config.raw_output {
        tool = tool.raw_output(reason.clone());
    }
    if let Some(ms) = config.timeout_ms {
        tool = tool.timeout(Duration::from_millis(ms));
    }
    if let Some(reason) = &config.no_timeout {
        tool = tool.no_timeout(reason.clone());
    }
    if let Some(limit) = &config.rate_limit {
        tool = tool.rate_limit(limit.limit());
    }
    if let Some(reason) = &config.no_rate_limit {
        tool = tool.no_rate_limit(reason.clone());
    }
    if let Some(cost) = config.cost {
        tool = tool.cost(cost);
    }
    tool
}

/// The example tools, in listing order.
fn tools(handle: Arc<OnceLock<Server>>) -> Vec<Tool> {
    vec![
        Tool::new("echo", |args: Echo, _: RequestContext| async move { args.message })
                .description("Returns the message unchanged")
                .annotations(read_only()),
        Tool::new("add", |args: Add, _: RequestContext| async move {
                let sum = args.a + args.b;
                if !sum.is_finite() {
                    return Err(ToolError::failed("the sum is too large to represent"));
                }
                Ok(Structured(Sum { sum }))
            })
                .description("Adds two numbers; the sum comes back as structured content")
                .annotations(read_only()),
        Tool::new("word_count", |args: Text, _: RequestContext| async move {
                Structured(Counts {
                    words: args.text.split_whitespace().count(),
                    lines: args.text.lines().count(),
                    characters: args.text.chars().count(),
                })
            })
            .description("Counts the words, lines and characters of a text")
            .annotations(read_only()),
        Tool::new("count_slowly", |args: CountSlowly, ctx: RequestContext| async move {
                let to = args.to.min(100);
                for i in 1..=to {
                    tokio::select! {
                        _ = ctx.cancellation().cancelled() => return Err(ToolError::failed("cancelled")),
                        _ = tokio::time::sleep(Duration::from_millis(args.delay_ms.min(1000))) => {}
                    }
                    ctx.progress(f64::from(i), Some(f64::from(to)), Some(&format!("{i} of {to}"))).await;
                }
                Ok(format!("Counted to {to}."))
            })
            .description("Counts to a number with a pause between steps, reporting progress (pass _meta.progressToken)")
            .annotations(read_only()),
        Tool::new("current_time", |_: NoArgs, _: RequestContext| async {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(ToolError::internal)?;
                Ok::<_, ToolError>(format!("{} seconds since the Unix epoch", now.as_secs()))
            })
            .description("The server's current time, in seconds since the Unix epoch")
            .annotations(ToolAnnotations { read_only_hint: Some(true), ..Default::default() }),
        greet(),
        introduce(),
        toggle_shout(handle),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_server_builds() {
        let notes = crate::notes::store(
            crate::notes::Kept::Memory,
            crate::layers::HandlesConfig::default().lifetimes(),
        )
        .unwrap();
        let (server, _) = super::server(
            super::Clients::All,
            &Default::default(),
            None,
            &notes,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            server.tool_names(),
            [
                "echo",
                "add",
                "word_count",
                "count_slowly",
                "current_time",
                "greet",
                "introduce",
                "toggle_shout",
                "note_create",
                "note_append",
                "note_read"
            ]
        );
    }
}
