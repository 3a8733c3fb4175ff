//! The frame reader with its depth bound, and the one-pass `tools/call` reading held to the
//! usual one.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_server::fuzzing::frame(data));
