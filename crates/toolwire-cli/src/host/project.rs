//! A project's configuration (`./.mcp.json`, `./.cursor/mcp.json`, `./.vscode/mcp.json`) at the
//! terminal. Whoever wrote it chose what it starts and where it sends the person's variables,
//! so before its first use it is shown — its servers' commands and addresses, the environment
//! variables it reads, its rules, what is set aside — and the person is asked; the answer is
//! kept by the file's path and content hash and asked again when the file changes. Without a
//! terminal an untrusted file is an error that says how to trust it. Everything shown is the
//! file's text, made visible: it may hold escape sequences meant to hide a line.

use std::path::{Path, PathBuf};

use anyhow::bail;
use toolwire_host::config::{Launch, Review, ServerReview, Setting};
use toolwire_host::{Decision, FileTrust, HostConfig, ProjectFile, TrustStore as _};

use crate::terminal::{Layout, note, shown, visible};
use crate::ui::{Tone, Ui};

/// How to trust a file, for messages.
pub(crate) const HOW_TO_TRUST: &str = "read what it would do, then run `toolwire trust` in this directory (or pass --trust-project for one command)";

/// Whether `--trust-project` was given: an untrusted project file is then used for this
/// command without asking (and without remembering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForThisCommand {
    /// Not given: the remembered answer, else the person's.
    Ask,
    /// Given: trusted for this command only.
    Trust,
}

/// The configuration of the project file `file`, if the person trusts it: remembered, given
/// with `--trust-project` for this command, or asked now. Refused, the person's own
/// configuration `own` (if any) is used instead.
pub(crate) async fn load(
    file: &Path,
    ui: &Ui,
    state_dir: &Path,
    for_this_command: ForThisCommand,
    own: Option<PathBuf>,
) -> anyhow::Result<HostConfig> {
    let project = ProjectFile::read(file)?;
    let store = FileTrust::new(state_dir);
    let earlier = store.get(project.canonical())?;
    match project.decision(&store)? {
        Some(Decision::Trusted) => return Ok(project.load_trusted()?),
        Some(Decision::Refused) => {
            let at = earlier.map(|r| r.at).unwrap_or_default();
            return instead(
                own,
                &format!(
                    "{}: you chose not to trust this project configuration ({at}); `toolwire trust` there trusts it",
                    shown(file)
                ),
            );
        }
        None => {}
    }
    if for_this_command == ForThisCommand::Trust {
        note(&format!(
            "toolwire: using {} for this command only (--trust-project)",
            shown(file)
        ));
        return Ok(project.load_trusted()?);
    }
    // Trusted before, and changed since: the time it was trusted.
    let trusted_at = earlier
        .filter(|r| r.decision == Decision::Trusted)
        .map(|r| r.at);
    show_review(&project, file, ui, trusted_at.as_deref())?;
    if !ui.interactive {
        bail!(
            "{} is not trusted{}: {HOW_TO_TRUST}",
            shown(file),
            if trusted_at.is_some() {
                " as it is now"
            } else {
                ""
            }
        );
    }
    ask(&project, &store, file, ui, own).await
}

/// What the file would do, under a heading that says why it is shown: new to the person, or
/// changed since they trusted it at `trusted_at`.
fn show_review(
    project: &ProjectFile,
    file: &Path,
    ui: &Ui,
    trusted_at: Option<&str>,
) -> anyhow::Result<()> {
    let review = project.review()?;
    let heading = match trusted_at {
        Some(at) => format!(
            "{} changed since you trusted it ({at}): nothing in it runs until you trust it again.",
            shown(file),
        ),
        None => format!(
            "{} came with this directory, not from you: nothing in it runs until you trust it.",
            shown(file)
        ),
    };
    note(&format!(
        "toolwire: {}\n{}",
        ui.paint(Tone::Yellow, &heading),
        describe(&review, ui)
    ));
    Ok(())
}

/// The person's answer, kept: trusted, the file's configuration; refused, their own instead.
async fn ask(
    project: &ProjectFile,
    store: &FileTrust,
    file: &Path,
    ui: &Ui,
    own: Option<PathBuf>,
) -> anyhow::Result<HostConfig> {
    let question = format!(
        "{} [y]es / [n]o: ",
        ui.paint(Tone::Bold, "Trust it and start its servers?")
    );
    match ui.choose(&question, &["yes", "no"], None).await {
        Some("yes") => {
            project.decide(store, Decision::Trusted)?;
            note(&format!(
                "toolwire: trusted {}; you will be asked again if it changes",
                shown(file)
            ));
            Ok(project.load_trusted()?)
        }
        Some(_) => {
            project.decide(store, Decision::Refused)?;
            instead(
                own,
                &format!(
                    "{}: not trusted; `toolwire trust` there trusts it later",
                    shown(file)
                ),
            )
        }
        None => bail!("{} is not trusted: {HOW_TO_TRUST}", shown(file)),
    }
}

/// The person's own configuration in place of a project file they did not trust, or the
/// error `why` when they have none.
fn instead(own: Option<PathBuf>, why: &str) -> anyhow::Result<HostConfig> {
    match own {
        Some(own) => {
            note(&format!("toolwire: {why}; using {} instead", shown(&own)));
            Ok(HostConfig::load(&own)?)
        }
        None => bail!("{why}"),
    }
}

/// What the file would do, one server after another, as the person reads it before deciding.
pub(crate) fn describe(review: &Review, ui: &Ui) -> String {
    let v = |text: &str| visible(text, Layout::Line).into_owned();
    let width = review
        .servers
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("set aside".len());
    let mut lines = Vec::new();
    for server in &review.servers {
        describe_server(server, width, ui, &mut lines);
    }
    if review.servers.is_empty() {
        lines.push("  (no servers)".to_owned());
    }
    let pad = " ".repeat(width + 2);
    let variables = review.variables();
    if !variables.is_empty() {
        lines.push(format!(
            "  {}",
            ui.paint(
                Tone::Yellow,
                &format!(
                    "it reads from your environment: {}",
                    variables
                        .iter()
                        .map(|n| v(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            )
        ));
    }
    if !review.roots.is_empty() {
        let roots: Vec<String> = review.roots.iter().map(|r| v(r)).collect();
        lines.push(format!(
            "  {:width$}  its servers may work in {}",
            "roots",
            roots.join(", ")
        ));
    }
    if !review.rules.is_empty() {
        lines.push(format!("  {:width$}  {}", "rules", settings(&review.rules)));
    }
    if !review.set_aside.is_empty() {
        lines.push(format!(
            "  {:width$}  {}\n  {pad}{}",
            "set aside",
            settings(&review.set_aside),
            ui.paint(
                Tone::Dim,
                "(not used even when trusted: only your own configuration may allow calls, trust a server or log arguments in full)"
            )
        ));
    }
    lines.push(ui.paint(
        Tone::Dim,
        &format!("  {:width$}  sha256 {}", "file", review.sha256),
    ));
    lines.join("\n")
}

fn describe_server(server: &ServerReview, width: usize, ui: &Ui, lines: &mut Vec<String>) {
    let v = |text: &str| visible(text, Layout::Line).into_owned();
    let name = v(&server.name);
    let pad_name = " ".repeat(width.saturating_sub(server.name.chars().count()));
    let pad = " ".repeat(width + 2);
    let first = match &server.launch {
        _ if server.disabled => ui.paint(Tone::Dim, "disabled: not started"),
        Launch::Program { command, args, .. } => {
            let line: Vec<String> = std::iter::once(command)
                .chain(args)
                .map(|word| {
                    v(&shlex::try_quote(word).map_or_else(|_| word.clone(), |q| q.into_owned()))
                })
                .collect();
            format!("{} {}", ui.paint(Tone::Bold, "runs"), line.join(" "))
        }
        Launch::Remote { url, .. } => {
            format!("{} {}", ui.paint(Tone::Bold, "connects to"), v(url))
        }
        Launch::Unclear => "neither a command nor a url".to_owned(),
    };
    lines.push(format!("  {name}{pad_name}  {first}"));
    if server.disabled {
        return;
    }
    match &server.launch {
        Launch::Program {
            cwd, env, env_file, ..
        } => {
            if let Some(cwd) = cwd {
                lines.push(format!("  {pad}in {}", v(cwd)));
            }
            for (key, value) in env {
                lines.push(format!("  {pad}with {}={}", v(key), v(value)));
            }
            if let Some(file) = env_file {
                lines.push(format!("  {pad}with the variables of the file {}", v(file)));
            }
        }
        Launch::Remote { headers, .. } => {
            for (key, value) in headers {
                lines.push(format!("  {pad}sending header {}: {}", v(key), v(value)));
            }
        }
        Launch::Unclear => {}
    }
    if !server.variables.is_empty() {
        let uses: Vec<String> = server
            .variables
            .iter()
            .map(|u| format!("${} into {}", v(&u.name), v(&u.key)))
            .collect();
        lines.push(format!(
            "  {pad}{}",
            ui.paint(
                Tone::Yellow,
                &format!("reads your environment: {}", uses.join(", "))
            )
        ));
    }
}

/// Settings as one line: `server "a": "approval.deny": [...]; …`, made visible.
fn settings(settings: &[Setting]) -> String {
    let all: Vec<String> = settings
        .iter()
        .map(|s| visible(&s.to_string(), Layout::Line).into_owned())
        .collect();
    all.join("; ")
}
