//! The client's stdio line reader: the same lines however the stream is chunked, none past
//! the bound.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_client::fuzzing::lines(data));
