//! The approval policy: whether a call goes ahead, is asked about, or is refused.
//!
//! Rules come in three classes, `deny` over `ask` over `allow`, as globs over qualified names
//! (`prefix__tool`), from the host and from the tool's server; a call no rule matches is asked
//! about. Before any rule, a tool whose definition changed since it was pinned is blocked. An
//! "allow always" answer is remembered for the tool's pinned definition hash only, so a changed
//! definition is asked about again. Annotation hints auto-approve only on a trusted server, and
//! then only `readOnlyHint: true`; an untrusted server's hints are passed to the [`Approver`] to
//! show, never relied on.

mod remembered;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin as Boxed;

use serde_json::Value;

use crate::config::{ApprovalRules, HostConfig};
use crate::glob::{GlobError, Globs};
use crate::pins::PinState;

pub use remembered::{FileRemembered, MemoryRemembered, RememberError, Remembered};

/// Why a policy cannot be made from a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// An approval rule is not a valid glob.
    #[error(transparent)]
    Rule(#[from] GlobError),
}

/// Rules compiled once.
#[derive(Debug, Clone)]
struct Rules {
    allow: Globs,
    ask: Globs,
    deny: Globs,
}

impl Rules {
    fn new(rules: &ApprovalRules) -> Result<Rules, PolicyError> {
        Ok(Rules {
            allow: Globs::new(&rules.allow)?,
            ask: Globs::new(&rules.ask)?,
            deny: Globs::new(&rules.deny)?,
        })
    }
}

/// Why a verdict was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A rule matched (the pattern, and whether it is the host's or the server's).
    Rule(String),
    /// A person said "allow always" for this definition.
    Remembered,
    /// A trusted server marks the tool `readOnlyHint: true`.
    TrustedReadOnly,
    /// No rule matched: the default is to ask.
    Default,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Rule(rule) => write!(f, "rule {rule}"),
            Reason::Remembered => write!(f, "allowed always for this definition"),
            Reason::TrustedReadOnly => write!(f, "read-only on a trusted server"),
            Reason::Default => write!(f, "no rule matches"),
        }
    }
}

/// What the rules say about a call, before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It goes ahead.
    Allow(Reason),
    /// A person decides.
    Ask(Reason),
    /// Refused by a rule.
    Deny(Reason),
    /// The tool's definition changed since it was pinned: a person must review the change.
    Blocked {
        /// The pinned hash.
        pinned: String,
        /// The listed hash.
        listed: String,
    },
}

/// What an [`Approver`] is shown: everything that will be sent, and what it rests on.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// The server's name in the configuration.
    pub server: &'a str,
    /// The qualified name the model used.
    pub qualified: &'a str,
    /// The tool's full definition as listed.
    pub definition: &'a Value,
    /// Its pinned hash; `None` for a tool never checked against a pin, for which "allow
    /// always" cannot be remembered.
    pub hash: Option<&'a str>,
    /// The complete arguments, exactly as they will be sent.
    pub arguments: &'a Value,
    /// Whether the server's annotations may be relied on; if not, show them as claims.
    pub annotations_trusted: bool,
    /// Why the person is asked.
    pub reason: &'a Reason,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This call only.
    AllowOnce,
    /// This call and every later one to this tool while its definition stays the same.
    AllowAlways,
    /// Refused; the reason reaches the model as the tool's error.
    Deny(String),
    /// Allowed for this call only, by something other than a person answering now (a
    /// command-line flag, an unattended run); the audit log records who.
    AllowedBy(String),
    /// Nobody could be asked (no terminal, no window); the call is refused with this reason.
    Unanswered(String),
}

/// Asks a person (a terminal prompt, a dialog, a chat message).
pub trait Approver: Send + Sync {
    /// Shows the call and waits for the answer.
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Boxed<Box<dyn Future<Output = Answer> + Send + 'a>>;
}

/// A call the policy refused, with what the model is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The message for the model (a tool error).
    pub message: String,
}

/// A call the policy let through, and on what grounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approved {
    /// By the rules, without asking.
    ByPolicy(Reason),
    /// A person allowed it (once, or always).
    ByPerson(Answer),
}

/// The policy of a host: its rules, each server's rules and trust, and what was allowed always.
pub struct Policy {
    host: Rules,
    servers: HashMap<String, (Rules, bool)>,
    remembered: Box<dyn Remembered>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The facts of one call.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The server's name.
    pub server: &'a str,
    /// The qualified name.
    pub qualified: &'a str,
    /// The tool's definition as listed.
    pub definition: &'a Value,
    /// Its pin.
    pub pin: &'a PinState,
    /// The arguments.
    pub arguments: &'a Value,
}

impl Policy {
    /// The policy of `config`, remembering "allow always" answers in `remembered`.
    pub fn new(
        config: &HostConfig,
        remembered: impl Remembered + 'static,
    ) -> Result<Policy, PolicyError> {
        let servers = config
            .servers
            .iter()
            .map(|s| Ok((s.name.clone(), (Rules::new(&s.approval)?, s.trust))))
            .collect::<Result<_, PolicyError>>()?;
        Ok(Policy {
            host: Rules::new(&config.approval)?,
            servers,
            remembered: Box::new(remembered),
        })
    }

    /// What the rules say about `call`.
    pub fn verdict(&self, call: &Call<'_>) -> Verdict {
        let hash = match call.pin {
            PinState::Pinned(hash) => hash,
            PinState::Changed { pinned, listed } => {
                return Verdict::Blocked {
                    pinned: pinned.clone(),
                    listed: listed.clone(),
                };
            }
            // Never checked against a pin: nothing can be remembered for it, and no rule
            // should allow what nobody has seen.
            PinState::Unknown => return Verdict::Ask(Reason::Default),
        };
        let (server_rules, trusted) = match self.servers.get(call.server) {
            Some((rules, trusted)) => (Some(rules), *trusted),
            None => (None, false),
        };
        let first = |pick: fn(&Rules) -> &Globs| {
            let host = pick(&self.host)
                .first_match(call.qualified)
                .map(|p| format!("{p:?} of the host"));
            host.or_else(|| {
                server_rules
                    .and_then(|r| pick(r).first_match(call.qualified))
                    .map(|p| format!("{p:?} of server {:?}", call.server))
            })
        };
        if let Some(rule) = first(|r| &r.deny) {
            return Verdict::Deny(Reason::Rule(rule));
        }
        if let Some(rule) = first(|r| &r.ask) {
            return Verdict::Ask(Reason::Rule(rule));
        }
        if let Some(rule) = first(|r| &r.allow) {
            return Verdict::Allow(Reason::Rule(rule));
        }
        if self.remembered.allowed(call.server, call.qualified, hash) {
            return Verdict::Allow(Reason::Remembered);
        }
        let read_only = call.definition["annotations"]["readOnlyHint"] == Value::Bool(true);
        if trusted && read_only {
            return Verdict::Allow(Reason::TrustedReadOnly);
        }
        Verdict::Ask(Reason::Default)
    }

    /// Decides `call`: by the rules, or by asking `approver`. "Allow always" is remembered
    /// for the tool's pinned definition.
    pub async fn authorize(
        &self,
        call: &Call<'_>,
        approver: &dyn Approver,
    ) -> Result<Approved, Refusal> {
        let reason = match self.verdict(call) {
            Verdict::Allow(reason) => return Ok(Approved::ByPolicy(reason)),
            Verdict::Deny(reason) => {
                return Err(Refusal {
                    message: format!(
                        "The call to {} was refused by the host's policy ({reason}); do not retry it.",
                        call.qualified
                    ),
                });
            }
            Verdict::Blocked { .. } => {
                return Err(Refusal {
                    message: format!(
                        "The tool {} changed since it was approved; a person must review the change before it can be called.",
                        call.qualified
                    ),
                });
            }
            Verdict::Ask(reason) => reason,
        };
        let hash = match call.pin {
            PinState::Pinned(hash) => Some(hash.as_str()),
            _ => None,
        };
        let trusted = self.servers.get(call.server).is_some_and(|(_, t)| *t);
        let request = ApprovalRequest {
            server: call.server,
            qualified: call.qualified,
            definition: call.definition,
            hash,
            arguments: call.arguments,
            annotations_trusted: trusted,
            reason: &reason,
        };
        match (approver.approve(request).await, hash) {
            (Answer::AllowAlways, Some(hash)) => {
                if let Err(e) = self.remembered.remember(call.server, call.qualified, hash) {
                    // The call goes ahead as allowed; the next one is asked about again.
                    tracing::warn!(
                        tool = call.qualified,
                        "cannot remember \"always\" for {}: {e}; the next call is asked about again",
                        call.qualified
                    );
                    return Ok(Approved::ByPerson(Answer::AllowOnce));
                }
                Ok(Approved::ByPerson(Answer::AllowAlways))
            }
            (Answer::AllowAlways | Answer::AllowOnce, _) => {
                Ok(Approved::ByPerson(Answer::AllowOnce))
            }
            (Answer::AllowedBy(by), _) => Ok(Approved::ByPerson(Answer::AllowedBy(by))),
            (Answer::Deny(why), _) => Err(Refusal {
                message: format!("A person refused the call to {}: {why}", call.qualified),
            }),
            (Answer::Unanswered(why), _) => Err(Refusal {
                message: format!("Nobody could approve the call to {}: {why}", call.qualified),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
