//! The host's audit records: what each event writes, and what the sandbox's proxy reports.

use serde_json::Value;

use super::{Host, HostEvent};
use crate::audit::AuditLog;

impl Host {
    /// Appends an audit record, if there is a log. A record that cannot be written is logged
    /// at ERROR: the host keeps working.
    pub(super) fn record(&self, event: HostEvent<'_>) {
        let Some(log) = &self.audit else { return };
        if !self.options.audit_each_call
            && matches!(
                event,
                HostEvent::Call { .. } | HostEvent::ApprovalGiven { .. }
            )
        {
            return;
        }
        append(log, &event);
    }

    /// What tells the audit log of each host the sandbox's proxy refuses `server`;
    /// `None` without a log.
    pub(super) fn refusal_watch(&self, server: &str) -> Option<toolwire_sandbox::Watch> {
        let log = self.audit.clone()?;
        let server = server.to_owned();
        Some(toolwire_sandbox::Watch::new(move |refusal| {
            append(
                &log,
                &HostEvent::SandboxRefused {
                    server: &server,
                    target: &refusal.target,
                    method: &refusal.method,
                },
            );
        }))
    }

    /// The arguments as the audit log keeps them, and how many values were redacted; nothing
    /// is computed without a log.
    pub(super) fn logged(&self, arguments: &Value) -> (Value, usize) {
        if self.audit.is_none() {
            return (Value::Null, 0);
        }
        self.redaction.load().apply(arguments)
    }

    /// Whether answered calls are written to the audit log ([`HostOptions::audit_each_call`]).
    pub(super) fn records_calls(&self) -> bool {
        self.audit.is_some() && self.options.audit_each_call
    }
}

/// Appends `event` to `log`. A record that cannot be written is logged at ERROR: the host keeps
/// working.
fn append(log: &AuditLog, event: &HostEvent<'_>) {
    let event_name = event.name();
    let written = match event.fields() {
        Ok(fields) => log
            .append(event_name, fields)
            .map(drop)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = written {
        tracing::error!(
            event = event_name,
            "cannot write the host's audit log ({event_name} record): {e}"
        );
    }
}
