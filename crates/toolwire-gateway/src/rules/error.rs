//! Why a rule set cannot be used: each error names the rule (its index in `rules`, its effect and
//! its text, as [`RuleRef`] shows them) and what is wrong with it, so that the gateway can stop at start with a sentence an
//! operator acts on.

use super::config::RuleRef;

/// A rule that cannot be compiled. Every variant names the rule.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum RuleError {
    /// The text is not a CEL expression.
    #[error("{rule} is not a valid CEL expression: {message}")]
    Syntax {
        /// The rule.
        rule: RuleRef,
        /// The parser's description of what it could not read, with the position.
        message: String,
    },
    /// The rule reads a variable other than `caller`, `tool` and `args`.
    #[error(
        "{rule} reads `{name}`, which is not a variable; a rule may read only `caller`, `tool` and `args`"
    )]
    UnknownVariable {
        /// The rule.
        rule: RuleRef,
        /// The variable's name.
        name: String,
    },
    /// The rule calls a function the interpreter does not have.
    #[error("{rule} calls `{name}`, which is not a function rules can use ({known})")]
    UnknownFunction {
        /// The rule.
        rule: RuleRef,
        /// The function's name as the parser reports it (operators as `_?._`, `_[?_]`).
        name: String,
        /// The functions rules can use, for the message.
        known: &'static str,
    },
    /// The rule calls a known function with the wrong number of arguments.
    #[error("{rule} calls `{name}` with {given} argument(s), and it takes {takes}")]
    Arity {
        /// The rule.
        rule: RuleRef,
        /// The function.
        name: &'static str,
        /// How many arguments (with the receiver of a method call) it was given.
        given: usize,
        /// How many it takes, as words.
        takes: &'static str,
    },
    /// The rule uses CEL the interpreter cannot evaluate.
    #[error("{rule} uses {what}, which rules cannot use")]
    Unsupported {
        /// The rule.
        rule: RuleRef,
        /// What it uses.
        what: &'static str,
    },
    /// A regular expression written in the rule does not compile.
    #[error("{rule} has a regular expression that does not compile: {source}")]
    Pattern {
        /// The rule.
        rule: RuleRef,
        /// The regular expression's error (it quotes the pattern).
        source: regex::Error,
    },
}

impl RuleError {
    /// The rule this error is about.
    pub fn rule(&self) -> &RuleRef {
        match self {
            RuleError::Syntax { rule, .. }
            | RuleError::UnknownVariable { rule, .. }
            | RuleError::UnknownFunction { rule, .. }
            | RuleError::Arity { rule, .. }
            | RuleError::Unsupported { rule, .. }
            | RuleError::Pattern { rule, .. } => rule,
        }
    }
}
