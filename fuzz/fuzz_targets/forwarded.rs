//! Forwarding headers (`Forwarded`, `X-Forwarded-For`): any lines, behind one to three proxies.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_server::fuzzing::forwarded(data));
