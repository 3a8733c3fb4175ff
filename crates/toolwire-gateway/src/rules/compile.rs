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
//!   is false); in CEL that is an error. Each such operand is wrapped in `@bool`, which fails on
//!   anything but a bool, so `!args.dry_run` with `"dry_run": "yes"` is an evaluation error (and a
//!   deny rule that errs counts as matched) rather than `false`.
//! - the interpreter panics when a macro (`all`, `exists`, …) ranges over something that is not a
//!   list or a map, which a caller's argument can be; the range is wrapped in `@iterable`, which
//!   fails instead.
//!
//! The names `@bool` and `@iterable` cannot be written in a rule: CEL identifiers do not start
//! with `@`.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel_interpreter::extractors::This;
use cel_interpreter::{Context, ExecutionError, FunctionContext, ResolveResult, Value};
use cel_parser::ast::{CallExpr, EntryExpr, Expr, operators};
use cel_parser::reference::Val;
use cel_parser::{Expression, Parser};
use regex::{Regex, RegexBuilder};

use super::config::RuleRef;
use super::error::RuleError;
use super::facts::ArgsUse;

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

/// The most a regular expression taken from the arguments may compile to, in bytes, so that a
/// caller cannot make a rule spend its time compiling a huge automaton.
const DYNAMIC_PATTERN_LIMIT: usize = 1 << 20;

/// Which variables a rule reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    pub(crate) caller: bool,
    pub(crate) tool: bool,
    pub(crate) args: ArgsUse,
}

impl Reads {
    /// Whether the rule needs the call's arguments, and so cannot be decided at list time.
    pub(crate) fn args(&self) -> bool {
        self.args != ArgsUse::Nothing
    }

    pub(crate) fn merge(&mut self, other: &Reads) {
        self.caller |= other.caller;
        self.tool |= other.tool;
        self.args.merge(other.args.clone());
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
    rewrite(&mut expr);
    Ok(Compiled { rule, expr, reads })
}

/// The parser, with a panic in it (it is generated code) reported as a syntax error rather than
/// taking the gateway down with a backtrace.
fn parse(text: &str) -> Result<Expression, String> {
    match catch_unwind(AssertUnwindSafe(|| Parser::new().parse(text))) {
        Ok(Ok(expr)) => Ok(expr),
        Ok(Err(errors)) => Err(errors.to_string()),
        Err(_) => Err("the CEL parser failed on this text".to_owned()),
    }
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
            Expr::Select(select) => match self.args_ident(&select.operand) {
                true => {
                    self.reads.args.member(&select.field);
                    Ok(())
                }
                false => self.expr(&select.operand),
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
        match name {
            "caller" => self.reads.caller = true,
            "tool" => self.reads.tool = true,
            "args" => self.reads.args.merge(ArgsUse::Whole),
            _ => return Err(Problem::Variable(name.to_owned())),
        }
        Ok(())
    }

    /// Whether `e` is the call's `args` (not a comprehension variable of that name).
    fn args_ident(&self, e: &Expression) -> bool {
        matches!(&e.expr, Expr::Ident(name) if name == "args" && !self.bound.iter().any(|b| b == "args"))
    }

    fn call(&mut self, call: &CallExpr) -> Result<(), Problem> {
        if call.func_name == operators::INDEX
            && call.args.len() == 2
            && self.args_ident(&call.args[0])
        {
            if let Expr::Literal(Val::String(member)) = &call.args[1].expr {
                self.reads.args.member(member);
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

/// The rewrites described in the module's documentation.
fn rewrite(e: &mut Expression) {
    match &mut e.expr {
        Expr::Call(call) => {
            let strict = match call.func_name.as_str() {
                operators::LOGICAL_NOT | operators::LOGICAL_AND | operators::LOGICAL_OR => {
                    call.args.len()
                }
                operators::CONDITIONAL => 1,
                _ => 0,
            };
            if let Some(target) = &mut call.target {
                rewrite(target);
            }
            for (i, arg) in call.args.iter_mut().enumerate() {
                rewrite(arg);
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
                rewrite(part);
            }
            wrap(&mut c.iter_range, ITERABLE);
        }
        Expr::Select(select) => rewrite(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(rewrite),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    rewrite(&mut entry.key);
                    rewrite(&mut entry.value);
                }
            }
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Struct(_) | Expr::Unspecified => {}
    }
}

const BOOL: &str = "@bool";
const ITERABLE: &str = "@iterable";

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
            |names: &[&str]| ArgsUse::Members(names.iter().map(|n| (*n).to_owned()).collect());
        let cases: [(&str, bool, bool, ArgsUse); 9] = [
            ("tool.name == 'args'", false, true, ArgsUse::Nothing),
            ("caller.principal == null", true, false, ArgsUse::Nothing),
            ("args.path == '/'", false, false, members(&["path"])),
            (
                "args['path'] == '/' && has(args.mode)",
                false,
                false,
                members(&["mode", "path"]),
            ),
            ("size(args) > 2", false, false, ArgsUse::Whole),
            ("'path' in args", false, false, ArgsUse::Whole),
            ("args[tool.name] == 1", false, true, ArgsUse::Whole),
            // A comprehension variable named `args` shadows the arguments.
            ("[1, 2].all(args, args > 0)", false, false, ArgsUse::Nothing),
            (
                "args.paths.all(p, p.startsWith(caller.principal))",
                true,
                false,
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
        let context = root_context(HashMap::new());
        for (name, _) in FUNCTIONS {
            let call = Expression {
                id: 1,
                expr: Expr::Call(CallExpr {
                    func_name: name.to_owned(),
                    target: None,
                    args: Vec::new(),
                }),
            };
            if let Err(ExecutionError::UndeclaredReference(missing)) =
                Value::resolve(&call, &context)
            {
                panic!("the interpreter has no function {missing}")
            }
        }
    }

    #[test]
    fn the_interpreter_knows_no_clock() {
        // Rules are built without chrono: a rule calling timestamp() must be refused at start,
        // and it is, because `timestamp` is not in FUNCTIONS; this checks the interpreter agrees.
        let expr = parse("timestamp('2026-01-01T00:00:00Z')").unwrap();
        let got = Value::resolve(&expr, &root_context(HashMap::new()));
        assert!(
            matches!(got, Err(ExecutionError::UndeclaredReference(_))),
            "{got:?}"
        );
    }
}
