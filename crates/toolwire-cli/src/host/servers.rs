//! `toolwire servers`: each configured server with how it is reached, its era, its status and
//! how many tools the model sees.

use serde_json::json;
use toolwire_client::ServerEra;
use toolwire_host::{HostConfig, SandboxStatus, ServerState, ServerStatus, Transport};

use super::HostArgs;
use super::open::Servers;
use crate::terminal::{Json, Layout, json as safe_json, out, visible};
use crate::ui::{Consent, Tone, Ui};

/// Runs `toolwire servers`.
pub(crate) async fn servers(args: &HostArgs, as_json: bool) -> anyhow::Result<()> {
    let ui = Ui::new(Consent::Ask);
    let config = args.configuration(args.server.as_deref(), &ui).await?;
    let host = args
        .open_config(&config, Servers::named(args.server.as_deref()), &ui)
        .await?;
    let statuses = host.servers().to_vec();
    host.close().await;
    if as_json {
        let list: Vec<_> = statuses
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "transport": reached(&config, &s.name),
                    "era": s.era.as_ref().map(era),
                    "status": match &s.state {
                        ServerState::Connected { tools } => json!({"connected": {"tools": tools}}),
                        ServerState::Failed { error } => json!({"failed": {"error": error}}),
                    },
                    "hidden": s.hidden.iter().map(|h| json!({"tool": h.tool, "reason": h.reason})).collect::<Vec<_>>(),
                    "signedIn": s.authorized.as_ref().map(|a| json!({"issuer": a.issuer, "scope": a.scope, "expiresAt": a.expires_at})),
                    "sandbox": s.sandbox,
                })
            })
            .collect();
        return Ok(out(&safe_json(&list, Json::Pretty)?)?);
    }
    let width = statuses
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines = Vec::new();
    for status in &statuses {
        lines.push(line(&ui, &config, status, width));
    }
    if lines.is_empty() {
        lines.push("no servers are configured (or every one is disabled)".into());
    }
    Ok(out(&lines.join("\n"))?)
}

fn line(ui: &Ui, config: &HostConfig, status: &ServerStatus, width: usize) -> String {
    let name = visible(&status.name, Layout::Line);
    let pad = " ".repeat(width.saturating_sub(status.name.chars().count()));
    let state = match &status.state {
        ServerState::Connected { tools } => {
            let hidden = match status.hidden.len() {
                0 => String::new(),
                n => format!(", {n} hidden"),
            };
            let signed_in = match &status.authorized {
                Some(a) => format!(", signed in at {}", visible(&a.issuer, Layout::Line)),
                None => String::new(),
            };
            ui.paint_out(
                Tone::Green,
                &format!(
                    "connected, {}{hidden}{signed_in}",
                    crate::terminal::counted(*tools, "tool", "tools")
                ),
            )
        }
        ServerState::Failed { error } => ui.paint_out(
            Tone::Red,
            &format!("failed: {}", visible(error, Layout::Line)),
        ),
    };
    let era = status.era.as_ref().map(era).unwrap_or_else(|| "-".into());
    // Where the server runs with the person's rights, it says so in their colour.
    let sandbox = match &status.sandbox {
        SandboxStatus::Remote => String::new(),
        SandboxStatus::Enforced => format!("  [{}]", status.sandbox),
        other => format!(
            "  [{}]",
            ui.paint_out(Tone::Yellow, &visible(&other.to_string(), Layout::Line))
        ),
    };
    format!(
        "{}{pad}  {}  {}  {state}{sandbox}",
        ui.paint_out(Tone::Bold, &name),
        visible(&reached(config, &status.name), Layout::Line),
        visible(&era, Layout::Line)
    )
}

/// How a server is reached, in a few words.
fn reached(config: &HostConfig, name: &str) -> String {
    match config.server(name).map(|s| &s.transport) {
        Some(Transport::Http { url, .. }) => format!("http {url}"),
        Some(Transport::Stdio { command, args, .. }) => {
            let mut line = format!("stdio {command}");
            for arg in args {
                line.push(' ');
                line.push_str(arg);
            }
            line
        }
        _ => "?".into(),
    }
}

/// An error when every server wanted (all, or `only`) failed: there is nothing to show but
/// the failures, and a script should know.
pub(crate) fn all_failed(
    host: &toolwire_host::Host,
    config: &HostConfig,
    only: Option<&str>,
) -> anyhow::Result<()> {
    let servers = host.servers();
    let wanted: Vec<&ServerStatus> = servers
        .iter()
        .filter(|s| only.is_none_or(|o| o == s.name))
        .collect();
    let errors: Vec<String> = wanted
        .iter()
        .filter_map(|s| match &s.state {
            ServerState::Failed { error } => Some(format!(
                "server {} {}: {}",
                super::open::server_name(&s.name),
                super::open::failed_how(config, &s.name),
                visible(error, Layout::Line)
            )),
            ServerState::Connected { .. } => None,
        })
        .collect();
    if !wanted.is_empty() && errors.len() == wanted.len() {
        anyhow::bail!("{}", errors.join("; "));
    }
    Ok(())
}

/// The era in words.
pub(crate) fn era(era: &ServerEra) -> String {
    match era {
        ServerEra::Modern { version } => version.clone(),
        ServerEra::Legacy { version } => format!("{version} (legacy)"),
        _ => "unknown".into(),
    }
}
