//! A server's text log line without colours, as tracing-subscriber's full format writes it —
//! `2026-12-07T14:10:55.037017Z  INFO toolwire::audit: tools/call tool=up1__echo …` — with a
//! fraction of its work. A gateway or server logs an audit line for every call; the full
//! format spent 13,300 instructions on one (callgrind), mostly in `core::fmt` calls nested three
//! deep per field (a styled name, a styled `=`, the value) to write styles that are empty
//! without colours. This writes the same bytes with one formatting call per field, and the
//! time digit by digit. Colours, for a terminal, stay with tracing-subscriber's format.
//!
//! As in the full format, the message and errors are written with ANSI and C1 control
//! characters escaped; other values as their `Debug` (strings quoted) or `Display` (`%`
//! fields) says.

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent as _;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format: time, level, span scope, target, fields.
pub(crate) struct Line;

/// The field format: `message name=value …`.
pub(crate) struct LineFields;

impl<S> FormatEvent<S, LineFields> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, LineFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // A `log` record's own target and level, not the bridge's.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        writer.write_str(Timestamp::of(since.as_micros() as u64).as_str())?;
        writer.write_str(level(meta.level()))?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                seen = true;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<LineFields>>() {
                    if !fields.is_empty() {
                        write!(writer, "{{{fields}}}")?;
                    }
                }
                writer.write_char(':')?;
            }
            if seen {
                writer.write_char(' ')?;
            }
        }
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

/// The level as the full format pads it, with the space after it.
fn level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE ",
        Level::DEBUG => "DEBUG ",
        Level::INFO => " INFO ",
        Level::WARN => " WARN ",
        Level::ERROR => "ERROR ",
    }
}

impl<'w> FormatFields<'w> for LineFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = Fields {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes fields one after another, separated by spaces.
struct Fields<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Fields<'_> {
    /// Writes `name=` before a value (the message has no name), with the space before it;
    /// `false` when nothing more is to be written: an earlier write failed, or the field is
    /// a `log` record's metadata (shown as the line's target).
    fn begin(&mut self, field: &Field) -> bool {
        let name = field.name();
        if self.result.is_err() || name.starts_with("log.") {
            return false;
        }
        if !std::mem::take(&mut self.first) {
            self.result = self.writer.write_char(' ');
        }
        if name != "message" {
            let name = name.strip_prefix("r#").unwrap_or(name);
            self.result = self
                .result
                .and_then(|()| self.writer.write_str(name))
                .and_then(|()| self.writer.write_char('='));
        }
        self.result.is_ok()
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.begin(field) {
            return;
        }
        self.result = if field.name() == "message" {
            Escaped(&mut self.writer).write_str(value)
        } else {
            quoted(&mut self.writer, value)
        };
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.begin(field) {
            self.result = write!(self.writer, "{value}");
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.begin(field) {
            self.result = write!(self.writer, "{value}");
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.begin(field) {
            self.result = self.writer.write_str(if value { "true" } else { "false" });
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if !self.begin(field) {
            return;
        }
        let mut escaped = Escaped(&mut self.writer);
        self.result = write!(escaped, "{value}");
        if let Some(mut source) = value.source() {
            let name = field.name();
            let name = name.strip_prefix("r#").unwrap_or(name);
            self.result = self
                .result
                .and_then(|()| write!(self.writer, " {name}.sources=["));
            let mut escaped = Escaped(&mut self.writer);
            loop {
                self.result = self.result.and_then(|()| write!(escaped, "{source}"));
                match source.source() {
                    Some(next) => {
                        self.result = self.result.and_then(|()| escaped.0.write_str(", "));
                        source = next;
                    }
                    None => break,
                }
            }
            self.result = self.result.and_then(|()| self.writer.write_char(']'));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.begin(field) {
            return;
        }
        self.result = if field.name() == "message" {
            write!(Escaped(&mut self.writer), "{value:?}")
        } else {
            write!(self.writer, "{value:?}")
        };
    }
}

/// `value` as its `Debug` writes it: quoted, and escaped where it must be. A string of printable
/// ASCII without quotes or backslashes (a name, a digest) is written as it is, without
/// looking at each character the way `Debug` does.
fn quoted(writer: &mut Writer<'_>, value: &str) -> fmt::Result {
    let plain = value
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
    if !plain {
        return write!(writer, "{value:?}");
    }
    writer.write_char('"')?;
    writer.write_str(value)?;
    writer.write_char('"')
}

/// A writer that escapes ANSI and C1 control characters, as the full format does for messages
/// and errors, so that a logged text cannot drive a terminal.
struct Escaped<'a, 'w>(&'a mut Writer<'w>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find(|c: char| {
            matches!(
                c,
                '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' | '\u{80}'..='\u{9f}'
            )
        }) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..]
                .chars()
                .next()
                .expect("a character was found here");
            match c {
                '\u{80}'..='\u{9f}' => write!(self.0, "\\u{{{:x}}}", u32::from(c))?,
                _ => write!(self.0, "\\x{:02x}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

/// An RFC 3339 UTC time with microseconds, as the full format writes it, and a space.
struct Timestamp([u8; 28]);

impl Timestamp {
    /// The time `micros` after the Unix epoch.
    fn of(micros: u64) -> Timestamp {
        let secs = micros / 1_000_000;
        let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
        // Years past 9999 are clamped: a log line's clock is never there.
        let (year, month, day) = toolwire_protocol::civil_date(days);
        let mut out = *b"0000-00-00T00:00:00.000000Z ";
        let mut put = |at: usize, width: usize, mut value: u64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year.clamp(0, 9999) as u64);
        put(5, 2, u64::from(month));
        put(8, 2, u64::from(day));
        put(11, 2, rem / 3600);
        put(14, 2, rem % 3600 / 60);
        put(17, 2, rem % 60);
        put(20, 6, micros % 1_000_000);
        Timestamp(out)
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("digits and separators are ASCII")
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Lines written to memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        /// Each line without its time (the two formats' clocks differ).
        fn untimed(&self) -> Vec<String> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines()
                .map(|line| line.split_once(' ').expect("a time first").1.to_owned())
                .collect()
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer \x1b[31mfailure")]
    struct Outer(#[source] io::Error);

    /// Every kind of field, a message with control characters, spans with and without
    /// fields, and a `log` record.
    fn log_everything() {
        let span = tracing::info_span!("request", id = 7, method = "tools/call");
        let _entered = span.enter();
        let inner = tracing::info_span!("inner");
        let _inner = inner.enter();
        let preview = r#"{"message":"hello"}"#;
        let error = Outer(io::Error::other("inner \u{9b}cause"));
        tracing::info!(
            target: "toolwire::audit",
            time = %"2026-12-07T14:10:55.036Z",
            principal = Some("alice"),
            absent = None::<&str>,
            tool = "up1__echo",
            arguments_preview = %preview,
            latency_us = 493_u64,
            delta = -5_i64,
            ok = true,
            ratio = 0.5_f64,
            r#type = "raw",
            quoted = "say \"hi\"\\ \t\u{301}é",
            error = &error as &(dyn std::error::Error + 'static),
            "tools/call \x1b[2J\u{85} done"
        );
        tracing::warn!(list = ?vec![1, 2], "{} upstreams", 3);
        tracing::error!(message = "a field named message");
        tracing::info!(target: "plain", "");
        log::warn!(target: "from_log", "a log record's line");
    }

    fn lines_of(line_format: bool) -> Vec<String> {
        let lines = Lines::default();
        let writer = lines.clone();
        let make = move || writer.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(make)
            .with_ansi(false);
        if line_format {
            let layer = layer.fmt_fields(LineFields).event_format(Line);
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, log_everything);
        } else {
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, log_everything);
        }
        lines.untimed()
    }

    #[test]
    fn lines_are_the_full_formats_lines_without_colours() {
        let _ = tracing_log::LogTracer::init();
        let ours = lines_of(true);
        let theirs = lines_of(false);
        assert_eq!(ours.len(), 5, "{ours:#?}");
        assert_eq!(ours, theirs);
        assert!(
            ours[0].contains(r"tools/call \x1b[2J\u{85} done"),
            "{}",
            ours[0]
        );
        assert!(
            ours[4].contains("from_log: a log record's line"),
            "{}",
            ours[4]
        );
    }

    #[test]
    fn times_are_rfc3339_with_microseconds() {
        let cases = [
            (0, "1970-01-01T00:00:00.000000Z "),
            (951_782_400_000_001, "2000-02-29T00:00:00.000001Z "),
            (1_796_212_800_123_456, "2026-12-02T12:00:00.123456Z "),
            (1_798_761_599_999_999, "2026-12-31T23:59:59.999999Z "),
        ];
        for (micros, want) in cases {
            assert_eq!(Timestamp::of(micros).as_str(), want, "{micros}");
        }
    }
}
