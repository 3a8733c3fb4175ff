//! Where log lines go. `toolwire serve` is a server: it logs to stderr from `info` (or as
//! RUST_LOG says), `-v` for debug. The other commands speak to a person, so the libraries' log
//! lines — the client's transport, its retries, a closing server's grace periods, a server's
//! stderr — stay off the terminal unless asked for with `-v` (info; `-vv` debug, `-vvv`
//! trace) or RUST_LOG; asked for, they come with their time and source, made safe by
//! [`SafeStderr`]. Without them, what the person should know still reaches them in words:
//! failures are errors, and the warnings of the host and of this program about the person's own
//! state — a file made private, an audit log that cannot be written, an approval that cannot be
//! remembered, a server restarted during a call — are written as `toolwire: warning: …`.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::terminal::SafeStderr;

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

/// Sets up logging for what is `running`; `verbose` the count of `-v`.
pub(crate) fn init(running: Running, verbose: u8) {
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    if running != Running::Command {
        let level = ["info", "debug", "trace"][usize::from(verbose.min(2))];
        let filter = tracing_subscriber::EnvFilter::new(asked.as_deref().unwrap_or(level));
        // Logs go to stderr: on stdio, stdout carries only MCP messages (S-02).
        let logs = tracing_subscriber::fmt().with_env_filter(filter);
        if running == Running::Gateway {
            logs.with_writer(SafeStderr).with_ansi(false).init();
        } else {
            logs.with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .init();
        }
        return;
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
