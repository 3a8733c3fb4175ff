//! `toolwire pins`: the tool definitions a person approved, kept per server in the state
//! directory. `list` shows each listed tool's state, `diff` what changed in one, `approve`
//! accepts a changed definition, `forget` drops a pin (a removed tool no longer reported).

use clap::Subcommand;
use std::sync::Arc;

use toolwire_host::{FilePins, Host, HostTool, PinStore, Pins};

use super::ConnectArgs;
use super::tools::pin_word;
use crate::terminal::{Layout, note, out, visible};
use crate::ui::{Consent, Tone, Ui};

/// What to do with pins.
#[derive(Subcommand, Debug)]
pub(crate) enum PinsAction {
    /// Every listed tool with its pin state (new, pinned, changed), and removed tools.
    List,
    /// What changed in a tool's definition since it was approved (every changed tool without
    /// NAME).
    Diff {
        /// The tool's qualified name.
        name: Option<String>,
    },
    /// Accept a changed tool's new definition: calls to it are allowed again.
    Approve {
        /// The tools' qualified names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Forget the pin of a server's tool (e.g. one the server no longer lists).
    Forget {
        /// The server's name in the configuration.
        server: String,
        /// The tool's name on the server.
        tool: String,
    },
}

/// Runs `toolwire pins`, on the pins of the shared store `store` (or the one a gateway file
/// names) when there is one.
pub(crate) async fn pins(
    args: &ConnectArgs,
    store: Option<&str>,
    action: &PinsAction,
) -> anyhow::Result<()> {
    let ui = Ui::new(Consent::Ask);
    let shared = shared_pins(args, store)?;
    if let Some(chosen) = &shared {
        note(&format!("toolwire: the pins in {}", chosen.shown));
    }
    if let PinsAction::Forget { server, tool } = action {
        // Nothing is started: the configuration only says where its pins are kept.
        let config = args.config.configured(&ui).await?;
        let (server_shown, tool_shown) =
            (visible(server, Layout::Line), visible(tool, Layout::Line));
        if config.server(server).is_none() {
            anyhow::bail!(
                "no server named {server_shown} in {} (`toolwire servers` lists them)",
                crate::terminal::shown(&config.file)
            );
        }
        let store: Arc<dyn PinStore> = match &shared {
            Some(chosen) => chosen.pins.clone(),
            None => Arc::new(FilePins::new(
                config.state_dir_in(&args.config.state_dir()?),
            )),
        };
        if !Pins::new(store).forget(server, tool)? {
            anyhow::bail!(
                "server {server_shown} has no pin of {tool_shown} (`toolwire pins list` shows them)"
            );
        }
        return Ok(out(&format!(
            "forgot the pin of {tool_shown} of server {server_shown}"
        ))?);
    }
    let mut host_args = args.host();
    host_args.pin_store = shared.map(|chosen| chosen.pins);
    let host = host_args.open(None, &ui).await?;
    let done = act(&host, &ui, action);
    host.close().await;
    done
}

/// The shared store of `--store`, else of the configuration file's `gateway.store` (a
/// gateway's file: its pins are where the gateway keeps them).
fn shared_pins(
    args: &ConnectArgs,
    flag: Option<&str>,
) -> anyhow::Result<Option<crate::store::Chosen>> {
    let settings = match &args.config.config {
        Some(file) => crate::gateway::store_settings(file)?,
        None => None,
    };
    crate::store::open(flag, settings.as_ref(), |name| std::env::var(name).ok())
}

/// An action on the listed tools.
fn act(host: &Host, ui: &Ui, action: &PinsAction) -> anyhow::Result<()> {
    match action {
        PinsAction::List => list(host, ui),
        PinsAction::Diff { name } => diff(host, name.as_deref()),
        PinsAction::Approve { names } => approve(host, names),
        PinsAction::Forget { .. } => Ok(()),
    }
}

/// `pins list`: each listed tool's state, then the removed ones.
fn list(host: &Host, ui: &Ui) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    for tool in host.tools().iter() {
        let word = pin_word(host, tool);
        let word = match word {
            "changed" => ui.paint_out(Tone::Red, word),
            "new" => ui.paint_out(Tone::Yellow, word),
            _ => word.to_owned(),
        };
        lines.push(format!(
            "{word:>7}  {}",
            visible(&tool.qualified, Layout::Line)
        ));
    }
    for status in host.servers() {
        for removed in &status.pins.removed {
            lines.push(format!(
                "removed  {} of {}",
                visible(removed, Layout::Line),
                visible(&status.name, Layout::Line)
            ));
        }
    }
    if !lines.is_empty() {
        out(&lines.join("\n"))?;
    }
    Ok(())
}

/// `pins diff [NAME]`: what changed in one tool, or in every changed tool.
fn diff(host: &Host, name: Option<&str>) -> anyhow::Result<()> {
    let tools = host.tools();
    let changed: Vec<&HostTool> = tools
        .iter()
        .filter(|t| name.is_none_or(|n| n == t.qualified))
        .filter(|t| pin_word(host, t) == "changed")
        .collect();
    if let Some(name) = name {
        if host.tool(name).is_none() {
            anyhow::bail!("there is no tool named {}", visible(name, Layout::Line));
        }
        if changed.is_empty() {
            return Ok(out(&format!(
                "{} has not changed since it was approved",
                visible(name, Layout::Line)
            ))?);
        }
    }
    let mut lines = Vec::new();
    for tool in changed {
        lines.push(format!("{}:", visible(&tool.qualified, Layout::Line)));
        lines.extend(diff_lines(host, tool).into_iter().map(|l| format!("  {l}")));
    }
    if !lines.is_empty() {
        out(&lines.join("\n"))?;
    }
    Ok(())
}

/// `pins approve NAME…`: each changed tool's listed definition becomes its pin.
fn approve(host: &Host, names: &[String]) -> anyhow::Result<()> {
    for name in names {
        let tool = host.tool(name).ok_or_else(|| {
            anyhow::anyhow!("there is no tool named {}", visible(name, Layout::Line))
        })?;
        if pin_word(host, &tool) != "changed" {
            note(&format!(
                "toolwire: {} has not changed; nothing to approve",
                visible(name, Layout::Line)
            ));
            continue;
        }
        host.approve_change(name)?;
        out(&format!(
            "approved the new definition of {}",
            visible(name, Layout::Line)
        ))?;
    }
    Ok(())
}

/// What changed in `tool`'s definition, one line per change, every piece made visible.
pub(crate) fn diff_lines(host: &Host, tool: &HostTool) -> Vec<String> {
    host.servers()
        .iter()
        .filter(|s| s.name == tool.server)
        .flat_map(|s| s.pins.changed.iter())
        .filter(|c| c.tool == tool.definition.name)
        .flat_map(|c| c.changes.iter())
        .flat_map(|change| {
            visible(&change.to_string(), Layout::Text)
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}
