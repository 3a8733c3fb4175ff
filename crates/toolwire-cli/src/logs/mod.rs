//! Where log lines go. `toolwire serve` is a server: it logs to stderr from `info` (or as
//! RUST_LOG says), `-v` for debug. The other commands speak to a person, so the libraries' log
//! lines — the client's transport, its retries, a closing server's grace periods, a server's
//! stderr — stay off the terminal unless asked for with `-v` (info; `-vv` debug, `-vvv`
//! trace) or RUST_LOG; asked for, they come with their time and source, made safe by
//! [`SafeStderr`]. Without them, what the person should know still reaches them in words:
//! failures are errors, and the warnings of the host and of this program about the person's own
//! state — a file made private, an audit log that cannot be written, an approval that cannot be
//! remembered, a server restarted during a call — are written as `toolwire: warning: …`.
//!
//! A server's lines are text for a person by default, or with `--log-format json` (or
//! `TOOLWIRE_LOG_FORMAT=json`) one JSON object per line for a log pipeline, each line logged
//! while a request is served carrying that request's span: its id (`jsonrpc.request.id`) and
//! trace id (`trace_id`). The request spans (target `toolwire::request`) go to JSON lines and
//! to the OTLP exporter ([`crate::telemetry`]) only: text lines stay short, and with neither a
//! span is never made.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::terminal::SafeStderr;

mod line;

use line::{Line, LineFields};

/// What the process is, which decides where its logs go and how much is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Running {
    /// `toolwire serve`: a server's log, INFO by default.
    Server,
    /// `toolwire gateway`: a server's log too, whose events carry the upstreams' text (their
    /// stderr, their errors), and whose stderr may be a pipe its host stops reading: written
    /// through [`SafeStderr`], where a line that cannot be written is lost, never a panic (the
    /// fmt layer's own error report panics on a closed stderr, killing the task that logged,
    /// such as the one that stops the gateway on SIGTERM).
    Gateway,
    /// Any other command: quiet unless asked.
    Command,
}

/// The `tracing` target of the request spans (the server's and the client's).
const REQUEST_SPANS: &str = "toolwire::request";

/// How a server writes its log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Lines for a person: time, level, source, message and fields.
    #[default]
    Text,
    /// One JSON object per line, with the fields of the request being served.
    Json,
}

/// The logs and traces of a server command (`serve`, `gateway`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServerLogs {
    /// How log lines are written on stderr: text, for a person, or json: one object per line,
    /// each line logged while a request is served carrying its request id and trace id.
    #[arg(
        long,
        value_name = "FORMAT",
        env = "TOOLWIRE_LOG_FORMAT",
        default_value = "text"
    )]
    pub(crate) log_format: LogFormat,
    /// Export traces with OTLP over HTTP to the collector at this base URL (spans go to its
    /// /v1/traces), e.g. http://127.0.0.1:4318. Without it OTEL_EXPORTER_OTLP_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT say where; with none, no traces are exported. The
    /// other OTEL_* settings apply (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER,
    /// OTEL_EXPORTER_OTLP_HEADERS for credentials).
    #[arg(long, value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,
}

/// Sets up logging for what is `running`; `verbose` the count of `-v`; `server` the logs and
/// traces settings of a server command.
pub(crate) fn init(
    running: Running,
    verbose: u8,
    server: Option<&ServerLogs>,
) -> Result<(), crate::telemetry::TelemetryError> {
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    if running != Running::Command {
        let settings = server.cloned().unwrap_or_default();
        if settings.log_format == LogFormat::Json {
            crate::terminal::notes_as_json();
        }
        let level = ["info", "debug", "trace"][usize::from(verbose.min(2))];
        let exporting = crate::telemetry::start(settings.otlp_endpoint.as_deref())?;
        let filter = asked.as_deref().unwrap_or(level);
        match exporting {
            Some(exporting) => {
                init_server(running, filter, settings.log_format, Some(exporting.tracer));
                tracing::info!(
                    target: "toolwire",
                    endpoint = %exporting.shown,
                    from = exporting.setting,
                    "exporting traces with OTLP"
                );
            }
            // JSON lines carry a trace id even with nothing exported.
            None => {
                let tracer =
                    (settings.log_format == LogFormat::Json).then(crate::telemetry::unexported);
                init_server(running, filter, settings.log_format, tracer);
            }
        }
        return Ok(());
    }
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        2 => Some("debug"),
        _ => Some("trace"),
    };
    match asked.as_deref().or(level) {
        // A client's logs carry the server's text (its log messages, its stderr): shown safe,
        // without colours of our own.
        Some(filter) => tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(SafeStderr)
            .with_ansi(false)
            .fmt_fields(LineFields)
            .event_format(Line)
            .init(),
        None => {
            use tracing_subscriber::layer::SubscriberExt as _;
            use tracing_subscriber::util::SubscriberInitExt as _;
            let words = tracing_subscriber::fmt::layer()
                .event_format(InWords)
                .with_writer(SafeStderr)
                .with_ansi(false)
                .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                    for_the_person(meta.target(), *meta.level())
                }));
            tracing_subscriber::registry().with(words).init();
        }
    }
    Ok(())
}

/// A server's subscriber: its lines on stderr as `filter` says, in `format`, and the request
/// spans exported with `tracer` when there is one.
fn init_server(
    running: Running,
    filter: &str,
    format: LogFormat,
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::new(with_request_spans(filter, format));
    // Logs go to stderr: on stdio, stdout carries only MCP messages (S-02).
    let lines = match (format, running) {
        (LogFormat::Json, _) => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(SafeStderr)
            .with_filter(filter)
            .boxed(),
        (LogFormat::Text, Running::Gateway) => tracing_subscriber::fmt::layer()
            .with_writer(SafeStderr)
            .with_ansi(false)
            .fmt_fields(LineFields)
            .event_format(Line)
            .with_filter(filter)
            .boxed(),
        // Colours for a terminal; plain lines written by [`Line`] otherwise.
        (LogFormat::Text, _) if std::io::IsTerminal::is_terminal(&std::io::stderr()) => {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter)
                .boxed()
        }
        (LogFormat::Text, _) => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .fmt_fields(LineFields)
            .event_format(Line)
            .with_filter(filter)
            .boxed(),
    };
    // The exporter takes the request spans, and the warnings and errors logged inside them
    // (as the span's events).
    let spans = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.target() == REQUEST_SPANS || (meta.is_event() && *meta.level() <= Level::WARN)
            }))
    });
    tracing_subscriber::registry()
        .with(lines)
        .with(spans)
        .init();
}

/// `filter` with the request spans on for JSON lines (their fields are on every line) and off
/// for text, unless `filter` itself says what to do with them.
fn with_request_spans(filter: &str, format: LogFormat) -> String {
    if filter.contains(REQUEST_SPANS) {
        return filter.to_owned();
    }
    let level = match format {
        LogFormat::Json => "debug",
        LogFormat::Text => "off",
    };
    format!("{filter},{REQUEST_SPANS}={level}")
}

/// Whether an event is shown without `-v`: warnings and errors about the person's own state,
/// from the host library and from this program. The client library's lines describe the
/// mechanics of a connection; what of them matters comes back as an error.
fn for_the_person(target: &str, level: Level) -> bool {
    let ours = |krate: &str| {
        target == krate
            || target
                .strip_prefix(krate)
                .is_some_and(|rest| rest.starts_with("::"))
    };
    level <= Level::WARN && (ours("toolwire_host") || ours("toolwire"))
}

/// An event as a line of this program: `toolwire: warning: ` and its message (the host's
/// messages are sentences that name what they are about), without a time or a source.
struct InWords;

impl<S, N> FormatEvent<S, N> for InWords
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let kind = if *event.metadata().level() == Level::ERROR {
            "error"
        } else {
            "warning"
        };
        let mut message = Message(String::new());
        event.record(&mut message);
        writeln!(writer, "toolwire: {kind}: {}", message.0)
    }
}

/// The `message` field of an event.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_spans_are_on_for_json_and_off_for_text_unless_asked() {
        let cases = [
            ("info", LogFormat::Text, "info,toolwire::request=off"),
            ("info", LogFormat::Json, "info,toolwire::request=debug"),
            (
                "warn,toolwire::request=debug",
                LogFormat::Text,
                "warn,toolwire::request=debug",
            ),
        ];
        for (filter, format, want) in cases {
            assert_eq!(
                with_request_spans(filter, format),
                want,
                "{filter} {format:?}"
            );
        }
    }

    #[test]
    fn only_the_hosts_and_our_own_warnings_are_for_the_person() {
        let cases = [
            ("toolwire_host::private", Level::WARN, true),
            ("toolwire_host::host", Level::ERROR, true),
            ("toolwire_host::host::call", Level::INFO, false),
            ("toolwire::private", Level::WARN, true),
            ("toolwire", Level::WARN, true),
            ("toolwire_client::transport::stdio", Level::WARN, false),
            ("toolwire_client::incoming", Level::ERROR, false),
            ("toolwire_server::audit", Level::WARN, false),
            ("toolwire_hostile", Level::WARN, false),
            ("hyper::proto", Level::ERROR, false),
        ];
        for (target, level, shown) in cases {
            assert_eq!(for_the_person(target, level), shown, "{target} {level}");
        }
    }
}
