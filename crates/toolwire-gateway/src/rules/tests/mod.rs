//! The rules' behaviour end to end: configuration JSON in, decisions and listings out.

mod config;
mod decisions;

use serde_json::Value as Json;

use super::*;

pub(super) fn rules(config: Json) -> Rules {
    let config: RulesConfig = serde_json::from_value(config).expect("the configuration parses");
    Rules::compile(&config).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn compile_error(config: Json) -> RuleError {
    let config: RulesConfig = serde_json::from_value(config).expect("the configuration parses");
    Rules::compile(&config).expect_err("the rules must not compile")
}

pub(super) fn caller(principal: Option<&str>, scopes: &[&str]) -> Caller {
    Caller {
        principal: principal.map(str::to_owned),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        ..Caller::default()
    }
}

pub(super) fn tool(name: &str) -> ToolFacts {
    ToolFacts {
        name: name.to_owned(),
        upstream: name.split("__").next().unwrap_or_default().to_owned(),
        ..ToolFacts::default()
    }
}

/// The effect and, for a rule, its index; `None` for the default.
pub(super) fn outcome(decision: &Decision) -> (Effect, Option<usize>) {
    let index = match &decision.because {
        Because::Rule(rule) => Some(rule.index),
        Because::Unevaluated(u) => Some(u.rule.index),
        Because::Default { .. } => None,
    };
    (decision.effect, index)
}

pub(super) const WRITE_NEEDS_SCOPE: &str =
    r#"tool.name.startsWith("fs__write") && !("files:write" in caller.scopes)"#;
