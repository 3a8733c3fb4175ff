//! Cursors: any string, and the round trip of any position.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_server::fuzzing::cursor(data));
