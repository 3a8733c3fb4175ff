//! The request spans, in a test binary of their own. `tracing` remembers, for every thread,
//! whether a callsite is enabled; the `it` binary's other tests meet the request span's callsite
//! with no subscriber at all while these install theirs, and a first meeting that races with
//! an install can leave the callsite disabled for the test that wants its spans (seen in CI:
//! no span exported). Here every test installs its subscriber before it sends a request.

#![allow(unreachable_pub)]

#[path = "../it/support.rs"]
mod support;

mod spans;
