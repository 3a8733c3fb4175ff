//! Evaluating one compiled rule: the context its functions live in (the interpreter's, with
//! `matches` using the rules' own patterns compiled once, and the guards the rewrites insert),
//! and the rule's logical skeleton evaluated here, strictly, as CEL has it.
//!
//! The outermost `!`, `&&`, `||` and `? :` of a rule are evaluated by this module rather than by
//! the interpreter, for two reasons: CEL's `&&` and `||` are commutative over errors (`false &&
//! error` and `error && false` are both false, `true || error` and `error || true` both true)
//! where the interpreter stops at the first error; and an operand that is not a bool is an
//! error here, with no guard call (the interpreter copies a function's argument expressions at
//! each call, so a guard around a large operand costs a copy of it). Below the skeleton, in a
//! comprehension or a function's argument, the rewrites' `@bool` guard keeps the same
//! strictness.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel_interpreter::extractors::This;
use cel_interpreter::{Context, ExecutionError, FunctionContext, ResolveResult, Value};
use cel_parser::Expression;
use cel_parser::ast::{Expr, operators};
use regex::{Regex, RegexBuilder};

use super::strict::{BOOL, ITERABLE, is_logical};

/// The most a regular expression taken from the arguments may compile to, in bytes, so that a
/// caller cannot make a rule spend its time compiling a huge automaton.
const DYNAMIC_PATTERN_LIMIT: usize = 1 << 20;

/// Why a rule could not be evaluated for a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The interpreter stopped: a missing argument, a value of the wrong type, a division by
    /// zero… The message is the interpreter's, cut to [`EvalError::MESSAGE_LIMIT`] bytes (it
    /// may quote values of the call).
    #[error("{message}")]
    Failed {
        /// The interpreter's message.
        message: String,
    },
    /// The expression gave a value that is not a bool.
    #[error("it gave a {got}, not true or false")]
    NotBool {
        /// The CEL type of the value it gave.
        got: String,
    },
    /// The interpreter panicked (a defect of the interpreter, contained).
    #[error("the CEL interpreter failed on it")]
    Panicked,
}

impl EvalError {
    /// The longest interpreter message kept, in bytes.
    pub const MESSAGE_LIMIT: usize = 200;
}

/// One rule's value: true, false, or why it has none. A panic of the interpreter is contained
/// and reported as an error, so it counts the way every error does (fail closed).
pub(crate) fn evaluate(expr: &Expression, context: &Context) -> Result<bool, EvalError> {
    let Expr::Call(call) = &expr.expr else {
        return leaf(expr, context);
    };
    if !is_logical(call) {
        return leaf(expr, context);
    }
    match (call.func_name.as_str(), &call.args[..]) {
        (operators::LOGICAL_NOT, [operand]) => evaluate(operand, context).map(|b| !b),
        (operators::LOGICAL_AND, [left, right]) => both(left, right, context, false),
        (operators::LOGICAL_OR, [left, right]) => both(left, right, context, true),
        (_, [condition, then, otherwise]) => match evaluate(condition, context)? {
            true => evaluate(then, context),
            false => evaluate(otherwise, context),
        },
        _ => leaf(expr, context),
    }
}

/// `left && right` (`decisive` false) or `left || right` (`decisive` true): the decisive value
/// on either side wins over an error on the other; otherwise the first error, or the right
/// side's value.
fn both(
    left: &Expression,
    right: &Expression,
    context: &Context,
    decisive: bool,
) -> Result<bool, EvalError> {
    let left = evaluate(left, context);
    if left == Ok(decisive) {
        return left;
    }
    match (left, evaluate(right, context)) {
        (_, Ok(value)) if value == decisive => Ok(decisive),
        (Err(error), _) => Err(error),
        (Ok(_), right) => right,
    }
}

/// A part of a rule the interpreter evaluates, which must give a bool.
fn leaf(expr: &Expression, context: &Context) -> Result<bool, EvalError> {
    match catch_unwind(AssertUnwindSafe(|| Value::resolve(expr, context))) {
        Ok(Ok(Value::Bool(b))) => Ok(b),
        Ok(Ok(other)) => Err(EvalError::NotBool {
            got: other.type_of().to_string(),
        }),
        Ok(Err(e)) => Err(EvalError::Failed {
            message: cut(e.to_string(), EvalError::MESSAGE_LIMIT),
        }),
        Err(_) => Err(EvalError::Panicked),
    }
}

/// `text` cut to at most `limit` bytes at a character boundary, with "…" when cut.
fn cut(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The context every rule is evaluated under: the interpreter's functions, `matches` with the
/// rules' own patterns compiled once, and the two guards of the rewrites.
pub(crate) fn root_context(patterns: HashMap<String, Regex>) -> Context<'static> {
    let mut root = Context::default();
    let patterns = Arc::new(patterns);
    root.add_function(
        "matches",
        move |ftx: &FunctionContext, This(text): This<Arc<String>>, pattern: Arc<String>| {
            matches(ftx, &patterns, &text, &pattern)
        },
    );
    root.add_function(BOOL, |This(value): This<Value>| -> ResolveResult {
        match value {
            Value::Bool(_) => Ok(value),
            other => Err(unexpected(&other, "bool")),
        }
    });
    root.add_function(ITERABLE, |This(value): This<Value>| -> ResolveResult {
        match value {
            Value::List(_) | Value::Map(_) => Ok(value),
            other => Err(unexpected(&other, "list or map")),
        }
    });
    root
}

fn matches(
    ftx: &FunctionContext,
    patterns: &HashMap<String, Regex>,
    text: &str,
    pattern: &str,
) -> Result<bool, ExecutionError> {
    if let Some(regex) = patterns.get(pattern) {
        return Ok(regex.is_match(text));
    }
    // A pattern that is not in a rule's text comes from the call; it is compiled for this call
    // only, within a size limit.
    RegexBuilder::new(pattern)
        .size_limit(DYNAMIC_PATTERN_LIMIT)
        .dfa_size_limit(DYNAMIC_PATTERN_LIMIT)
        .build()
        .map(|regex| regex.is_match(text))
        .map_err(|e| ftx.error(format!("the pattern does not compile: {e}")))
}

fn unexpected(value: &Value, want: &str) -> ExecutionError {
    ExecutionError::UnexpectedType {
        got: value.type_of().to_string(),
        want: want.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use cel_parser::Parser;

    use super::*;

    #[test]
    fn the_interpreter_knows_no_clock() {
        // Rules are built without chrono: a rule calling timestamp() must be refused at start,
        // and it is, because `timestamp` is not in compile's FUNCTIONS; the interpreter agrees.
        let expr = Parser::new()
            .parse("timestamp('2026-01-01T00:00:00Z')")
            .unwrap();
        let got = Value::resolve(&expr, &root_context(HashMap::new()));
        assert!(
            matches!(got, Err(ExecutionError::UndeclaredReference(_))),
            "{got:?}"
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let cases = [
            ("short", 10, "short"),
            ("abcdef", 3, "abc…"),
            ("ééé", 3, "é…"),
        ];
        for (text, limit, want) in cases {
            assert_eq!(cut(text.to_owned(), limit), want);
        }
    }

    #[test]
    fn a_panic_in_the_interpreter_is_an_error() {
        let mut root = Context::default();
        root.add_function("boom", || -> bool { panic!("a defect") });
        let expr = Parser::new().parse("boom()").unwrap();
        assert_eq!(evaluate(&expr, &root), Err(EvalError::Panicked));
    }
}
