//! Header values: decoding any value, the encode/decode round trip, and the `x-mcp-header`
//! walk over any input schema.
#![no_main]

use toolwire_protocol::headers::{decode_value, encode_value, header_params};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decode_value(text);
    let encoded = encode_value(text);
    assert!(
        encoded.bytes().all(|b| (b' '..=b'~').contains(&b)),
        "{encoded:?}"
    );
    assert_eq!(decode_value(&encoded).as_deref(), Ok(text), "{encoded:?}");
    if let Ok(serde_json::Value::Object(schema)) = serde_json::from_str(text) {
        if let Ok(params) = header_params(&schema) {
            let arguments = serde_json::Value::Object(schema.clone());
            for p in params {
                if let Some(value) = p.value_in(&arguments) {
                    if let Some(rendered) = p.render(value) {
                        // What a client sends for a value, the server finds equal to it (H-15).
                        let sent = encode_value(&rendered);
                        let received = decode_value(&sent).expect("decodes");
                        assert!(p.matches(&received, value), "{rendered:?} against {value}");
                    }
                }
            }
        }
    }
});
