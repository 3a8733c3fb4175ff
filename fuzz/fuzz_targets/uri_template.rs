//! URI templates: any template, matched against any URI.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolwire_server::fuzzing::uri_template(data));
