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
    let host = tokio::select! {
        host = args.open(None, &ui) => host?,
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
        if only.is_some_and(|o| o != change.server) {
            continue;
        }
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
            if let Err(e) = host.refresh().await {
                break Err(e.into());
            }
            if let Some(status) = host.servers().iter().find(|s| s.name == change.server) {
                let report = &status.pins;
                let mut said = Vec::new();
                if !report.new.is_empty() {
                    said.push(format!("new: {}", report.new.join(", ")));
                }
                if !report.changed.is_empty() {
                    let names: Vec<&str> = report.changed.iter().map(|c| c.tool.as_str()).collect();
                    said.push(format!(
                        "changed (calls refused until approved): {}",
                        names.join(", ")
                    ));
                }
                if !report.removed.is_empty() {
                    said.push(format!("removed: {}", report.removed.join(", ")));
                }
                if !said.is_empty() {
                    if let Err(e) = out(&format!("  {}", visible(&said.join("; "), Layout::Line))) {
                        break Err(e.into());
                    }
                }
            }
        }
    };
    host.close().await;
    outcome
}
