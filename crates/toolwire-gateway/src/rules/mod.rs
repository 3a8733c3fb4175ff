//! Who may call what: rules over the caller, the tool and the call's arguments, written in
//! [CEL](https://github.com/google/cel-spec) and evaluated with the `cel-interpreter` crate.
//!
//! # Configuration
//!
//! An ordered list of rules and a default effect ([`RulesConfig`]):
//!
//! ```json
//! {
//!   "rules": [
//!     {"deny": "tool.name.startsWith(\"fs__write\") && !(\"files:write\" in caller.scopes)",
//!      "why": "writing files needs files:write"},
//!     {"ask": "tool.annotations.destructiveHint == true"},
//!     {"allow": "args.path.startsWith(\"/srv/public/\")"}
//!   ],
//!   "default": "deny"
//! }
//! ```
//!
//! Each rule has exactly one of `allow`, `ask` or `deny`, holding a CEL expression that must
//! give a bool, and an optional `why` shown to the caller. `default` is `allow`, `ask` or
//! `deny`, and `allow` when absent. Unknown keys are errors.
//!
//! # Variables
//!
//! A rule reads these and nothing else (see [`Caller`] and [`ToolFacts`]):
//! - `caller`: `principal` (string, or null when anonymous), `scopes` (list of strings),
//!   `claims` (the access token's claims, a map), `client` (`name` and `version` from
//!   `clientInfo`, or null: what the client says of itself, which any caller can say, so never
//!   a ground for access; a claim such as `azp` or `client_id` is);
//! - `tool`: `kind` (`"tool"`, `"prompt"`, `"resource"` or `"template"`), `name` (what the
//!   caller names it by: the qualified name of a tool or prompt, e.g. `fs__write_file`, the
//!   served URI of a resource, the served URI template of a template), `upstream` (the upstream
//!   server's name), `title` and `description` (string or null), `annotations` (a map,
//!   possibly empty);
//! - `args`: the call's arguments (a map; absent arguments are an empty map); a prompt's
//!   arguments when one is got, the variables a URI matched when a template is read, an empty
//!   map when a resource is read.
//!
//! Rules decide every kind of offer, not only tools: a rule that denies an upstream
//! (`tool.upstream == "secret"`) denies its prompts, resources and templates too, and a
//! default `deny` hides every offer no rule allows. A rule meant for tools alone says so
//! (`tool.kind == "tool" && …`).
//!
//! JSON becomes CEL as: integers `int` (`uint` above `i64::MAX`), other numbers `double`,
//! objects maps with string keys, `null` null. Reading a member that is not there
//! (`args.path` without a `path`) is an evaluation error, which makes a deny or ask rule hold
//! (see below); a rule over an argument the caller may leave out tests for it first:
//! `has(args.force) && args.force == true`. `args["name"]` of a missing member is null.
//!
//! # At start
//!
//! [`Rules::compile`] parses every rule once and refuses, naming the rule's index, effect, text
//! and the reason ([`RuleError`]), a rule that does not parse, reads a variable other than the
//! three, calls a function the interpreter does not have or with the wrong number of arguments,
//! writes a regular expression that does not compile, or uses CEL the interpreter cannot
//! evaluate (message literals, optional entries). The functions are `size`, `contains`,
//! `startsWith`, `endsWith`, `matches`, `string`, `bytes`, `int`, `uint`, `double`, `min`,
//! `max`, with the macros `has`, `all`, `exists`, `exists_one`, `map` and `filter`; there are
//! no timestamps.
//!
//! # A call
//!
//! [`Rules::decide`] considers every rule: **deny over ask over allow**. If a deny rule holds,
//! the call is denied (by the first such rule in order); else if an ask rule holds, a person is
//! asked; else if an allow rule holds, it runs; else the default applies.
//!
//! **Fail closed**: a rule that cannot be evaluated for this call (a missing argument, a value
//! of the wrong type, a result that is not a bool) counts as holding if it is a deny or ask
//! rule, and as not holding if it is an allow rule. The [`Decision`] says which rule could not
//! be evaluated and why. The logical operators are CEL's: `!`, `&&`, `||` and `? :` on a value
//! that is not a bool are errors (not truthiness, as the interpreter alone would read them), and
//! `&&` and `||` are commutative over errors: `args.x == 1 && false` is false and
//! `args.x == 1 || true` is true even without an `x`, since no value of `x` would change them.
//!
//! # A list
//!
//! [`Rules::lists`] says whether a tool (or prompt, resource, template) is in a caller's list,
//! from `caller` and `tool` alone: there is no `args` then. A rule that reads `args` gives a
//! value without it only when no value of `args` could change it (`tool.kind == "prompt" &&
//! args.who == "root"` is false for a tool; `tool.upstream == "fs" || args.force` is true for
//! an `fs` tool); otherwise it cannot be decided at list time. A tool is **hidden** exactly
//! when
//! 1. a deny rule holds for it whatever the arguments, or a deny rule that does not read
//!    `args` cannot be evaluated (fail closed), or
//! 2. the default is `deny` and no allow or ask rule may hold: each is false whatever the
//!    arguments, or does not read `args` and cannot be evaluated, or there is none.
//!
//! Otherwise it is listed; a listed tool can still be denied at call time by a rule over its
//! arguments. With the default `allow` or `ask` only the first case hides a tool.
//!
//! # Cost
//!
//! Rules are parsed once. A decision converts `caller`, `tool` and `args` to CEL once (each only
//! if some rule reads it, and of `args` only the members the rules can reach when they name
//! them, so a large argument no rule reads is not copied) and evaluates the rules in that one
//! context; [`Rules::for_caller`] converts the caller once for a whole list. [`Rules`] without
//! rules decides by its default with no CEL at all.
//!
//! ```
//! use toolwire_gateway::rules::{Caller, Effect, Rules, RulesConfig, ToolFacts};
//!
//! let config: RulesConfig = serde_json::from_str(r#"{"rules": [
//!     {"deny": "tool.name.startsWith(\"fs__write\") && !(\"files:write\" in caller.scopes)",
//!      "why": "writing files needs files:write"}
//! ]}"#).unwrap();
//! let rules = Rules::compile(&config).unwrap();
//! let caller = Caller { scopes: vec!["files:read".into()], ..Caller::default() };
//! let tool = ToolFacts { name: "fs__write_file".into(), upstream: "fs".into(), ..ToolFacts::default() };
//! let decision = rules.decide(&caller, &tool, &serde_json::json!({"path": "/tmp/a"}));
//! assert_eq!(decision.effect, Effect::Deny);
//! assert_eq!(
//!     decision.message(),
//!     r#"denied by rules[0] (tool.name.startsWith("fs__write") && !("files:write" in caller.scopes)): writing files needs files:write"#
//! );
//! assert!(!rules.lists(&caller, &tool));
//! ```

mod compile;
mod config;
mod decide;
mod error;
mod eval;
mod facts;
mod strict;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use cel_interpreter::Context;

pub use config::{Effect, RuleConfig, RuleRef, RulesConfig};
pub use decide::{Because, CallerRules, Decision, Unevaluated};
pub use error::RuleError;
pub use eval::EvalError;
pub use facts::{Caller, ClientFacts, Kind, ToolFacts};

use compile::{Compiled, Reads};

/// A compiled rule set: cheap to share (`Send + Sync`), read-only after [`Rules::compile`].
pub struct Rules {
    rules: Vec<Compiled>,
    default: Effect,
    /// What the rules read, together: which variables a decision converts.
    reads: Reads,
    /// The interpreter's functions, with the rules' regular expressions compiled.
    root: Context<'static>,
}

impl Rules {
    /// Parses and checks every rule; the first rule that cannot be used is the error.
    pub fn compile(config: &RulesConfig) -> Result<Rules, RuleError> {
        let mut patterns = HashMap::new();
        let mut reads = Reads::default();
        let mut rules = Vec::with_capacity(config.rules.len());
        for (index, rule) in config.rules.iter().enumerate() {
            let compiled = compile::compile(RuleRef::new(index, rule), &mut patterns)?;
            reads.merge(&compiled.reads);
            rules.push(compiled);
        }
        Ok(Rules {
            rules,
            default: config.default,
            reads,
            root: eval::root_context(patterns),
        })
    }

    /// Whether there are no rules: then every call gets the default effect with no CEL
    /// evaluated, and every tool is listed unless the default is `deny`.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// The effect when no rule applies.
    pub fn default_effect(&self) -> Effect {
        self.default
    }

    /// The decision for a call of `tool` with `args` (the call's `arguments`; `null` when it
    /// has none) by `caller`. See the [module documentation](self) for the order and the
    /// fail-closed readings.
    pub fn decide(&self, caller: &Caller, tool: &ToolFacts, args: &serde_json::Value) -> Decision {
        self.for_caller(caller).decide(tool, args)
    }

    /// Whether `tool` is in `caller`'s list. See the [module documentation](self) for exactly
    /// when a tool is hidden.
    pub fn lists(&self, caller: &Caller, tool: &ToolFacts) -> bool {
        self.for_caller(caller).lists(tool)
    }

    /// The rules with `caller` converted once, for listing many tools.
    pub fn for_caller(&self, caller: &Caller) -> CallerRules<'_> {
        CallerRules::new(self, caller)
    }

    pub(crate) fn with_effect(&self, effect: Effect) -> impl Iterator<Item = &Compiled> {
        self.rules.iter().filter(move |c| c.rule.effect == effect)
    }

    pub(crate) fn reads(&self) -> &Reads {
        &self.reads
    }

    /// Whether the rules read nothing but `caller`: conditions over who is asking alone (the
    /// gateway's discovery modes per caller).
    pub(crate) fn reads_only_caller(&self) -> bool {
        self.reads.tool == facts::Use::Nothing && !self.reads.args()
    }

    pub(crate) fn root(&self) -> &Context<'static> {
        &self.root
    }
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field(
                "rules",
                &self.rules.iter().map(|c| &c.rule).collect::<Vec<_>>(),
            )
            .field("default", &self.default)
            .finish()
    }
}
