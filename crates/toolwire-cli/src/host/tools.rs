//! `toolwire tools [SERVER]`: what the model could use — each tool's qualified name, title,
//! a short description, its annotations (the server's claims marked unless it is trusted) and
//! its pin state — and what it could not, with the reason.

use serde_json::{Value, json};
use toolwire_host::{Host, HostConfig, HostTool, PinState, ServerState};

use super::HostArgs;
use super::approve::{hints, short, title};
use crate::client::signature;
use crate::terminal::{Layout, json as safe_json, note, out, visible};
use crate::ui::{Tone, Ui};

/// Runs `toolwire tools`.
pub(crate) async fn tools(
    args: &HostArgs,
    as_json: bool,
    server: Option<&str>,
) -> anyhow::Result<()> {
    let ui = Ui::new(false);
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
    let host = args.open_config(&config, one_off.is_some(), &ui).await?;
    // When no server could be reached, the error says why, once.
    let failed = super::servers::all_failed(&host, &config, only);
    let shown = match failed {
        Ok(()) => show(&host, &ui, as_json, &config, only, one_off.is_some()),
        Err(_) => Ok(()),
    };
    host.close().await;
    shown?;
    failed
}

fn show(
    host: &Host,
    ui: &Ui,
    as_json: bool,
    config: &HostConfig,
    only: Option<&str>,
    one_off: bool,
) -> anyhow::Result<()> {
    let trusted = |server: &str| config.server(server).is_some_and(|s| s.trust);
    let wanted = |server: &str| only.is_none_or(|o| o == server);
    let tools: Vec<&HostTool> = host.tools().iter().filter(|t| wanted(&t.server)).collect();
    if as_json && one_off {
        // One server: its own definitions, as it lists them.
        let list: Vec<&toolwire_client::protocol::Tool> =
            tools.iter().map(|t| &t.definition).collect();
        return Ok(out(&safe_json(&list, true)?)?);
    }
    if as_json {
        let list: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.qualified, "server": t.server, "tool": t.definition.name,
                    "pin": pin_word(host, t), "definition": t.definition,
                })
            })
            .collect();
        return Ok(out(&safe_json(&list, true)?)?);
    }
    let mut lines = Vec::new();
    for tool in &tools {
        let definition = serde_json::to_value(&tool.definition).unwrap_or(Value::Null);
        // One server named on the command line is called by its own tool names.
        let name = if one_off {
            &tool.definition.name
        } else {
            &tool.qualified
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
            let claim = if trusted(&tool.server) {
                String::new()
            } else {
                ui.paint_out(Tone::Yellow, " (untrusted: the server's claim)")
            };
            lines.push(format!("    {}{claim}", hints.join(", ")));
        }
    }
    for status in host.servers().iter().filter(|s| wanted(&s.name)) {
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
    }
    if lines.is_empty() {
        return Ok(());
    }
    Ok(out(&lines.join("\n"))?)
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
