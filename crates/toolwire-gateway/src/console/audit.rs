//! The audit logs: the newest records of one, filtered by a search (a substring, or
//! `field=value`), and for the host's hash-chained log the verification of its chain
//! (what `toolwire audit verify` says).

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use http::StatusCode;
use serde_json::{Map, Value};

use super::{AuditFile, Console, html};

/// How much of the end of a log is read: its newest records.
const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// How many matching records a page shows, newest first.
pub(crate) const SHOWN: usize = 200;

/// The page's query: which log, and the search.
#[derive(serde::Deserialize)]
pub(crate) struct Search {
    log: Option<String>,
    q: Option<String>,
}

/// `GET /console/audit`.
pub(crate) async fn show(
    State(console): State<Arc<Console>>,
    Query(search): Query<Search>,
) -> Response {
    let Some(file) = chosen(&console.logs, search.log.as_deref()) else {
        return html::page(
            StatusCode::OK,
            "/console/audit",
            "Audit log",
            "<p>No audit log is configured for the console.</p>",
        );
    };
    let q = search.q.unwrap_or_default();
    let picker = picker(&console.logs, file, &q);
    let (file_, q_) = (file.clone(), q.clone());
    let shown = tokio::task::spawn_blocking(move || records_and_verification(&file_, &q_)).await;
    let body = match shown {
        Ok(shown) => format!("{picker}{shown}"),
        Err(error) => format!(
            "{picker}<p class=\"bad\">{}</p>",
            html::escape(&error.to_string())
        ),
    };
    html::page(StatusCode::OK, "/console/audit", "Audit log", &body)
}

fn chosen<'a>(logs: &'a [AuditFile], key: Option<&str>) -> Option<&'a AuditFile> {
    key.and_then(|key| logs.iter().find(|l| l.key == key))
        .or_else(|| logs.first())
}

/// The search form: which log, and the search box (a GET: searching changes nothing).
fn picker(logs: &[AuditFile], file: &AuditFile, q: &str) -> String {
    let mut options = String::new();
    for log in logs {
        let selected = if log.key == file.key { " selected" } else { "" };
        let _ = write!(
            options,
            "<option value=\"{}\"{selected}>{}</option>",
            log.key, log.label
        );
    }
    format!(
        "<form method=\"get\" action=\"/console/audit\"><select name=\"log\">{options}</select> \
         <input type=\"search\" name=\"q\" value=\"{q}\" size=\"40\" \
         placeholder=\"text, or field=value (event=change_approved)\"> \
         <button type=\"submit\">Search</button></form><p>File: <code>{path}</code></p>",
        q = html::escape(q),
        path = html::escape(&file.path.display().to_string()),
    )
}

/// The verification (of a chained log) and the newest records matching `q`.
fn records_and_verification(file: &AuditFile, q: &str) -> String {
    let mut out = String::new();
    if file.chained {
        out.push_str(&verification(&file.path));
    }
    let lines = match tail_lines(&file.path) {
        Ok(lines) => lines,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            out.push_str("<p>Nothing was recorded yet.</p>");
            return out;
        }
        Err(error) => {
            let _ = write!(
                out,
                "<p class=\"bad\">Cannot read it: {}</p>",
                html::escape(&error.to_string())
            );
            return out;
        }
    };
    let filter = Filter::parse(q);
    let matching: Vec<&String> = lines.iter().rev().filter(|l| filter.keeps(l)).collect();
    let _ = write!(
        out,
        "<p>{} matching record(s) among the newest {}; showing up to {SHOWN}, newest first.</p>",
        matching.len(),
        lines.len()
    );
    out.push_str("<table><tr><th>#</th><th>Time</th><th>Event</th><th>Record</th></tr>");
    for line in matching.into_iter().take(SHOWN) {
        out.push_str(&record_row(line));
    }
    out.push_str("</table>");
    out
}

fn verification(path: &Path) -> String {
    match toolwire_host::verify(path) {
        Ok(verified) => format!(
            "<p class=\"ok\">The chain holds: {} record(s) in {} file(s), head #{} \
             <code>{}</code>.</p>",
            verified.records,
            verified.files.len(),
            verified.head.seq,
            html::escape(&verified.head.hash)
        ),
        Err(toolwire_host::Tampering::Missing { .. }) => {
            "<p>No record yet: nothing to verify.</p>".to_owned()
        }
        Err(tampering) => format!(
            "<p class=\"bad\"><strong>The chain does not verify</strong>: {}</p>",
            html::escape(&tampering.to_string())
        ),
    }
}

/// The complete lines of the last [`TAIL_BYTES`] of `path`.
fn tail_lines(path: &Path) -> std::io::Result<Vec<String>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if start > 0 {
        // The first line was cut.
        lines.next();
    }
    Ok(lines
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// What the search box asks for.
#[derive(Debug, PartialEq)]
enum Filter {
    All,
    /// A case-insensitive substring of the record's line.
    Text(String),
    /// A field (dotted path) with this value (a string's text, else its JSON).
    Field(Vec<String>, String),
}

impl Filter {
    fn parse(q: &str) -> Filter {
        let q = q.trim();
        if q.is_empty() {
            return Filter::All;
        }
        if let Some((field, value)) = q.split_once('=') {
            let field = field.trim();
            let is_path = !field.is_empty()
                && field
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c));
            if is_path {
                let path = field.split('.').map(str::to_owned).collect();
                return Filter::Field(path, value.trim().to_owned());
            }
        }
        Filter::Text(q.to_lowercase())
    }

    fn keeps(&self, line: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Text(text) => line.to_lowercase().contains(text),
            Filter::Field(path, value) => {
                let Ok(record) = serde_json::from_str::<Value>(line) else {
                    return false;
                };
                let found = path.iter().try_fold(&record, |v, key| v.get(key));
                match found {
                    Some(Value::String(text)) => text == value,
                    Some(other) => &other.to_string() == value,
                    None => false,
                }
            }
        }
    }
}

/// One record: its number, time and event in columns, the rest as JSON.
fn record_row(line: &str) -> String {
    let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(line) else {
        return format!(
            "<tr><td></td><td></td><td class=\"bad\">not a record</td><td><pre>{}</pre></td></tr>",
            html::escape(line)
        );
    };
    let seq = take(&mut record, &["seq"]);
    let time = take(&mut record, &["time", "ts", "timestamp"]);
    let event = take(&mut record, &["event", "kind", "type"]);
    record.remove("prev");
    let rest = serde_json::to_string_pretty(&record).unwrap_or_default();
    format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
        html::escape(&seq),
        html::escape(&time),
        html::escape(&event),
        html::escape(&rest)
    )
}

/// The first of `keys` in `record`, removed, as text.
fn take(record: &mut Map<String, Value>, keys: &[&str]) -> String {
    for key in keys {
        if let Some(value) = record.remove(*key) {
            return match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_a_substring_or_a_field_and_its_value() {
        let line = r#"{"event":"change_approved","seq":3,"server":"words","tool":"w__shout"}"#;
        for (q, kept) in [
            ("", true),
            ("SHOUT", true),
            ("event=change_approved", true),
            ("event=tool_changed", false),
            ("seq=3", true),
            ("missing=x", false),
            ("w__shout", true),
            ("a b=c", false),
        ] {
            assert_eq!(Filter::parse(q).keeps(line), kept, "{q:?}");
        }
    }

    #[test]
    fn a_record_shows_its_fields_escaped() {
        let row = record_row(r#"{"event":"<b>","seq":1,"time":"t","prev":"x","why":"<script>"}"#);
        assert!(row.contains("&lt;b&gt;"), "{row}");
        assert!(row.contains("&lt;script&gt;"), "{row}");
        assert!(!row.contains("<script>"), "{row}");
        assert!(!row.contains("prev"), "{row}");
    }
}
