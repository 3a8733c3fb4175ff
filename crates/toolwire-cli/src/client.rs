//! The client commands: `discover`, `tools`, `call` and `watch` against any MCP server, reached
//! by URL (Streamable HTTP) or by a command line (a stdio child process). Results go to stdout,
//! everything else to stderr, and every piece of the server's text through `terminal`, which
//! makes its control characters visible.

use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::Value;
use toolwire_client::protocol::{
    CallToolResult, ContentBlock, ElicitRequestParams, SubscriptionFilter,
};
use toolwire_client::{CallOptions, Client, ClientBuilder, Notification, StdioCommand};

use crate::session::session;
use crate::terminal::{Layout, json, note, out, visible};

/// How to reach the server, shared by every client command.
#[derive(Args, Debug)]
pub(crate) struct Target {
    /// The server: an http(s):// URL, or a command line that starts it on stdio (quoted, e.g.
    /// "toolwire serve" or "python server.py --stdio").
    #[arg(value_name = "SERVER")]
    server: String,
    /// An HTTP header for every request, as NAME:VALUE (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME:VALUE")]
    headers: Vec<String>,
    /// Trust the CA certificates in this PEM file for HTTPS, besides the system's (repeatable;
    /// SSL_CERT_FILE and SSL_CERT_DIR are honoured too).
    #[arg(long = "ca-file", value_name = "PEM")]
    ca_files: Vec<std::path::PathBuf>,
    /// A bearer token for HTTP servers (or set TOOLWIRE_BEARER_TOKEN).
    #[arg(long, env = "TOOLWIRE_BEARER_TOKEN", hide_env_values = true)]
    bearer: Option<String>,
    /// An environment variable for a stdio server, as NAME=VALUE, or NAME to pass on this
    /// process's value (repeatable). Otherwise the server gets only HOME, LOGNAME, PATH, SHELL,
    /// TERM and USER from this environment.
    #[arg(long = "env", short = 'e', value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Seconds to wait for each answer (progress restarts the wait).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
    /// Seconds a stdio server may take to answer its first `server/discover` before it is
    /// spoken to as a 2025-11-25 server (slow starters: a first `npx -y`, a container, a JVM).
    /// The first request's --timeout bounds it too.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    probe_timeout: f64,
    /// The answer to every form elicitation, as a JSON object (without it, elicitations are
    /// declined and their question printed). URL-mode elicitation is not offered: this command
    /// cannot get the user's consent to open a URL (M-16).
    #[arg(long, value_name = "JSON")]
    answer: Option<String>,
    /// Print results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Target {
    /// Connects: HTTP for a URL, else a child process.
    pub(crate) async fn connect(&self) -> anyhow::Result<Client> {
        let timeout = Duration::try_from_secs_f64(self.timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .context("--timeout must be a positive number of seconds")?;
        let probe_timeout = Duration::try_from_secs_f64(self.probe_timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .context("--probe-timeout must be a positive number of seconds")?;
        let mut builder = ClientBuilder::new("toolwire-cli", env!("CARGO_PKG_VERSION"))
            .timeout(timeout)
            .probe_timeout(probe_timeout);
        for header in &self.headers {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("--header {header:?} is not NAME:VALUE"))?;
            builder = builder.header(name.trim(), value.trim());
        }
        if let Some(token) = &self.bearer {
            builder = builder.bearer_token(token);
        }
        for path in &self.ca_files {
            builder = builder.ca_file(path);
        }
        let answer: Option<Value> = match &self.answer {
            Some(text) => Some(serde_json::from_str(text).context("--answer is not JSON")?),
            None => None,
        };
        // Form mode only: only forms reach this handler, and URL mode is not declared (M-16).
        builder = builder.on_elicit(move |request| {
            let answer = answer.clone();
            async move {
                let question = match &request {
                    ElicitRequestParams::Form(form) => visible(&form.message, Layout::Line),
                    ElicitRequestParams::Url(_) => {
                        return Err(toolwire_client::Error::Input(
                            "URL-mode elicitation is not offered".into(),
                        ));
                    }
                };
                match answer {
                    Some(answer) => {
                        note(&format!(
                            "toolwire: the server asks: {question} -> answering {answer}"
                        ));
                        toolwire_client::accepted(&answer)
                    }
                    None => {
                        note(&format!(
                            "toolwire: the server asks: {question} -> declined (pass --answer JSON to answer)"
                        ));
                        Ok(toolwire_client::declined())
                    }
                }
            }
        });
        if self.server.starts_with("http://") || self.server.starts_with("https://") {
            if !self.env.is_empty() {
                bail!("--env applies to stdio servers only");
            }
            return Ok(builder.http(&self.server)?);
        }
        let words = shlex::split(&self.server)
            .filter(|w| !w.is_empty())
            .with_context(|| format!("cannot split the command line {:?}", self.server))?;
        let mut command = StdioCommand::new(&words[0]).args(&words[1..]);
        for pair in &self.env {
            command = match pair.split_once('=') {
                Some((name, value)) => command.env(name, value),
                None => command.inherit_env(pair),
            };
        }
        Ok(builder.spawn_command(command).await?)
    }
}

/// `toolwire discover`: the era, version, server and capabilities.
pub(crate) async fn discover(target: &Target) -> anyhow::Result<()> {
    session(target, async |client| discover_with(target, client).await).await
}

async fn discover_with(target: &Target, client: &Client) -> anyhow::Result<()> {
    let discover = client.discover().await?;
    let era = client.era();
    if target.json {
        return Ok(out(&json(&discover, true)?)?);
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
    let era = format!("{:?}", era.context("no era settled")?);
    lines.push(format!("era: {}", visible(&era, Layout::Line)));
    let versions = discover.supported_versions.join(", ");
    lines.push(format!("versions: {}", visible(&versions, Layout::Line)));
    lines.push(format!(
        "capabilities: {}",
        json(&discover.capabilities, false)?
    ));
    if let Some(instructions) = &discover.instructions {
        lines.push(format!(
            "instructions: {}",
            visible(instructions, Layout::Text)
        ));
    }
    Ok(out(&lines.join("\n"))?)
}

/// `toolwire tools`: every tool, with its arguments.
pub(crate) async fn tools(target: &Target) -> anyhow::Result<()> {
    session(target, async |client| tools_with(target, client).await).await
}

async fn tools_with(target: &Target, client: &Client) -> anyhow::Result<()> {
    let tools = client.list_tools().await?;
    if target.json {
        return Ok(out(&json(&tools, true)?)?);
    }
    let mut lines = Vec::new();
    for tool in &tools {
        lines.push(signature(tool));
        if let Some(description) = &tool.description {
            for line in visible(description, Layout::Text).lines() {
                lines.push(format!("    {line}"));
            }
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    Ok(out(&lines.join("\n"))?)
}

/// `name(argument: type, optional?: type)`, every part of it made visible.
fn signature(tool: &toolwire_client::protocol::Tool) -> String {
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
    let signature = format!("{}({})", tool.name, arguments.join(", "));
    visible(&signature, Layout::Line).into_owned()
}

/// `toolwire call`: calls a tool and prints what it returned; a tool error exits with 1.
pub(crate) async fn call(
    target: &Target,
    tool: &str,
    arguments: Option<&str>,
) -> anyhow::Result<bool> {
    let arguments: Value = match arguments {
        Some(text) => serde_json::from_str(text).context("the arguments are not JSON")?,
        None => Value::Object(Default::default()),
    };
    if !arguments.is_object() {
        bail!("the arguments must be a JSON object");
    }
    session(target, async |client| {
        call_with(target, client, tool, arguments).await
    })
    .await
}

async fn call_with(
    target: &Target,
    client: &Client,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<bool> {
    let options = CallOptions::default().on_progress(|p| {
        let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
        let message = visible(p.message.as_deref().unwrap_or(""), Layout::Line);
        note(&format!(
            "toolwire: progress {}{total} {message}",
            p.progress
        ));
    });
    let result = client.call_tool_with(tool, arguments, options).await?;
    if target.json {
        out(&json(&result, true)?)?;
    } else {
        print_result(&result)?;
    }
    Ok(!result.is_error())
}

fn print_result(result: &CallToolResult) -> anyhow::Result<()> {
    if let Some(structured) = &result.structured_content {
        return Ok(out(&json(structured, true)?)?);
    }
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => out(&visible(&text.text, Layout::Text))?,
            other => out(&json(other, false)?)?,
        }
    }
    Ok(())
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
        resource_subscriptions: (!resources.is_empty()).then_some(resources),
    };
    let mut subscription = client.listen(filter).await?;
    note(&format!(
        "toolwire: watching {} (Ctrl-C to stop)",
        json(subscription.acknowledged(), false)?
    ));
    loop {
        match subscription.next().await {
            None => {
                note("toolwire: the server ended the subscription");
                return Ok(());
            }
            Some(Err(error)) => return Err(error.into()),
            // A closed stdout ends the watch (and, in `main`, the command, quietly).
            Some(Ok(notification)) => out(&describe(&notification))?,
        }
    }
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
