//! What holds a rule to CEL's strict logic, shared by its compiling (which wraps operands in
//! the guards) and its evaluation (which registers them and evaluates the outermost logic
//! itself): the logical operators, and the names of the guard functions, which a rule cannot
//! write (CEL identifiers do not start with `@`).

use cel_parser::ast::{CallExpr, operators};

/// The guard that fails on a value that is not a bool.
pub(crate) const BOOL: &str = "@bool";
/// The guard that fails on a value a macro cannot range over.
pub(crate) const ITERABLE: &str = "@iterable";

/// Whether `call` is one of CEL's logical operators: `!`, `&&`, `||`, `? :`.
pub(crate) fn is_logical(call: &CallExpr) -> bool {
    matches!(
        (call.func_name.as_str(), call.args.len()),
        (operators::LOGICAL_NOT, 1)
            | (operators::LOGICAL_AND | operators::LOGICAL_OR, 2)
            | (operators::CONDITIONAL, 3)
    )
}
