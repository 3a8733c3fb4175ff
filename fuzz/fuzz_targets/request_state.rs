//! Request state: any token, and any plaintext sealed with the key.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_server::fuzzing::request_state(data));
