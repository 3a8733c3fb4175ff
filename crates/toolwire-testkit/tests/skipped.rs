//! The last test binary of `cargo test` in the workspace (this crate's name sorts after every
//! other's, and its only test target is this one): it lists every test of the run that was
//! skipped for want of a system part, in one block, so that the run says so at its end (only
//! the doc-tests come after it).

fn main() -> std::process::ExitCode {
    toolwire_testkit::skipped_in_this_run()
}
