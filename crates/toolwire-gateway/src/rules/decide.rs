//! Deciding: a call (allow, ask or deny, and why) and a listing (is the tool in this caller's
//! list), from the compiled rules and the facts of one caller. The order and the fail-closed
//! readings are set out in the module documentation of [`rules`](super).

use std::fmt;

use cel_interpreter::{Context, Value};

use super::Rules;
use super::compile::Compiled;
use super::config::{Effect, RuleRef};
use super::eval::{EvalError, evaluate};
use super::facts::{Caller, ToolFacts, Use, args_value, caller_value, tool_value};

/// What to do with a call, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Allow, ask or deny.
    pub effect: Effect,
    /// The rule, or the default, that decided.
    pub because: Because,
}

/// What decided a call.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Because {
    /// This rule's expression was true (the first in order among those of the deciding effect).
    Rule(RuleRef),
    /// This deny or ask rule could not be evaluated, and so counts as matched.
    Unevaluated(Unevaluated),
    /// No rule applied; the default effect holds. `skipped` is the first allow rule that could
    /// not be evaluated (and so did not allow the call), when there was one.
    Default {
        /// The first allow rule that could not be evaluated, if any.
        skipped: Option<Unevaluated>,
    },
}

/// A rule that could not be evaluated, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Unevaluated {
    /// The rule.
    pub rule: RuleRef,
    /// Why it could not be evaluated.
    pub error: EvalError,
}

impl Decision {
    /// A sentence for the caller: what was decided and by which rule, with the rule's `why`.
    /// For example `denied by rules[2] (tool.name.startsWith("fs__write") && !("files:write" in
    /// caller.scopes)): writing files needs files:write`.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = self.effect.done();
        match &self.because {
            Because::Rule(rule) => {
                write!(f, "{done} by rules[{}] ({})", rule.index, rule.text)?;
                why(f, rule)
            }
            Because::Unevaluated(Unevaluated { rule, error }) => {
                write!(
                    f,
                    "{done} because rules[{}] ({}) could not be evaluated: {error}",
                    rule.index, rule.text
                )?;
                why(f, rule)
            }
            Because::Default { skipped } => {
                write!(f, "{done} by default")?;
                if self.effect != Effect::Allow {
                    f.write_str(": no rule allows this call")?;
                }
                if let Some(Unevaluated { rule, error }) = skipped {
                    write!(
                        f,
                        " (rules[{}] ({}) could not be evaluated: {error})",
                        rule.index, rule.text
                    )?;
                }
                Ok(())
            }
        }
    }
}

fn why(f: &mut fmt::Formatter<'_>, rule: &RuleRef) -> fmt::Result {
    match &rule.why {
        Some(why) => write!(f, ": {why}"),
        None => Ok(()),
    }
}

/// The rules with one caller's facts converted once, for deciding many tools (a list) or a call.
/// Made by [`Rules::for_caller`].
pub struct CallerRules<'r> {
    rules: &'r Rules,
    /// `caller` as CEL, when a rule reads it.
    caller: Option<Value>,
}

impl<'r> CallerRules<'r> {
    pub(crate) fn new(rules: &'r Rules, caller: &Caller) -> Self {
        let used = &rules.reads().caller;
        let caller = (*used != Use::Nothing).then(|| caller_value(caller, used));
        CallerRules { rules, caller }
    }

    /// Whether `tool` is in this caller's list; see [`Rules::lists`].
    pub fn lists(&self, tool: &ToolFacts) -> bool {
        let rules = self.rules;
        if rules.is_empty() {
            return rules.default_effect() != Effect::Deny;
        }
        let context = self.context(tool, None);
        // Without `args`, a rule that reads it gives a value only when no value of `args` could
        // change it (`tool.kind == "prompt" && args.who == "root"` is false for a tool); else
        // it cannot be evaluated, and then it may hold for some call.
        let holds_for_every_call = |c: &Compiled| match evaluate(&c.expr, &context) {
            Ok(held) => held,
            // Fail closed for a rule that does not read `args`: it cannot be evaluated for
            // any call.
            Err(_) => !c.reads.args(),
        };
        // A deny rule that holds for every call, or cannot be evaluated, hides the tool.
        if rules.with_effect(Effect::Deny).any(holds_for_every_call) {
            return false;
        }
        if rules.default_effect() != Effect::Deny {
            return true;
        }
        // Denied by default: listed only if some ask or allow rule may hold for a call.
        [Effect::Ask, Effect::Allow].into_iter().any(|effect| {
            rules.with_effect(effect).any(|c| {
                let may_hold = evaluate(&c.expr, &context);
                may_hold == Ok(true) || (c.reads.args() && may_hold.is_err())
            })
        })
    }

    /// The decision for a call of `tool` with `args`; see [`Rules::decide`].
    pub fn decide(&self, tool: &ToolFacts, args: &serde_json::Value) -> Decision {
        let rules = self.rules;
        if rules.is_empty() {
            return default(rules.default_effect(), None);
        }
        let context = self.context(tool, Some(args));
        for effect in [Effect::Deny, Effect::Ask] {
            for c in rules.with_effect(effect) {
                let because = match evaluate(&c.expr, &context) {
                    Ok(false) => continue,
                    Ok(true) => Because::Rule(c.rule.clone()),
                    Err(error) => Because::Unevaluated(Unevaluated {
                        rule: c.rule.clone(),
                        error,
                    }),
                };
                return Decision { effect, because };
            }
        }
        let mut skipped = None;
        for c in rules.with_effect(Effect::Allow) {
            match evaluate(&c.expr, &context) {
                Ok(true) => {
                    return Decision {
                        effect: Effect::Allow,
                        because: Because::Rule(c.rule.clone()),
                    };
                }
                Ok(false) => {}
                Err(error) => {
                    skipped.get_or_insert(Unevaluated {
                        rule: c.rule.clone(),
                        error,
                    });
                }
            }
        }
        default(rules.default_effect(), skipped)
    }

    /// The variables for one evaluation: each converted once, and only if a rule reads it.
    /// Without `args` (at list time) the variable is absent, and only rules that do not read it
    /// are evaluated.
    fn context(&self, tool: &ToolFacts, args: Option<&serde_json::Value>) -> Context<'r> {
        let reads = self.rules.reads();
        let mut context = self.rules.root().new_inner_scope();
        if let Some(caller) = &self.caller {
            context.add_variable_from_value("caller", caller.clone());
        }
        if reads.tool != Use::Nothing {
            context.add_variable_from_value("tool", tool_value(tool, &reads.tool));
        }
        if let Some(args) = args.filter(|_| reads.args()) {
            context.add_variable_from_value("args", args_value(args, &reads.args));
        }
        context
    }
}

fn default(effect: Effect, skipped: Option<Unevaluated>) -> Decision {
    Decision {
        effect,
        because: Because::Default { skipped },
    }
}
