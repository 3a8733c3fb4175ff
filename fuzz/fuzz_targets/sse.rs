//! The client's SSE parser: the same events however the stream is chunked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_client::fuzzing::sse(data));
