//! The client commands: `discover`, `tools`, `call` and `watch` against any MCP server, reached
//! by URL (Streamable HTTP) or by a command line (a stdio child process). Results go to stdout,
//! everything else to stderr, and every piece of the server's text through `terminal`, which
//! makes its control characters visible.

use anyhow::Context as _;
use serde_json::Value;
use toolwire_client::protocol::SubscriptionFilter;
use toolwire_client::{Client, Notification};

use crate::session::session;
use crate::target::Target;
use crate::terminal::{Json, Layout, json, note, out, visible};

/// `toolwire discover`: the era, version, server and capabilities.
pub(crate) async fn discover(target: &Target, as_json: bool) -> anyhow::Result<()> {
    session(target, async |client| discover_with(client, as_json).await).await
}

async fn discover_with(client: &Client, as_json: bool) -> anyhow::Result<()> {
    let discover = client.discover().await?;
    let era = client.era();
    if as_json {
        return Ok(out(&json(&discover, Json::Pretty)?)?);
    }
    let mut lines = Vec::new();
    let info = discover.meta.as_ref().and_then(|m| m.server_info.as_ref());
    if let Some(info) = info {
        let name = visible(&info.name, Layout::Line);
        lines.push(format!(
            "server: {name} {}",
            visible(&info.version, Layout::Line)
        ));
    }
    let era = crate::host::servers::era(&era.context("no era settled")?);
    lines.push(format!("era: {}", visible(&era, Layout::Line)));
    let versions = discover.supported_versions.join(", ");
    lines.push(format!("versions: {}", visible(&versions, Layout::Line)));
    lines.push(format!(
        "capabilities: {}",
        json(&discover.capabilities, Json::Compact)?
    ));
    if let Some(instructions) = &discover.instructions {
        lines.push(format!(
            "instructions: {}",
            visible(instructions, Layout::Text)
        ));
    }
    Ok(out(&lines.join("\n"))?)
}

/// `name(argument: type, optional?: type)`, every part of it made visible.
pub(crate) fn signature(tool: &toolwire_client::protocol::Tool, name: &str) -> String {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let arguments: Vec<String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| {
                    let kind = schema["type"].as_str().unwrap_or("any");
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {kind}")
                })
                .collect()
        })
        .unwrap_or_default();
    let signature = format!("{name}({})", arguments.join(", "));
    visible(&signature, Layout::Line).into_owned()
}

/// `toolwire watch`: prints list changes until interrupted or the server ends the stream.
pub(crate) async fn watch(target: &Target, resources: Vec<String>) -> anyhow::Result<()> {
    session(target, async |client| watch_with(client, resources).await).await
}

async fn watch_with(client: &Client, resources: Vec<String>) -> anyhow::Result<()> {
    // Ask for every kind of change the server says it sends.
    let caps = client.discover().await?.capabilities;
    let announced = |flag: Option<bool>| flag.filter(|&on| on);
    let filter = SubscriptionFilter {
        tools_list_changed: announced(caps.tools.as_ref().and_then(|c| c.list_changed)),
        prompts_list_changed: announced(caps.prompts.as_ref().and_then(|c| c.list_changed)),
        resources_list_changed: announced(caps.resources.as_ref().and_then(|c| c.list_changed)),
        resource_subscriptions: (!resources.is_empty()).then_some(resources.clone()),
    };
    let mut subscription = client.listen(filter).await?;
    let acknowledged = subscription.acknowledged();
    let followed = acknowledged
        .resource_subscriptions
        .as_deref()
        .unwrap_or_default();
    let dropped: Vec<&str> = resources
        .iter()
        .filter(|r| !followed.contains(r))
        .map(String::as_str)
        .collect();
    if !dropped.is_empty() {
        note(&format!(
            "toolwire: the server does not send updates of {} (it did not accept the subscription)",
            visible(&dropped.join(", "), Layout::Line)
        ));
    }
    note(&format!(
        "toolwire: {} (Ctrl-C to stop)",
        watching(acknowledged)
    ));
    // The list as it is now, to say what each change changed.
    let mut tools = listed(&client.list_tools().await?);
    loop {
        match subscription.next().await {
            None => {
                note("toolwire: the server ended the subscription");
                return Ok(());
            }
            Some(Err(error)) => return Err(error.into()),
            // A closed stdout ends the watch (and, in `main`, the command, quietly).
            Some(Ok(notification)) => {
                out(&describe(&notification))?;
                if matches!(notification, Notification::ToolsListChanged) {
                    let now = listed(&client.refresh_tools().await?);
                    let said = crate::changes::described(&tools, &now);
                    out(&format!("  {}", visible(&said, Layout::Line)))?;
                    tools = now;
                }
            }
        }
    }
}

/// A server's tools, each under its own name.
fn listed(tools: &[toolwire_client::protocol::Tool]) -> crate::changes::Listing {
    crate::changes::listing(tools.iter().map(|tool| (tool.name.clone(), tool)))
}

/// What a subscription the server acknowledged follows, in words.
fn watching(acknowledged: &SubscriptionFilter) -> String {
    let on = |flag: Option<bool>| flag == Some(true);
    let lists: Vec<&str> = [
        (on(acknowledged.tools_list_changed), "tool"),
        (on(acknowledged.prompts_list_changed), "prompt"),
        (on(acknowledged.resources_list_changed), "resource"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let resources = acknowledged
        .resource_subscriptions
        .as_deref()
        .unwrap_or_default();
    let mut what = Vec::new();
    match lists.as_slice() {
        [] => {}
        [one] => what.push(format!("the server's {one} list for changes")),
        [first @ .., last] => what.push(format!(
            "the server's {} and {last} lists for changes",
            first.join(", ")
        )),
    }
    match resources {
        [] => {}
        [one] => what.push(format!("{} for updates", visible(one, Layout::Line))),
        many => what.push(format!(
            "{} resources for updates ({})",
            many.len(),
            visible(&many.join(", "), Layout::Line)
        )),
    }
    if what.is_empty() {
        return "the server sends no change notifications; waiting until it ends the subscription"
            .to_owned();
    }
    format!("watching {}", what.join(", and "))
}

fn describe(notification: &Notification) -> String {
    let described = match notification {
        Notification::ToolsListChanged => "tools/list_changed".into(),
        Notification::PromptsListChanged => "prompts/list_changed".into(),
        Notification::ResourcesListChanged => "resources/list_changed".into(),
        Notification::ResourceUpdated { uri } => format!("resources/updated {uri}"),
        Notification::Reconnected => "reconnected (changes in between may be missed)".into(),
        Notification::Other { method, .. } => method.clone(),
        _ => format!("{notification:?}"),
    };
    visible(&described, Layout::Line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_watched_is_said_in_words() {
        let filter = |tools, prompts, resources, uris: &[&str]| SubscriptionFilter {
            tools_list_changed: tools,
            prompts_list_changed: prompts,
            resources_list_changed: resources,
            resource_subscriptions: (!uris.is_empty())
                .then(|| uris.iter().map(|u| u.to_string()).collect()),
        };
        let cases = [
            (
                filter(Some(true), None, None, &[]),
                "watching the server's tool list for changes",
            ),
            (
                filter(Some(true), Some(true), Some(true), &[]),
                "watching the server's tool, prompt and resource lists for changes",
            ),
            (
                filter(None, Some(true), Some(false), &["file:///notes.txt"]),
                "watching the server's prompt list for changes, and file:///notes.txt for updates",
            ),
            (
                filter(None, None, None, &["a:1", "b:\u{1b}"]),
                "watching 2 resources for updates (a:1, b:^[)",
            ),
            (
                filter(None, None, None, &[]),
                "the server sends no change notifications; waiting until it ends the subscription",
            ),
        ];
        for (acknowledged, said) in cases {
            assert_eq!(watching(&acknowledged), said);
        }
    }
}
