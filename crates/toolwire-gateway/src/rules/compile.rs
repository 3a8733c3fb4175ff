//! From a rule's text to an expression the interpreter can evaluate safely: parsed once, checked
//! on its syntax tree (the variables it reads, the functions it calls and their arity, no CEL the
//! interpreter cannot run), and rewritten where the interpreter is looser than CEL.
//!
//! The checks walk the tree themselves rather than use the interpreter's `references()`, which
//! reports a comprehension's own variable (`p` in `args.paths.all(p, p.startsWith("/srv/"))`) as a
//! variable the rule reads and so cannot tell it from an unknown one, nor tell whether `args` is
//! the call's arguments or a comprehension variable that shadows it.
//!
//! The rewrites, so that a rule means what it means in CEL:
//! - the interpreter reads a non-bool operand of `!`, `&&`, `||` and `? :` by truthiness (`!"no"`
//!   is false); in CEL that is an error. The rule's outermost logic is evaluated strictly by
//!   [`eval`](super::eval); below it (in a comprehension, a list, a function's argument) each
//!   such operand is wrapped in `@bool`, which fails on anything but a bool. Either way
//!   `!args.dry_run` with `"dry_run": "yes"` is an evaluation error (and a deny rule that errs
//!   counts as matched) rather than `false`.
//! - the interpreter panics when a macro (`all`, `exists`, …) ranges over something that is not a
//!   list or a map, which a caller's argument can be; the range is wrapped in `@iterable`, which
//!   fails instead.
//!
//! The names `@bool` and `@iterable` cannot be written in a rule: CEL identifiers do not start
//! with `@`.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use cel_parser::ast::{CallExpr, EntryExpr, Expr, operators};
use cel_parser::reference::Val;
use cel_parser::{Expression, Parser};
use regex::Regex;

use super::config::RuleRef;
use super::error::RuleError;
use super::facts::Use;
use super::strict::{BOOL, ITERABLE, is_logical};

/// The operators the interpreter evaluates itself (the parser writes them; a rule cannot name
/// them as functions).
const OPERATORS: [&str; 19] = [
    operators::CONDITIONAL,
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::SUBSTRACT,
    operators::ADD,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::GREATER_EQUALS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::LESS,
    operators::NEGATE,
    operators::INDEX,
    operators::IN,
    operators::NOT_STRICTLY_FALSE,
];

/// How many arguments a function takes.
#[derive(Clone, Copy)]
enum Arity {
    /// This many values, the receiver of a method call counted: `size(x)` or `x.size()`.
    Values(usize),
    /// One argument and no receiver: `bytes("a")`.
    OneNoReceiver,
    /// Any number: `max(1, 2)`, `max([1, 2])`.
    Any,
}

/// The functions of the interpreter's standard context (built without `chrono`, so no
/// `timestamp`, `duration` or their getters), with their arity.
const FUNCTIONS: [(&str, Arity); 12] = [
    ("contains", Arity::Values(2)),
    ("size", Arity::Values(1)),
    ("max", Arity::Any),
    ("min", Arity::Any),
    ("startsWith", Arity::Values(2)),
    ("endsWith", Arity::Values(2)),
    ("string", Arity::Values(1)),
    ("bytes", Arity::OneNoReceiver),
    ("double", Arity::Values(1)),
    ("int", Arity::Values(1)),
    ("uint", Arity::Values(1)),
    ("matches", Arity::Values(2)),
];

/// The functions and macros a rule can use, for error messages.
const KNOWN: &str = "size, contains, startsWith, endsWith, matches, string, bytes, int, uint, \
    double, min, max, and the macros has, all, exists, exists_one, map and filter";

/// What a rule reads of each variable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    pub(crate) caller: Use,
    pub(crate) tool: Use,
    pub(crate) args: Use,
}

impl Reads {
    /// Whether the rule needs the call's arguments, and so cannot be decided at list time.
    pub(crate) fn args(&self) -> bool {
        self.args != Use::Nothing
    }

    pub(crate) fn merge(&mut self, other: &Reads) {
        self.caller.merge(other.caller.clone());
        self.tool.merge(other.tool.clone());
        self.args.merge(other.args.clone());
    }

    fn of(&mut self, variable: Variable) -> &mut Use {
        match variable {
            Variable::Caller => &mut self.caller,
            Variable::Tool => &mut self.tool,
            Variable::Args => &mut self.args,
        }
    }
}

/// The three variables.
#[derive(Clone, Copy)]
enum Variable {
    Caller,
    Tool,
    Args,
}

impl Variable {
    fn named(name: &str) -> Option<Variable> {
        match name {
            "caller" => Some(Variable::Caller),
            "tool" => Some(Variable::Tool),
            "args" => Some(Variable::Args),
            _ => None,
        }
    }
}

/// One rule, ready to evaluate.
pub(crate) struct Compiled {
    pub(crate) rule: RuleRef,
    pub(crate) expr: Expression,
    pub(crate) reads: Reads,
}

/// Parses, checks and rewrites one rule; `patterns` gathers the regular expressions written in
/// it, compiled.
pub(crate) fn compile(
    rule: RuleRef,
    patterns: &mut HashMap<String, Regex>,
) -> Result<Compiled, RuleError> {
    let mut expr = match parse(&rule.text) {
        Ok(expr) => expr,
        Err(message) => return Err(RuleError::Syntax { rule, message }),
    };
    let mut check = Check {
        reads: Reads::default(),
        bound: Vec::new(),
        patterns,
    };
    if let Err(problem) = check.expr(&expr) {
        return Err(problem.into_error(rule));
    }
    let reads = check.reads;
    rewrite(&mut expr, true);
    Ok(Compiled { rule, expr, reads })
}

/// The parser, with a panic in it reported as a syntax error. The parser (0.10) panics on some
/// incomplete expressions, such as `tool.name == ` with no right side, instead of reporting
/// them; such a panic is caught, and kept from the panic hook (no Rust panic message reaches a
/// person), and the rule's error says what to look for.
fn parse(text: &str) -> Result<Expression, String> {
    quiet_while_parsing();
    PARSING.with(|parsing| parsing.set(true));
    let parsed = catch_unwind(AssertUnwindSafe(|| Parser::new().parse(text)));
    PARSING.with(|parsing| parsing.set(false));
    match parsed {
        Ok(Ok(expr)) => Ok(expr),
        Ok(Err(errors)) => Err(errors.to_string()),
        Err(_) => Err(
            "the CEL parser could not read it; look for an operator without an \
             operand or a bracket or quote left open"
                .to_owned(),
        ),
    }
}

thread_local! {
    /// Whether this thread is in the CEL parser (whose panics are the parser's bugs, caught).
    static PARSING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Puts, once, a panic hook in front of the one in place that says nothing of a panic in the
/// CEL parser and hands every other panic to the hook it replaced.
fn quiet_while_parsing() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !PARSING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// What is wrong with a rule, before it is named.
enum Problem {
    Variable(String),
    Function(String),
    Arity(&'static str, usize, &'static str),
    Unsupported(&'static str),
    Pattern(regex::Error),
}

impl Problem {
    fn into_error(self, rule: RuleRef) -> RuleError {
        match self {
            Problem::Variable(name) => RuleError::UnknownVariable { rule, name },
            Problem::Function(name) => RuleError::UnknownFunction {
                rule,
                name,
                known: KNOWN,
            },
            Problem::Arity(name, given, takes) => RuleError::Arity {
                rule,
                name,
                given,
                takes,
            },
            Problem::Unsupported(what) => RuleError::Unsupported { rule, what },
            Problem::Pattern(source) => RuleError::Pattern { rule, source },
        }
    }
}

/// One walk over a rule's tree: what it reads, and the first thing wrong with it.
struct Check<'p> {
    reads: Reads,
    /// The comprehension variables in scope, innermost last.
    bound: Vec<String>,
    patterns: &'p mut HashMap<String, Regex>,
}

impl Check<'_> {
    fn expr(&mut self, e: &Expression) -> Result<(), Problem> {
        match &e.expr {
            Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => self.variable(name),
            Expr::Select(select) => match self.variable_ident(&select.operand) {
                Some(variable) => {
                    self.reads.of(variable).member(&select.field);
                    Ok(())
                }
                None => self.expr(&select.operand),
            },
            Expr::Call(call) => self.call(call),
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.expr(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(entry) if !entry.optional => {
                    self.expr(&entry.key)?;
                    self.expr(&entry.value)
                }
                EntryExpr::MapEntry(_) => {
                    Err(Problem::Unsupported("an optional map entry (`?key`)"))
                }
                EntryExpr::StructField(_) => Err(Problem::Unsupported("a field in a map literal")),
            }),
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range)?;
                self.expr(&c.accu_init)?;
                self.bound.push(c.iter_var.clone());
                self.bound.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|e| self.expr(e));
                self.bound.truncate(self.bound.len() - 2);
                inner
            }
            Expr::Struct(_) => Err(Problem::Unsupported("a message literal (`Type{field: …}`)")),
            Expr::Unspecified => Err(Problem::Unsupported("an incomplete expression")),
        }
    }

    fn variable(&mut self, name: &str) -> Result<(), Problem> {
        if self.bound.iter().any(|b| b == name) {
            return Ok(());
        }
        match Variable::named(name) {
            Some(variable) => {
                self.reads.of(variable).merge(Use::Whole);
                Ok(())
            }
            None => Err(Problem::Variable(name.to_owned())),
        }
    }

    /// Which of the three variables `e` is, if it is one (and not a comprehension variable of
    /// the same name).
    fn variable_ident(&self, e: &Expression) -> Option<Variable> {
        match &e.expr {
            Expr::Ident(name) if !self.bound.iter().any(|b| b == name) => Variable::named(name),
            _ => None,
        }
    }

    fn call(&mut self, call: &CallExpr) -> Result<(), Problem> {
        if let (operators::INDEX, [object, key]) = (call.func_name.as_str(), &call.args[..]) {
            if let (Some(variable), Expr::Literal(Val::String(member))) =
                (self.variable_ident(object), &key.expr)
            {
                self.reads.of(variable).member(member);
                return Ok(());
            }
        }
        if !OPERATORS.contains(&call.func_name.as_str()) {
            self.function(call)?;
        }
        if let Some(target) = &call.target {
            self.expr(target)?;
        }
        call.args.iter().try_for_each(|e| self.expr(e))
    }

    /// A call of a named function: known, with the right number of arguments, and a literal
    /// pattern of `matches` compiled now (a bad one is an error at start, not at each call).
    fn function(&mut self, call: &CallExpr) -> Result<(), Problem> {
        let Some(&(name, arity)) = FUNCTIONS.iter().find(|(name, _)| *name == call.func_name)
        else {
            return Err(Problem::Function(call.func_name.clone()));
        };
        let given = call.args.len() + usize::from(call.target.is_some());
        match arity {
            Arity::Values(n) if given != n => {
                return Err(Problem::Arity(name, given, takes(n)));
            }
            Arity::OneNoReceiver if call.target.is_some() || call.args.len() != 1 => {
                return Err(Problem::Arity(name, given, "1, and is not a method"));
            }
            _ => {}
        }
        if name == "matches" {
            if let Some(Expr::Literal(Val::String(pattern))) = call.args.last().map(|a| &a.expr) {
                let regex = Regex::new(pattern).map_err(Problem::Pattern)?;
                self.patterns.insert(pattern.clone(), regex);
            }
        }
        Ok(())
    }
}

fn takes(n: usize) -> &'static str {
    match n {
        1 => "1 (the value, or the receiver of a method call)",
        _ => "2 (the receiver of a method call and one argument, or two arguments)",
    }
}

/// The rewrites described in the module's documentation. `top`: `e` is part of the rule's
/// logical skeleton (its outermost `!`, `&&`, `||` and `? :`), which [`eval`](super::eval)
/// evaluates itself, strictly; below it, the interpreter evaluates and the guards go in.
fn rewrite(e: &mut Expression, top: bool) {
    match &mut e.expr {
        Expr::Call(call) => {
            let logical = is_logical(call);
            let strict = match call.func_name.as_str() {
                _ if !logical || top => 0,
                operators::CONDITIONAL => 1,
                _ => call.args.len(),
            };
            if let Some(target) = &mut call.target {
                rewrite(target, false);
            }
            for (i, arg) in call.args.iter_mut().enumerate() {
                rewrite(arg, top && logical);
                if i < strict {
                    wrap(arg, BOOL);
                }
            }
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                rewrite(part, false);
            }
            wrap(&mut c.iter_range, ITERABLE);
        }
        Expr::Select(select) => rewrite(&mut select.operand, false),
        Expr::List(list) => list.elements.iter_mut().for_each(|e| rewrite(e, false)),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    rewrite(&mut entry.key, false);
                    rewrite(&mut entry.value, false);
                }
            }
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Struct(_) | Expr::Unspecified => {}
    }
}

fn wrap(e: &mut Expression, function: &str) {
    let inner = std::mem::take(e);
    *e = Expression {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args: vec![inner],
        }),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(text: &str) -> Reads {
        let rule = RuleRef {
            index: 0,
            effect: super::super::Effect::Deny,
            text: text.into(),
            why: None,
        };
        compile(rule, &mut HashMap::new())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .reads
    }

    #[test]
    fn reads_follow_the_tree_not_the_text() {
        let members =
            |names: &[&str]| Use::Members(names.iter().map(|n| (*n).to_owned()).collect());
        let cases: [(&str, Use, Use, Use); 12] = [
            (
                "tool.name == 'args'",
                Use::Nothing,
                members(&["name"]),
                Use::Nothing,
            ),
            (
                "caller.principal == null",
                members(&["principal"]),
                Use::Nothing,
                Use::Nothing,
            ),
            (
                "caller['scopes'] == [] && tool == {}",
                members(&["scopes"]),
                Use::Whole,
                Use::Nothing,
            ),
            (
                "args.path == '/'",
                Use::Nothing,
                Use::Nothing,
                members(&["path"]),
            ),
            (
                "args['path'] == '/' && has(args.mode)",
                Use::Nothing,
                Use::Nothing,
                members(&["mode", "path"]),
            ),
            ("size(args) > 2", Use::Nothing, Use::Nothing, Use::Whole),
            ("'path' in args", Use::Nothing, Use::Nothing, Use::Whole),
            (
                "args[tool.name] == 1",
                Use::Nothing,
                members(&["name"]),
                Use::Whole,
            ),
            (
                "caller.claims.tenant == 'a'",
                members(&["claims"]),
                Use::Nothing,
                Use::Nothing,
            ),
            // A comprehension variable named `args` shadows the arguments.
            (
                "[1, 2].all(args, args > 0)",
                Use::Nothing,
                Use::Nothing,
                Use::Nothing,
            ),
            (
                "[tool].all(args, args.x > 0)",
                Use::Nothing,
                Use::Whole,
                Use::Nothing,
            ),
            (
                "args.paths.all(p, p.startsWith(caller.principal))",
                members(&["principal"]),
                Use::Nothing,
                members(&["paths"]),
            ),
        ];
        for (text, caller, tool, args) in cases {
            let want = Reads { caller, tool, args };
            assert_eq!(reads(text), want, "{text}");
        }
    }

    #[test]
    fn every_known_function_is_in_the_interpreter() {
        let context = super::super::eval::root_context(HashMap::new());
        for (name, _) in FUNCTIONS {
            let call = Expression {
                id: 1,
                expr: Expr::Call(CallExpr {
                    func_name: name.to_owned(),
                    target: None,
                    args: Vec::new(),
                }),
            };
            if let Err(cel_interpreter::ExecutionError::UndeclaredReference(missing)) =
                cel_interpreter::Value::resolve(&call, &context)
            {
                panic!("the interpreter has no function {missing}")
            }
        }
    }
}
