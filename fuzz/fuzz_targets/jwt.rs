//! JWT access tokens: the header, and the claims through verification's checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_auth::fuzzing::jwt(data));
