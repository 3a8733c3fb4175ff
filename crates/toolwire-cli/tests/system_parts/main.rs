//! The tests that need a part only the system's package manager provides: HAProxy in front of
//! several instances (balancer.rs), Prometheus and promtool reading the metrics (metrics.rs),
//! and Chromium driving the gateway's console (console.rs).
//!
//! Each test runs when its parts are there (`scripts/parts system` says which are). When one is
//! missing the test is reported *ignored*, with the reason, never as passed, and the run of
//! this binary ends with one block listing every skipped test, why, and the command that
//! installs its part (`scripts/parts install-system` installs them all, on Debian). With
//! `TOOLWIRE_REQUIRE_PARTS=1`, as in CI, a missing part fails its tests instead.
//!
//! The tests run one at a time: each starts processes (a cluster, a browser) that would
//! otherwise share two cores with another's. `cargo test --test system_parts -- FILTER` and
//! libtest's other arguments work as usual.

#[path = "../support/browser.rs"]
mod browser;
#[path = "../support/gateway.rs"]
mod gateway;
#[path = "../support/scenarios.rs"]
mod scenarios;
#[path = "../support/serve.rs"]
mod serve;
#[path = "../support/cluster.rs"]
mod support;

mod balancer;
mod console;
mod metrics;

use std::process::ExitCode;

use toolwire_testkit::{SystemPart, SystemTests};

/// Runs `future` to completion on a runtime of its own (two worker threads, as the tests were
/// written for).
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime")
        .block_on(future)
}

/// `SystemTests` of `part => module::test` rows, each test named `module::test`.
macro_rules! system_tests {
    ($($needs:expr => $module:ident :: $test:ident),* $(,)?) => {
        SystemTests::new()
            $(.test(concat!(stringify!($module), "::", stringify!($test)), &$needs, $module::$test))*
    };
}

fn main() -> ExitCode {
    use SystemPart::{Chromium, HAProxy, Prometheus, Promtool};
    system_tests![
        [HAProxy] => balancer::introduce_completes_through_the_balancer_and_a_redeemed_state_is_refused_by_all,
        [HAProxy] => balancer::a_note_written_through_the_balancer_reads_back_from_every_instance,
        [HAProxy] => balancer::kill_9_of_an_instance_behind_the_balancer_fails_only_its_calls_in_flight,
        [HAProxy] => balancer::redis_away_behind_the_balancer_refuses_what_needs_it_and_comes_back,
        [HAProxy] => balancer::a_listener_through_the_balancer_hears_changes_made_on_other_instances_once,
        [HAProxy] => balancer::a_caller_at_twice_its_quota_through_the_balancer_is_refused_half_the_time,
        [HAProxy] => balancer::the_python_sdk_1x_lists_and_calls_tools_through_the_balancer,
        [HAProxy] => balancer::the_python_sdk_1x_answers_an_elicitation_through_the_balancer,
        [Promtool] => metrics::promtool_accepts_a_scrape_of_serve,
        [Prometheus] => metrics::prometheus_scrapes_serve_and_counts_a_call,
        [Chromium] => console::an_operator_approves_a_changed_definition_in_chromium_and_it_is_served_again,
        [Chromium] => console::a_browser_signs_in_once_with_the_console_token,
    ]
    .run()
}
