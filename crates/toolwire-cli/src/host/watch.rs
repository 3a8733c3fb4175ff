//! `toolwire watch` over the configured servers: every server's list changes as they happen,
//! each followed by what changed against the pins (new, changed and removed tools).

use futures::StreamExt as _;
use toolwire_client::Notification;

use super::HostArgs;
use crate::session::Signals;
use crate::terminal::{Layout, note, out, visible};
use crate::ui::{Consent, Ui};

/// Runs `toolwire watch` over every configured server (or the one named).
pub(crate) async fn watch(args: &HostArgs, only: Option<&str>) -> anyhow::Result<()> {
    let ui = Ui::new(Consent::Ask);
    let mut signals = Signals::listen()?;
    // Only the server named is started and watched.
    let opened = async {
        let mut config = args.configuration(None, &ui).await?;
        if let Some(only) = only {
            narrow_to(&mut config, only)?;
        }
        args.open_config(&config, super::open::Servers::Configured, &ui)
            .await
    };
    let host = tokio::select! {
        host = opened => host?,
        signal = signals.next() => return Err(signal.into()),
    };
    let mut changes = host.list_changes().await;
    for (server, why) in &changes.unavailable {
        note(&format!(
            "toolwire: {} sends no change notifications: {}",
            visible(server, Layout::Line),
            visible(why, Layout::Line)
        ));
    }
    note("toolwire: watching for list changes (Ctrl-C to stop)");
    let outcome = loop {
        let change = tokio::select! {
            change = changes.next() => change,
            signal = signals.next() => break Err(signal.into()),
        };
        let Some(change) = change else {
            note("toolwire: every server ended its stream");
            break Ok(());
        };
        let what = match &change.notification {
            Notification::ToolsListChanged => "tools/list_changed".to_owned(),
            Notification::PromptsListChanged => "prompts/list_changed".to_owned(),
            Notification::ResourcesListChanged => "resources/list_changed".to_owned(),
            Notification::ResourceUpdated { uri } => format!("resources/updated {uri}"),
            Notification::Reconnected => "reconnected (changes in between may be missed)".into(),
            Notification::Other { method, .. } => method.clone(),
            other => format!("{other:?}"),
        };
        if let Err(e) = out(&format!(
            "{}: {}",
            visible(&change.server, Layout::Line),
            visible(&what, Layout::Line)
        )) {
            break Err(e.into());
        }
        if matches!(change.notification, Notification::ToolsListChanged) {
            let before = listed(&host, &change.server);
            if let Err(e) = host.refresh().await {
                break Err(e.into());
            }
            let mut said = crate::changes::described(&before, &listed(&host, &change.server));
            // Against the pins: which of them are withheld until a person approves them.
            if let Some(status) = host.servers().iter().find(|s| s.name == change.server) {
                let held: Vec<&str> = status
                    .pins
                    .changed
                    .iter()
                    .map(|c| c.tool.as_str())
                    .collect();
                if !held.is_empty() {
                    said.push_str(&format!(
                        "; calls refused until approved (toolwire pins diff): {}",
                        held.join(", ")
                    ));
                }
            }
            if let Err(e) = out(&format!("  {}", visible(&said, Layout::Line))) {
                break Err(e.into());
            }
        }
    };
    host.close().await;
    outcome
}

/// `server`'s tools as the host lists them now, under their qualified names.
fn listed(host: &toolwire_host::Host, server: &str) -> crate::changes::Listing {
    let tools = host.tools();
    crate::changes::listing(
        tools
            .iter()
            .filter(|tool| tool.server == server)
            .map(|tool| (tool.qualified.clone(), &*tool.definition)),
    )
}

/// `config` with only the server `name`: an error naming the configured ones when there is
/// no such server.
fn narrow_to(config: &mut toolwire_host::HostConfig, name: &str) -> anyhow::Result<()> {
    if config.server(name).is_none() {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        anyhow::bail!(
            "no server named {} is configured (configured: {})",
            visible(name, Layout::Line),
            visible(&names.join(", "), Layout::Line)
        );
    }
    config.servers.retain(|s| s.name == name);
    Ok(())
}
