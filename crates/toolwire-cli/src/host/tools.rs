//! `toolwire tools [SERVER]`: what the model could use — each tool's qualified name, title,
//! a short description, its annotations (the server's claims marked unless it is trusted) and
//! its pin state — and what it could not, with the reason. With `--search "QUERY"`, only the
//! tools best matching a task described in words, best first.

use serde_json::{Value, json};
use toolwire_host::{Host, HostConfig, HostTool, PinState, ServerState, ServerStatus};

use super::HostArgs;
use super::approve::{hints, short, title};
use super::ended::Ended;
use super::open::Servers;
use crate::client::signature;
use crate::terminal::{Json, Layout, json as safe_json, note, out, visible};
use crate::ui::{Consent, Tone, Ui};

/// `--search QUERY --limit N`.
#[derive(Clone, Copy)]
pub(crate) struct Search<'a> {
    pub(crate) query: &'a str,
    pub(crate) limit: usize,
}

/// Runs `toolwire tools`.
pub(crate) async fn tools(
    args: &HostArgs,
    as_json: bool,
    server: Option<&str>,
    search: Option<Search<'_>>,
) -> anyhow::Result<()> {
    let ui = Ui::new(Consent::Ask);
    let one_off = args.one_off(server);
    let config = args.configuration(one_off, &ui).await?;
    // A configured server's name shows only its tools.
    let only = server.filter(|_| one_off.is_none());
    if let Some(name) = only {
        if config.server(name).is_none() {
            anyhow::bail!(
                "no server named {} in {}",
                visible(name, Layout::Line),
                config.file.display()
            );
        }
    }
    let servers = Servers::named(one_off);
    let host = args.open_config(&config, servers, &ui).await?;
    // When no server could be reached, the error says why, once.
    let failed = super::servers::all_failed(&host, &config, only);
    let shown = Shown {
        config: &config,
        only,
        servers,
        as_json,
        search,
    };
    let shown = match failed {
        Ok(()) => show(&host, &ui, &shown),
        Err(_) => Ok(()),
    };
    host.close().await;
    shown?;
    failed
}

/// What `toolwire tools` shows, and how.
struct Shown<'a> {
    config: &'a HostConfig,
    /// A configured server's name: only its tools.
    only: Option<&'a str>,
    servers: Servers,
    as_json: bool,
    search: Option<Search<'a>>,
}

impl Shown<'_> {
    /// Whether the tools of `server` are shown.
    fn wanted(&self, server: &str) -> bool {
        self.only.is_none_or(|o| o == server)
    }
}

/// The tools, then what was hidden or removed; a failed server is noted on stderr.
fn show(host: &Host, ui: &Ui, shown: &Shown<'_>) -> anyhow::Result<()> {
    if let Some(search) = shown.search {
        return show_found(host, ui, shown, search);
    }
    let all = host.tools();
    let tools: Vec<&HostTool> = all.iter().filter(|t| shown.wanted(&t.server)).collect();
    if shown.as_json {
        return show_json(host, &tools, shown.servers, None);
    }
    let mut lines = Vec::new();
    for tool in &tools {
        lines.extend(tool_lines(host, ui, tool, shown));
    }
    for status in host.servers().iter().filter(|s| shown.wanted(&s.name)) {
        lines.extend(server_lines(ui, status));
    }
    if lines.is_empty() {
        return Ok(());
    }
    Ok(out(&lines.join("\n"))?)
}

/// `--search`: the tools found, best first (of the one configured server named, if any); none
/// found ends with status 1, as grep does.
fn show_found(host: &Host, ui: &Ui, shown: &Shown<'_>, search: Search<'_>) -> anyhow::Result<()> {
    // Of one configured server: searched among all, then kept to the limit.
    let asked = match shown.only {
        Some(_) => toolwire_host::toolwire_search::MAX_LIMIT,
        None => search.limit,
    };
    let found = host
        .search_tools(search.query, asked)
        .map_err(|e| anyhow::anyhow!("--search: {e}"))?;
    let found: Vec<_> = found
        .into_iter()
        .filter(|f| shown.wanted(&f.tool.server))
        .take(search.limit)
        .collect();
    if found.is_empty() {
        note(&format!(
            "toolwire: no tool matches {}",
            visible(search.query, Layout::Line)
        ));
        return Err(Ended(1).into());
    }
    let tools: Vec<&HostTool> = found.iter().map(|f| &f.tool).collect();
    if shown.as_json {
        let scores: Vec<f32> = found.iter().map(|f| f.score).collect();
        return show_json(host, &tools, shown.servers, Some(&scores));
    }
    let lines: Vec<String> = tools
        .iter()
        .flat_map(|tool| tool_lines(host, ui, tool, shown))
        .collect();
    Ok(out(&lines.join("\n"))?)
}

/// `--json`: for one server named on the command line, its own definitions as it lists them;
/// else each tool with its qualified name, server and pin state (and, for a search, its score).
fn show_json(
    host: &Host,
    tools: &[&HostTool],
    servers: Servers,
    scores: Option<&[f32]>,
) -> anyhow::Result<()> {
    if servers == Servers::OneOff && scores.is_none() {
        let list: Vec<&toolwire_client::protocol::Tool> =
            tools.iter().map(|t| &*t.definition).collect();
        return Ok(out(&safe_json(&list, Json::Pretty)?)?);
    }
    let list: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut shown = json!({
                "name": t.qualified, "server": t.server, "tool": t.definition.name,
                "pin": pin_word(host, t), "definition": &*t.definition,
            });
            if let Some(score) = scores.and_then(|s| s.get(i)) {
                shown["score"] = json!(score);
            }
            shown
        })
        .collect();
    Ok(out(&safe_json(&list, Json::Pretty)?)?)
}

/// One tool: its signature, title and pin state, a short description, its annotations.
fn tool_lines(host: &Host, ui: &Ui, tool: &HostTool, shown: &Shown<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    let definition = serde_json::to_value(&*tool.definition).unwrap_or(Value::Null);
    // One server named on the command line is called by its own tool names.
    let name = match shown.servers {
        Servers::OneOff => &tool.definition.name,
        Servers::Configured => &tool.qualified,
    };
    let mut head = ui.paint_out(Tone::Bold, &signature(&tool.definition, name));
    if let Some(title) = title(&definition) {
        head.push_str(&format!("  {}", visible(title, Layout::Line)));
    }
    let pin = pin_word(host, tool);
    let pin = match pin {
        "changed" => ui.paint_out(Tone::Red, "[changed: calls refused until approved]"),
        "new" => ui.paint_out(Tone::Yellow, "[new]"),
        other => ui.paint_out(Tone::Dim, &format!("[{other}]")),
    };
    lines.push(format!("{head}  {pin}"));
    if let Some(description) = &tool.definition.description {
        lines.push(format!(
            "    {}",
            visible(&short(description, 100), Layout::Line)
        ));
    }
    let hints = hints(&definition["annotations"]);
    if !hints.is_empty() {
        let trusted = shown.config.server(&tool.server).is_some_and(|s| s.trust);
        let claim = if trusted {
            String::new()
        } else {
            ui.paint_out(Tone::Yellow, " (untrusted: the server's claim)")
        };
        lines.push(format!("    {}{claim}", hints.join(", ")));
    }
    lines
}

/// One server's hidden and removed tools; its failure is noted on stderr.
fn server_lines(ui: &Ui, status: &ServerStatus) -> Vec<String> {
    let mut lines = Vec::new();
    let server = visible(&status.name, Layout::Line);
    for hidden in &status.hidden {
        lines.push(ui.paint_out(
            Tone::Dim,
            &format!(
                "hidden: {} of {server}: {}",
                visible(&hidden.tool, Layout::Line),
                visible(&hidden.reason, Layout::Line)
            ),
        ));
    }
    for removed in &status.pins.removed {
        lines.push(ui.paint_out(
            Tone::Dim,
            &format!(
                "removed: {} of {server} is no longer listed",
                visible(removed, Layout::Line)
            ),
        ));
    }
    if let ServerState::Failed { error } = &status.state {
        note(&ui.paint(
            Tone::Red,
            &format!(
                "toolwire: server {server} failed: {}",
                visible(error, Layout::Line)
            ),
        ));
    }
    lines
}

/// `new`, `pinned` or `changed`.
pub(crate) fn pin_word(host: &Host, tool: &HostTool) -> &'static str {
    match host.pin_state(&tool.qualified) {
        Some(PinState::Changed { .. }) => "changed",
        _ => {
            let new = host
                .servers()
                .iter()
                .any(|s| s.name == tool.server && s.pins.new.contains(&tool.definition.name));
            if new { "new" } else { "pinned" }
        }
    }
}
