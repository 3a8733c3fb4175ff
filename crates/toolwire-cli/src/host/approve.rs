//! Asking the person before a call: the server, the tool, its title, its annotations (the
//! server's claims, marked so unless it is trusted) and the arguments exactly as they will be
//! sent; then yes, no or always. With no terminal, a call no rule allows is refused unless
//! `--yes` was given.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use toolwire_host::{Answer, ApprovalRequest, Approver};

use crate::terminal::{Json, Layout, json, note, visible};
use crate::ui::{Tone, Ui};

/// The refusal the model (and the person) reads when nobody could be asked.
pub(crate) const NO_TERMINAL: &str = "no rule allows this call and there is no terminal to ask: pass --yes, or allow the tool in the configuration's approval rules";

/// Asks at the terminal.
pub(crate) struct TerminalApprover {
    ui: Arc<Ui>,
}

impl TerminalApprover {
    pub(crate) fn new(ui: Arc<Ui>) -> TerminalApprover {
        TerminalApprover { ui }
    }
}

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move {
            if self.ui.yes {
                return Answer::AllowedBy("--yes on the command line".into());
            }
            if !self.ui.interactive {
                return Answer::Unanswered(NO_TERMINAL.into());
            }
            note(&describe(&self.ui, &request));
            let question = format!(
                "{} [y]es / [n]o / [a]lways: ",
                self.ui.paint(Tone::Bold, "Run it?")
            );
            match self
                .ui
                .choose(&question, &["yes", "no", "always"], None)
                .await
            {
                Some("yes") => Answer::AllowOnce,
                Some("always") => Answer::AllowAlways,
                _ => Answer::Deny("the person at the terminal refused this call".into()),
            }
        })
    }
}

/// The call as the person sees it before it goes.
pub(crate) fn describe(ui: &Ui, request: &ApprovalRequest<'_>) -> String {
    let definition = request.definition;
    let tool = definition["name"].as_str().unwrap_or_default();
    let mut lines = vec![format!(
        "{} {} {}",
        ui.paint(Tone::Bold, "toolwire: call"),
        ui.paint(Tone::Bold, &visible(request.qualified, Layout::Line)),
        ui.paint(
            Tone::Dim,
            &format!(
                "(tool {} of server {})",
                visible(tool, Layout::Line),
                visible(request.server, Layout::Line)
            )
        )
    )];
    if let Some(title) = title(definition) {
        lines.push(format!("  title        {}", visible(title, Layout::Line)));
    }
    if let Some(description) = definition["description"].as_str() {
        lines.push(format!(
            "  description  {}",
            visible(&short(description, 160), Layout::Line)
        ));
    }
    let hints = hints(&definition["annotations"]);
    if !hints.is_empty() {
        let trust = if request.annotations_trusted {
            ui.paint(Tone::Dim, "(trusted server)")
        } else {
            ui.paint(
                Tone::Yellow,
                "(the server's claim: not trusted, not relied on)",
            )
        };
        lines.push(format!("  annotations  {} {trust}", hints.join(", ")));
    }
    // A rule's pattern comes from a configuration file, perhaps a cloned project's.
    let reason = request.reason.to_string();
    lines.push(format!("  asked        {}", visible(&reason, Layout::Line)));
    let arguments = json(request.arguments, Json::Pretty).unwrap_or_else(|_| "?".into());
    lines.push("  arguments, exactly as they will be sent:".into());
    lines.extend(arguments.lines().map(|l| format!("    {l}")));
    lines.join("\n")
}

/// The tool's title: its own, else its annotations'.
pub(crate) fn title(definition: &Value) -> Option<&str> {
    definition["title"]
        .as_str()
        .or(definition["annotations"]["title"].as_str())
}

/// The annotation hints that are set, as words (`read-only`, `destructive`, …).
pub(crate) fn hints(annotations: &Value) -> Vec<String> {
    let named = [
        ("readOnlyHint", "read-only", "writes"),
        ("destructiveHint", "destructive", "not destructive"),
        ("idempotentHint", "idempotent", "not idempotent"),
        ("openWorldHint", "open world", "closed world"),
    ];
    named
        .iter()
        .filter_map(|(key, yes, no)| match annotations[key].as_bool() {
            Some(true) => Some((*yes).to_owned()),
            Some(false) => Some((*no).to_owned()),
            None => None,
        })
        .collect()
}

/// The first line of `text`, cut to `max` characters with `…`.
pub(crate) fn short(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
