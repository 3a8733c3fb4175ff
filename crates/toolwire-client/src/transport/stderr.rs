//! A stdio server's stderr in this process's log: each line relayed at its own level when it
//! is itself a log line, never as the server's words to the model (S-04: logs, not errors).

/// One line of a server's stderr in this process's log. A line that is itself a log line
/// (`2026-12-06T14:35:28.027452Z  WARN target: message`, as tracing and many loggers write)
/// is relayed at its own level, without its own timestamp: the relayed line has one.
pub(super) fn relay_log_line(program: &str, line: &str) {
    let (level, message) = log_level(line);
    match level {
        Some(tracing::Level::ERROR) => tracing::error!(server = %program, "{message}"),
        Some(tracing::Level::WARN) => tracing::warn!(server = %program, "{message}"),
        Some(tracing::Level::DEBUG | tracing::Level::TRACE) => {
            tracing::debug!(server = %program, "{message}");
        }
        _ => tracing::info!(server = %program, "{message}"),
    }
}

/// A log line's level and the rest of it, its leading timestamp (RFC 3339) and level taken
/// off; a line that does not start so is returned whole, with no level.
fn log_level(line: &str) -> (Option<tracing::Level>, &str) {
    let mut rest = line.trim_start();
    if let Some((first, after)) = rest.split_once(char::is_whitespace) {
        let stamp = first.len() >= 20
            && first.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && first.as_bytes()[4] == b'-'
            && first.as_bytes()[10] == b'T';
        if stamp {
            rest = after.trim_start();
        }
    }
    let Some((word, after)) = rest.split_once(char::is_whitespace) else {
        return (None, line);
    };
    let level = match word.trim_matches(|c| c == '[' || c == ']' || c == ':') {
        "ERROR" => tracing::Level::ERROR,
        "WARN" | "WARNING" => tracing::Level::WARN,
        "INFO" => tracing::Level::INFO,
        "DEBUG" => tracing::Level::DEBUG,
        "TRACE" => tracing::Level::TRACE,
        _ => {
            return (
                None,
                if rest.len() < line.trim_start().len() {
                    rest
                } else {
                    line
                },
            );
        }
    };
    (Some(level), after.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_log_line_keeps_its_level_and_loses_its_timestamp() {
        use tracing::Level;
        assert_eq!(
            log_level("2026-12-06T14:35:28.027452Z  INFO toolwire::serve: serving on stdio"),
            (Some(Level::INFO), "toolwire::serve: serving on stdio")
        );
        assert_eq!(
            log_level("2026-12-06T14:35:28Z WARN a: b"),
            (Some(Level::WARN), "a: b")
        );
        assert_eq!(log_level("ERROR boom"), (Some(Level::ERROR), "boom"));
        assert_eq!(
            log_level("2026-12-06T14:35:28Z something else"),
            (None, "something else")
        );
        assert_eq!(
            log_level("Secure MCP Filesystem Server running"),
            (None, "Secure MCP Filesystem Server running")
        );
        assert_eq!(log_level("INFO"), (None, "INFO"));
        assert_eq!(log_level(""), (None, ""));
    }
}
