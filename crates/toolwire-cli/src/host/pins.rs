//! `toolwire pins`: the tool definitions a person approved, kept per server in the state
//! directory. `list` shows each listed tool's state, `diff` what changed in one, `approve`
//! accepts a changed definition, `forget` drops a pin (a removed tool no longer reported).
//! Prompts, resources and templates are pinned too: a changed one is listed and diffed as
//! `KIND:SERVER:NAME` (`prompt:fs:review`, `resource:fs:file:///README.md`), the name
//! `approve` takes for it.

use clap::Subcommand;
use std::sync::Arc;

use toolwire_host::pins::Changed;
use toolwire_host::{FilePins, Host, HostTool, OfferKind, PinStore, Pins};

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
    let done = act(&host, &ui, action).await;
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
async fn act(host: &Host, ui: &Ui, action: &PinsAction) -> anyhow::Result<()> {
    match action {
        PinsAction::List => list(host, ui),
        PinsAction::Diff { name } => diff(host, name.as_deref()),
        PinsAction::Approve { names } => approve(host, names).await,
        PinsAction::Forget { .. } => Ok(()),
    }
}

/// Every changed prompt, resource and template: its `KIND:SERVER:NAME` and what changed.
fn changed_offers(host: &Host) -> Vec<(String, Changed)> {
    let mut changed = Vec::new();
    for status in host.servers() {
        for kind in OfferKind::ALL {
            for change in &status.offer_pins.of(kind).changed {
                let name = format!("{}:{}:{}", kind.as_str(), status.name, change.tool);
                changed.push((name, change.clone()));
            }
        }
    }
    changed
}

/// `KIND:SERVER:NAME` of a prompt, resource or template, if `name` is one.
fn offer_name(name: &str) -> Option<(OfferKind, &str, &str)> {
    let (kind, rest) = name.split_once(':')?;
    let kind = OfferKind::ALL.into_iter().find(|k| k.as_str() == kind)?;
    let (server, item) = rest.split_once(':')?;
    Some((kind, server, item))
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
    for (name, _) in changed_offers(host) {
        let word = ui.paint_out(Tone::Red, "changed");
        lines.push(format!("{word:>7}  {}", visible(&name, Layout::Line)));
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

/// `pins diff [NAME]`: what changed in one tool (or prompt, resource, template), or in every
/// changed one.
fn diff(host: &Host, name: Option<&str>) -> anyhow::Result<()> {
    let offers = changed_offers(host);
    if let Some(name) = name.filter(|n| offer_name(n).is_some()) {
        let Some((_, change)) = offers.iter().find(|(n, _)| n == name) else {
            return Ok(out(&format!(
                "{} has not changed since it was approved",
                visible(name, Layout::Line)
            ))?);
        };
        return Ok(out(&change_lines(change).join("\n"))?);
    }
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
    if name.is_none() {
        for (name, change) in &offers {
            lines.push(format!("{}:", visible(name, Layout::Line)));
            lines.extend(change_lines(change).into_iter().map(|l| format!("  {l}")));
        }
    }
    if !lines.is_empty() {
        out(&lines.join("\n"))?;
    }
    Ok(())
}

/// `pins approve NAME…`: each changed tool's (or `KIND:SERVER:NAME`'s) listed definition
/// becomes its pin.
async fn approve(host: &Host, names: &[String]) -> anyhow::Result<()> {
    for name in names {
        if let Some((kind, server, item)) = offer_name(name) {
            if host.approve_offer(server, kind, item, None).await? {
                out(&format!(
                    "approved the new definition of {}",
                    visible(name, Layout::Line)
                ))?;
            } else {
                note(&format!(
                    "toolwire: {} has not changed; nothing to approve",
                    visible(name, Layout::Line)
                ));
            }
            continue;
        }
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

/// What `change` changed, one line per change, every piece made visible.
fn change_lines(change: &Changed) -> Vec<String> {
    change
        .changes
        .iter()
        .flat_map(|change| {
            visible(&change.to_string(), Layout::Text)
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
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
