//! The test harness of the tests that need a system part: each test runs when its parts are
//! there, and is reported *ignored*, with the reason, when one is missing; the binary then ends
//! with one block listing what was skipped and how to install it, and so does the whole run.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::skipped::{self, Scope, Skipped};
use crate::system::SystemPart;

/// The variable under which a missing system part fails its tests instead of skipping them
/// (`TOOLWIRE_REQUIRE_PARTS=1`: what CI sets, where a skip would hide a missing test).
pub const REQUIRE_PARTS: &str = "TOOLWIRE_REQUIRE_PARTS";

/// Whether a missing part fails its tests ([`REQUIRE_PARTS`] is `1`).
fn required() -> bool {
    std::env::var(REQUIRE_PARTS).is_ok_and(|v| v == "1")
}

/// The tests of one binary that need system parts (a `harness = false` test target):
/// `SystemTests::new().test(…).test(…).run()` from its `main`.
///
/// Filters and flags are libtest's (`cargo test --test NAME -- FILTER --test-threads 1`); a
/// skipped test is counted as ignored, and `-- --ignored` runs it (and fails it, naming the
/// missing part).
#[derive(Default)]
pub struct SystemTests {
    trials: Vec<Trial>,
    skipped: Arc<Mutex<Vec<Skipped>>>,
}

impl SystemTests {
    /// No tests yet.
    pub fn new() -> SystemTests {
        SystemTests::default()
    }

    /// Adds the test `name`, which runs `body` when every part of `needs` is there.
    pub fn test(mut self, name: &str, needs: &[SystemPart], body: fn()) -> SystemTests {
        let needs = needs.to_vec();
        let skipped = self.skipped.clone();
        let test = name.to_owned();
        self.trials.push(Trial::ignorable_test(name, move || {
            if let Some(missing) = needs.iter().copied().find(|part| part.find().is_none()) {
                let why = format!(
                    "needs {}, which is missing: {}",
                    missing.program(),
                    missing.install()
                );
                if required() {
                    return Err(Failed::from(format!(
                        "{why} ({REQUIRE_PARTS}=1 makes a missing part fail its tests)"
                    )));
                }
                skipped
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Skipped { test, missing });
                return Ok(Completion::ignored_with(why));
            }
            run(body)
        }));
        self
    }

    /// Runs the tests as libtest would (its arguments, its output), one at a time unless
    /// `--test-threads` says otherwise (each starts processes that would otherwise share the
    /// machine's cores with another's), then the block of what was skipped; the exit code is
    /// libtest's.
    pub fn run(self) -> ExitCode {
        let mut args = Arguments::from_args();
        args.test_threads.get_or_insert(1);
        let conclusion = libtest_mimic::run(&args, self.trials);
        let skipped = self
            .skipped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if !skipped.is_empty() {
            let _ = std::io::stderr().write_all(skipped::block(&skipped, Scope::Binary).as_bytes());
            skipped::record(&skipped);
        }
        conclusion.exit_code()
    }
}

/// The `main` of the test binary that runs last in a `cargo test` of the whole workspace
/// (toolwire-testkit's `tests/skipped.rs`): one block with every test this `cargo test` skipped
/// for want of a system part, in every binary, so that the run says so at its end. Prints
/// nothing when none was skipped, or when run on its own.
pub fn skipped_in_this_run() -> ExitCode {
    let args = Arguments::from_args();
    let conclusion = libtest_mimic::run(&args, Vec::new());
    if !args.list {
        let skipped = skipped::take();
        if !skipped.is_empty() {
            let _ = std::io::stderr().write_all(skipped::block(&skipped, Scope::Run).as_bytes());
        }
    }
    conclusion.exit_code()
}

/// Runs a test body, a panic being its failure (with the panic's message).
fn run(body: fn()) -> Result<Completion, Failed> {
    match std::panic::catch_unwind(body) {
        Ok(()) => Ok(Completion::Completed),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the test panicked".to_owned());
            Err(Failed::from(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_body_fails_with_its_message() {
        let Err(failed) = run(|| panic!("a reason")) else {
            panic!("a panicking body passed");
        };
        assert_eq!(failed.message(), Some("a reason"));
        assert!(matches!(run(|| {}), Ok(Completion::Completed)));
    }
}
