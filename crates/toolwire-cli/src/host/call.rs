//! `toolwire call NAME [ARGS]`: the call shown and confirmed, sent with a progress bar and the
//! server's log messages, cancelled by Ctrl-C (a second one quits), and its result printed.
//! Exit status: 0 done, 1 the tool reported an error, 2 it could not be made, 3 refused,
//! 130 cancelled.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::CancellationToken;
use toolwire_client::protocol::schema::{CompiledSchema, REPORTED_VIOLATIONS, SchemaLimits};
use toolwire_host::{
    Called, Host, HostConfig, HostTool, Outcome, PinState, ServerState, Transport,
};

use super::ended::Ended;
use super::open::{Asks, Servers, failed_how, server_name};
use super::{HostArgs, arguments, form, render};
use crate::session::{Interrupted, Signals};
use crate::terminal::{Json, Layout, Lines, json, note, out, visible};
use crate::ui::{Consent, Tone, Ui};

/// The exit status of a refused call.
pub(crate) const REFUSED: i32 = 3;

/// What `call` was given besides the host's arguments.
#[derive(Args, Debug)]
pub(crate) struct CallArgs {
    /// Make calls that no approval rule allows without asking (and with no terminal, make
    /// them at all), and answer a server's sampling request with --sampling-command without
    /// asking: the command is yours, and --yes says yes to running it. A changed tool
    /// definition is still refused until approved.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Where images, audio and binary resources are written (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) out: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The answer to every form elicitation, as a JSON object, instead of a form (for
    /// scripts: without a terminal and without it, forms are printed and declined, with the
    /// answer that would fit). A gateway's `ask` rule asks for `{"approve": true}`. A URL-mode
    /// request is never answered by it: opening a URL needs a person's yes at a terminal (M-16).
    #[arg(long, value_name = "JSON")]
    pub(crate) answer: Option<String>,
    /// A command that answers servers' sampling requests: it gets the request as JSON on
    /// stdin and prints a `sampling/createMessage` result as JSON. Each request is shown and
    /// confirmed first. Without it, sampling requests are declined.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) sampling_command: Option<String>,
    /// The least severe server log messages shown during the call: debug, info, notice,
    /// warning, error, critical, alert, emergency; or off.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub(crate) log_level: String,
}

impl CallArgs {
    /// How the servers' questions and logs are met during the call.
    fn asks(&self) -> anyhow::Result<Asks> {
        let answer = match &self.answer {
            Some(text) => Some(serde_json::from_str(text).context("--answer is not JSON")?),
            None => None,
        };
        let log_level = match self.log_level.as_str() {
            "off" => None,
            level => Some(
                serde_json::from_value(Value::String(level.to_owned())).with_context(|| {
                    format!(
                        "--log-level {level:?}: one of debug, info, notice, warning, error, critical, alert, emergency, off"
                    )
                })?,
            ),
        };
        Ok(Asks {
            answer,
            sampling_command: self.sampling_command.clone(),
            log_level,
        })
    }
}

/// Runs `toolwire call`.
pub(crate) async fn call(
    args: &HostArgs,
    call: &CallArgs,
    name: &str,
    words: &[String],
) -> anyhow::Result<()> {
    // `call URL TOOL …` and `call "command line" TOOL …` name the server first.
    let (one_off, name, words) = match args.one_off(Some(name)) {
        Some(server) if args.server.is_none() => {
            let (tool, rest) = words
                .split_first()
                .context("name the tool after the server: toolwire call SERVER TOOL [ARGS]")?;
            (Some(server.to_owned()), tool.as_str(), rest)
        }
        other => (other.map(str::to_owned), name, words),
    };
    let args = &HostArgs {
        asks: call.asks()?,
        ..args.clone()
    };
    let ui = Ui::new(Consent::from_flag(call.yes));
    let mut signals = Signals::listen()?;
    let servers = Servers::named(one_off.as_deref());
    let opened = async {
        let mut config = args.configuration(one_off.as_deref(), &ui).await?;
        // Only the server whose prefix the name carries is started.
        if one_off.is_none() {
            serving_only(&mut config, name);
        }
        let host = args.open_config(&config, servers, &ui).await?;
        anyhow::Ok((config, host))
    };
    let (config, host) = tokio::select! {
        opened = opened => opened?,
        signal = signals.next() => return Err(signal.into()),
    };
    let opened = Opened {
        host: &host,
        config: &config,
        ui: &ui,
        servers,
    };
    let outcome = run(&opened, call, name, words, &mut signals).await;
    ui.end_progress();
    let (closing, at_once) = closing_words(&config);
    if let Some(signal) = outcome
        .as_ref()
        .err()
        .and_then(|e| e.downcast_ref::<Interrupted>())
    {
        note(&format!("toolwire: {signal}: {closing}"));
    }
    // Stopping a stdio server takes a grace period or two; another signal cuts it short
    // (dropping the host kills the servers' process groups at once).
    tokio::select! {
        () = host.close() => {}
        again = signals.next() => note(&format!("toolwire: {again}: {at_once}")),
    }
    outcome
}

/// `config` narrowed to the one server whose prefix `name` carries (`prefix__tool`), when
/// exactly one does: a call starts only the server that serves it. Otherwise (a name no
/// prefix matches, or a server with an empty prefix) every server stays, and the call finds
/// the tool, or says why it cannot, among them all.
fn serving_only(config: &mut HostConfig, name: &str) {
    let serves = |s: &toolwire_host::ServerConfig| {
        !s.prefix.is_empty()
            && name
                .strip_prefix(s.prefix.as_str())
                .is_some_and(|rest| rest.starts_with("__"))
    };
    if config.servers.iter().filter(|s| serves(s)).count() == 1 {
        config.servers.retain(serves);
    }
}

/// What closing the host does, in words, and what a second signal does: stdio servers are
/// stopped (then killed); HTTP servers are only disconnected from, nothing of theirs stops.
fn closing_words(config: &HostConfig) -> (&'static str, &'static str) {
    let started = config
        .servers
        .iter()
        .filter(|s| matches!(s.transport, Transport::Stdio { .. }))
        .count();
    match (started, config.servers.len()) {
        (0, 1) => ("closing the connection", "closing it at once"),
        (0, _) => ("closing the connections", "closing them at once"),
        (1, _) => ("stopping the server", "killing the server"),
        _ => ("stopping the servers", "killing the servers"),
    }
}

/// The host a call is made through, and what it was opened with.
struct Opened<'a> {
    host: &'a Host,
    config: &'a HostConfig,
    ui: &'a Arc<Ui>,
    servers: Servers,
}

/// The call: the tool found, its arguments asked for when missing, a changed definition
/// reviewed, the call sent, and its result printed.
async fn run(
    opened: &Opened<'_>,
    call: &CallArgs,
    name: &str,
    words: &[String],
    signals: &mut Signals,
) -> anyhow::Result<()> {
    let Opened { host, ui, .. } = *opened;
    let tool = find(opened, name)?;
    let arguments = arguments_for(ui, call, &tool, words).await?;
    review_change(host, ui, &tool).await?;
    let called = send(host, ui, &tool.qualified, arguments, signals).await?;
    ui.end_progress();
    report(ui, call, &tool, &called)
}

/// The arguments from the command line; at a terminal, a form asks for the required ones
/// missing (unless the output is JSON).
async fn arguments_for(
    ui: &Arc<Ui>,
    call: &CallArgs,
    tool: &HostTool,
    words: &[String],
) -> anyhow::Result<Value> {
    let schema = Value::Object(tool.definition.input_schema.clone());
    let mut arguments = arguments::parse(words, &schema)?;
    let missing = arguments::missing(&arguments, &schema);
    if !missing.is_empty() && ui.interactive && !call.json {
        note(&format!(
            "toolwire: {} needs {}",
            visible(&tool.qualified, Layout::Line),
            visible(&missing.join(", "), Layout::Line)
        ));
        if !form::ask_arguments(ui, &schema, &missing, &mut arguments).await {
            note("toolwire: the call was not made");
            return Err(Ended(REFUSED).into());
        }
    }
    let arguments = Value::Object(arguments);
    check_arguments(tool, &schema, &arguments)?;
    Ok(arguments)
}

/// The arguments held to the tool's input schema before the call is made: arguments it
/// rejects are a call that could not be made (exit 2), named here rather than left for the
/// server's validation error. A schema this side cannot compile is left to the server.
fn check_arguments(tool: &HostTool, schema: &Value, arguments: &Value) -> anyhow::Result<()> {
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    let Ok(compiled) = CompiledSchema::compile(schema, SchemaLimits::default()) else {
        return Ok(());
    };
    let violations = compiled.violations(arguments, REPORTED_VIOLATIONS);
    if violations.is_empty() {
        return Ok(());
    }
    Err(Lines(format!(
        "the arguments do not fit {}'s input schema; the call was not made:\n{}",
        visible(&tool.qualified, Layout::Line),
        visible(&violations.to_string(), Layout::Text)
    ))
    .into())
}

/// Sends the call, showing its progress and the server's log messages; a signal cancels it
/// (the server is told), a second one quits at once.
async fn send(
    host: &Host,
    ui: &Arc<Ui>,
    qualified: &str,
    arguments: Value,
    signals: &mut Signals,
) -> anyhow::Result<Called> {
    let token = CancellationToken::new();
    let options = call_options(ui).cancel_on(token.clone());
    let called = host.call_with(qualified, arguments, options);
    tokio::pin!(called);
    tokio::select! {
        called = &mut called => Ok(called),
        signal = signals.next() => {
            ui.end_progress();
            note(&format!(
                "toolwire: {signal}: cancelling the call (the server is told; press Ctrl-C again to quit)"
            ));
            token.cancel();
            tokio::select! {
                _ = &mut called => note("toolwire: the call was cancelled"),
                again = signals.next() => return Err(again.into()),
            }
            Err(signal.into())
        }
    }
}

/// The call's progress shown as a bar, and the server's log messages as dim lines.
fn call_options(ui: &Arc<Ui>) -> CallOptions {
    let progress_ui = ui.clone();
    let log_ui = ui.clone();
    CallOptions::default()
        .on_progress(move |p| {
            let message = visible(p.message.as_deref().unwrap_or(""), Layout::Line);
            progress_ui.progress(p.progress, p.total, &message);
        })
        .on_log(move |log| {
            let text = match &log.data {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let level = format!("{:?}", log.level).to_lowercase();
            let logger = log
                .logger
                .as_deref()
                .map(|l| format!("{}: ", visible(l, Layout::Line)))
                .unwrap_or_default();
            note(&format!(
                "{} {logger}{}",
                log_ui.paint(Tone::Dim, &format!("server log [{level}]")),
                visible(&text, Layout::Line)
            ));
        })
}

/// What became of the call, printed; the exit status says it too.
fn report(ui: &Ui, call: &CallArgs, tool: &HostTool, called: &Called) -> anyhow::Result<()> {
    let result = &called.result;
    match called.outcome {
        Outcome::Refused => {
            note(&ui.paint(
                Tone::Red,
                &format!(
                    "toolwire: refused: {}",
                    visible(&first_text(result), Layout::Line)
                ),
            ));
            return Err(Ended(REFUSED).into());
        }
        Outcome::Cancelled => {
            note("toolwire: the call was cancelled");
            return Err(Ended(130).into());
        }
        // The server's (or the host's) words: one line, made visible.
        Outcome::Unknown | Outcome::Failed => {
            anyhow::bail!("{}", visible(&first_text(result), Layout::Line));
        }
        _ => {}
    }
    if call.json {
        out(&json(result, Json::Pretty)?)?;
    } else {
        if result.is_error() {
            // Its words on stderr, with the rest of its result on stdout as any result's.
            let said = first_text(result);
            let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let said = if said.is_empty() {
                "(it said nothing; its result follows)".to_owned()
            } else {
                visible(said, Layout::Line).into_owned()
            };
            note(&ui.paint(
                Tone::Red,
                &format!("toolwire: the tool reported an error: {said}"),
            ));
        }
        render::print(result, &tool.definition.name, &call.out)?;
    }
    if result.is_error() {
        return Err(Ended(1).into());
    }
    Ok(())
}

/// The listed tool `name` stands for: a qualified name, or for one server named on the
/// command line, the server's own name of the tool. When it is not listed because its server
/// could not be started or reached, that failure is the error: it is why.
fn find(opened: &Opened<'_>, name: &str) -> anyhow::Result<HostTool> {
    let Opened {
        host,
        config,
        servers,
        ..
    } = *opened;
    let one_off = servers == Servers::OneOff;
    if let Some(tool) = host.tool(name) {
        return Ok(tool.clone());
    }
    if one_off {
        if let Some(tool) = host.tools().iter().find(|t| t.definition.name == name) {
            return Ok(tool.clone());
        }
    }
    let shown_name = visible(name, Layout::Line);
    let mut others = Vec::new();
    for server in host.servers() {
        let shown_server = server_name(&server.name);
        if let Some(hidden) = server.hidden.iter().find(|h| h.tool == name) {
            anyhow::bail!(
                "{shown_name} of server {shown_server} is hidden: {}",
                visible(&hidden.reason, Layout::Line)
            );
        }
        let ServerState::Failed { error } = &server.state else {
            continue;
        };
        let entry = config.server(&server.name);
        // The tool would be this server's: the only one, one named by its prefix, or any name
        // when its prefix is empty (then it is the only server configured).
        let theirs = one_off
            || entry.is_some_and(|e| {
                e.prefix.is_empty()
                    || name
                        .strip_prefix(e.prefix.as_str())
                        .is_some_and(|rest| rest.starts_with("__"))
            });
        let why = format!(
            "server {shown_server} {}: {}",
            failed_how(config, &server.name),
            visible(error, Layout::Line)
        );
        if theirs {
            anyhow::bail!("cannot call {shown_name}: {why}");
        }
        others.push(why);
    }
    for why in others {
        note(&format!("toolwire: {why}"));
    }
    anyhow::bail!("there is no tool named {shown_name} (see `toolwire tools`)")
}

/// A tool whose definition changed since it was pinned: the diff, then the person accepts the
/// new definition, or the call is refused.
async fn review_change(host: &Host, ui: &Ui, tool: &HostTool) -> anyhow::Result<()> {
    if !matches!(
        host.pin_state(&tool.qualified),
        Some(PinState::Changed { .. })
    ) {
        return Ok(());
    }
    note(&ui.paint(
        Tone::Yellow,
        &format!(
            "toolwire: the definition of {} changed since it was approved:",
            visible(&tool.qualified, Layout::Line)
        ),
    ));
    for line in super::pins::diff_lines(host, tool) {
        note(&format!("  {line}"));
    }
    if !ui.interactive {
        note(&format!(
            "toolwire: refused until the change is approved: toolwire pins approve {}",
            visible(&tool.qualified, Layout::Line)
        ));
        return Err(Ended(REFUSED).into());
    }
    let question = format!(
        "{} [y]es / [n]o: ",
        ui.paint(Tone::Bold, "Accept the new definition?")
    );
    if ui.choose(&question, &["yes", "no"], None).await == Some("yes") {
        host.approve_change(&tool.qualified)?;
        note("toolwire: the new definition is pinned");
        return Ok(());
    }
    note("toolwire: refused: the changed definition was not accepted");
    Err(Ended(REFUSED).into())
}

/// The first text block of a result.
fn first_text(result: &toolwire_client::protocol::CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|b| match b {
            toolwire_client::protocol::ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
