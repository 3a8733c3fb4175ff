//! `toolwire audit`: the host's hash-chained log of what happened — `show` prints its records
//! (the last ones with `--last N`), `verify` checks that none was edited, deleted, reordered or
//! cut off. Exit status of `verify`: 0 intact (or no log yet), 1 tampered with.

use clap::Subcommand;
use serde_json::Value;
use toolwire_host::{Tampering, verify};

use super::StateArgs;
use super::ended::Ended;
use crate::terminal::{Json, Layout, json, out, shown, visible};
use crate::ui::{Consent, Tone, Ui};

/// What to do with the audit log.
#[derive(Subcommand, Debug)]
pub(crate) enum AuditAction {
    /// Print the log's records, oldest first.
    Show {
        /// Only the last N records.
        #[arg(long, value_name = "N")]
        last: Option<usize>,
        /// Each record as it is kept: one JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// Check the log's hash chain and its head. Exit status: 0 intact, or no log yet (no log
    /// and no head file: nothing was recorded in this state directory); 1 tampered with — a
    /// record edited, deleted, reordered or cut off, or the whole log deleted while its head
    /// file remains. Deleting both files cannot be told from never having had a log: keep the
    /// head this prints (record number and hash) elsewhere to tell.
    Verify,
}

/// Runs `toolwire audit`.
pub(crate) fn audit(state: &StateArgs, action: &AuditAction) -> anyhow::Result<()> {
    let path = state.audit_log()?;
    let ui = Ui::new(Consent::Ask);
    match action {
        AuditAction::Verify => match verify(&path) {
            Err(Tampering::Missing { .. }) => Ok(out(&format!(
                "no audit log yet at {}: nothing to verify",
                shown(&path)
            ))?),
            Ok(verified) => Ok(out(&format!(
                "{} {} records in {}; the last is #{} ({})",
                ui.paint_out(Tone::Green, "intact:"),
                verified.records,
                shown(&path),
                verified.head.seq,
                verified.head.hash
            ))?),
            Err(tampering) => {
                out(&format!(
                    "{} {}",
                    ui.paint_out(Tone::Red, "TAMPERED:"),
                    visible(&tampering.to_string(), Layout::Line)
                ))?;
                Err(Ended(1).into())
            }
        },
        AuditAction::Show {
            last,
            json: as_json,
        } => {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(out(&format!("no audit log yet at {}", shown(&path)))?);
                }
                Err(e) => return Err(e.into()),
            };
            let lines: Vec<&str> = text.lines().collect();
            let skip = last.map_or(0, |n| lines.len().saturating_sub(n));
            let mut shown_lines = Vec::new();
            for line in &lines[skip..] {
                let record: Value = match serde_json::from_str(line) {
                    Ok(record) => record,
                    Err(_) => {
                        shown_lines.push(format!("(not a record) {}", visible(line, Layout::Line)));
                        continue;
                    }
                };
                if *as_json {
                    shown_lines.push(json(&record, Json::Compact)?);
                } else {
                    shown_lines.push(describe(&ui, &record));
                }
            }
            if !shown_lines.is_empty() {
                out(&shown_lines.join("\n"))?;
            }
            Ok(())
        }
    }
}

/// One record as a line: number, time, event, then its fields. Every piece is shown safely:
/// records hold servers' text, and a log edited by hand may hold anything anywhere.
fn describe(ui: &Ui, record: &Value) -> String {
    let Value::Object(fields) = record else {
        return String::new();
    };
    let text = |value: &Value| -> String {
        let text = match value {
            Value::String(s) => s.clone(),
            other => json(other, Json::Compact).unwrap_or_default(),
        };
        visible(&text, Layout::Line).into_owned()
    };
    let field = |key: &str| fields.get(key).map(text).unwrap_or_default();
    let mut line = format!(
        "#{} {} {}",
        field("seq"),
        field("time"),
        ui.paint_out(Tone::Bold, &field("event")),
    );
    for (key, value) in fields {
        if ["seq", "time", "event", "prev"].contains(&key.as_str()) {
            continue;
        }
        line.push_str(&format!(" {}={}", visible(key, Layout::Line), text(value)));
    }
    line
}
