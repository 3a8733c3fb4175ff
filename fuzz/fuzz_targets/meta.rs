//! `_meta`: the required keys, capabilities, clientInfo, log level and progress token, read
//! the usual way and in the one pass of a `tools/call`; both readings agree.
#![no_main]

use serde_json::value::RawValue;
use toolwire_protocol::{ReadMeta, RequestMeta};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(raw) = serde_json::from_str::<&RawValue>(text) else {
        return;
    };
    let params = format!(r#"{{"_meta":{}}}"#, raw.get());
    let params: &RawValue = serde_json::from_str(&params).expect("an object around valid JSON");
    let usual = RequestMeta::from_params(Some(params));
    let one_pass = serde_json::from_str::<ReadMeta>(raw.get())
        .ok()
        .and_then(|m| RequestMeta::try_from(m).ok());
    if let Some(meta) = one_pass {
        assert_eq!(
            usual.ok(),
            Some(meta),
            "the one-pass reading accepted what the usual one did not read the same"
        );
    }
});
