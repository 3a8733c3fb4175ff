//! Tests of the HTTP checks, table-style.

use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use serde_json::json;
use toolwire_protocol::HEADER_MISMATCH;
use toolwire_protocol::headers::{HeaderParam, ParamKind};

use super::checks::{self, Accept};
use super::{HttpConfig, status_for};

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn host_names() {
    let cases = [
        ("localhost", Some("localhost")),
        ("LocalHost:8080", Some("LocalHost")),
        ("127.0.0.1:1", Some("127.0.0.1")),
        ("[::1]:3000", Some("[::1]")),
        ("[::1]", Some("[::1]")),
        ("evil.example.com", Some("evil.example.com")),
        ("[::1].evil.com", None),
        ("[::1]:80x", None),
        ("localhost:", None),
        ("::1", None),
        ("", None),
    ];
    for (authority, want) in cases {
        assert_eq!(checks::host_name(authority), want, "{authority:?}");
    }
    for (entry, want) in [
        ("Example.COM:8080", "example.com"),
        ("::1", "[::1]"),
        ("[::1]:9", "[::1]"),
        ("h", "h"),
    ] {
        assert_eq!(checks::normalize_host(entry), want);
    }
}

#[test]
fn host_and_origin_allowlist() {
    let config = HttpConfig::default();
    let origin_form: Uri = "/mcp".parse().unwrap();
    let check = |config: &HttpConfig, uri: &Uri, h: &HeaderMap| {
        checks::host_and_origin(config, uri, h)
            .err()
            .map(|r| r.status)
    };
    let ok = [
        headers(&[("host", "127.0.0.1:5000")]),
        headers(&[("host", "localhost:1"), ("origin", "http://localhost:1")]),
        headers(&[("host", "[::1]:9"), ("origin", "https://[::1]:9")]),
        headers(&[("host", "LOCALHOST")]),
    ];
    for h in ok {
        assert_eq!(check(&config, &origin_form, &h), None, "{h:?}");
    }
    let forbidden = [
        headers(&[]),
        headers(&[("host", "evil.example.com")]),
        headers(&[("host", "localhost.evil.com:80")]),
        headers(&[("host", "[::1].evil.com")]),
        headers(&[("host", "localhost"), ("host", "evil.com")]),
        headers(&[
            ("host", "localhost:1"),
            ("origin", "http://evil.example.com"),
        ]),
        headers(&[("host", "localhost:1"), ("origin", "null")]),
        headers(&[
            ("host", "localhost:1"),
            ("origin", "http://localhost:1/path"),
        ]),
        headers(&[
            ("host", "localhost:1"),
            ("origin", "http://localhost:1"),
            ("origin", "http://evil.com"),
        ]),
    ];
    for h in forbidden {
        assert_eq!(
            check(&config, &origin_form, &h),
            Some(StatusCode::FORBIDDEN),
            "{h:?}"
        );
    }
    let absolute: Uri = "http://evil.com/mcp".parse().unwrap();
    assert_eq!(
        check(&config, &absolute, &headers(&[("host", "localhost")])),
        Some(StatusCode::FORBIDDEN)
    );

    let custom = HttpConfig::default()
        .allow_host("MCP.example.com:8443")
        .allow_origin("https://app.example.com");
    let h = headers(&[
        ("host", "mcp.example.com"),
        ("origin", "https://app.example.com"),
    ]);
    assert_eq!(check(&custom, &origin_form, &h), None);
    let any_host = HttpConfig::default().allow_any_host();
    assert_eq!(
        check(&any_host, &origin_form, &headers(&[("host", "x")])),
        None
    );
    let foreign_origin = headers(&[("host", "x"), ("origin", "http://evil.com")]);
    assert_eq!(
        check(&any_host, &origin_form, &foreign_origin),
        Some(StatusCode::FORBIDDEN),
        "Origin is still checked"
    );
    assert_eq!(
        check(&any_host.allow_any_origin(), &origin_form, &foreign_origin),
        None
    );
}

#[test]
fn accept_header() {
    let parse = |v: Option<&str>| {
        let h = v.map_or_else(HeaderMap::new, |v| headers(&[("accept", v)]));
        Accept::parse(&h).map_err(|r| r.status)
    };
    let both = Accept {
        json: true,
        sse: true,
    };
    assert_eq!(parse(None), Ok(both));
    assert_eq!(parse(Some("application/json, text/event-stream")), Ok(both));
    assert_eq!(parse(Some("*/*")), Ok(both));
    assert_eq!(
        parse(Some("application/json")),
        Ok(Accept {
            json: true,
            sse: false
        })
    );
    assert_eq!(
        parse(Some("text/event-stream;q=1")),
        Ok(Accept {
            json: false,
            sse: true
        })
    );
    assert_eq!(
        parse(Some("application/json, text/event-stream;q=0")),
        Ok(Accept {
            json: true,
            sse: false
        })
    );
    assert_eq!(parse(Some("text/html")), Err(StatusCode::NOT_ACCEPTABLE));
    // Case, spaces around ranges and parameters, wildcards and a zero written as 0.0.
    assert_eq!(
        parse(Some(" APPLICATION/JSON ; q=0.0 , Text/* ;level=1")),
        Ok(Accept {
            json: false,
            sse: true
        })
    );
    assert_eq!(
        parse(Some("application/*;q=0.5")),
        Ok(Accept {
            json: true,
            sse: false
        })
    );
    assert_eq!(parse(Some("*/*; q=0")), Err(StatusCode::NOT_ACCEPTABLE));
    // Repeated headers are read together.
    let mut two = headers(&[("accept", "application/json")]);
    two.append("accept", HeaderValue::from_static("text/event-stream"));
    assert_eq!(Accept::parse(&two).map_err(|r| r.status), Ok(both));
}

#[test]
fn mcp_headers() {
    let h = headers(&[("mcp-method", " tools/list "), ("mcp-name", "a\tb")]);
    assert!(checks::exact_header(&h, &checks::METHOD, "Mcp-Method", "tools/list").is_ok());
    assert!(checks::exact_header(&h, &checks::METHOD, "Mcp-Method", "tools/call").is_err());
    assert!(
        checks::exact_header(&h, &checks::PROTOCOL_VERSION, "MCP-Protocol-Version", "x").is_err(),
        "missing"
    );
    assert!(
        checks::name_header(&h, "a\tb").is_err(),
        "control characters must be base64-encoded"
    );
    let h = headers(&[("mcp-name", "=?base64?YQliCg==?=")]);
    assert!(checks::name_header(&h, "a\tb\n").is_ok());
}

#[test]
fn param_headers() {
    let param = |name: &str, key: &str, kind| {
        (
            format!("mcp-param-{}", name.to_ascii_lowercase()),
            HeaderParam {
                name: name.into(),
                path: vec![key.into()],
                kind,
            },
        )
    };
    let params = [
        param("Region", "region", ParamKind::String),
        param("Priority", "priority", ParamKind::Integer),
    ];
    let args = json!({"region": "Hello", "priority": 42});
    let check = |pairs: &[(&'static str, &str)], args: &serde_json::Value| {
        checks::param_headers(&headers(pairs), &params, args)
    };
    assert!(
        check(
            &[("mcp-param-region", "Hello"), ("mcp-param-priority", "42")],
            &args
        )
        .is_ok()
    );
    assert!(
        check(
            &[
                ("Mcp-Param-Region", "=?base64?SGVsbG8=?="),
                ("MCP-PARAM-PRIORITY", " 042 ")
            ],
            &args
        )
        .is_ok()
    );
    assert!(
        check(&[], &json!({"region": null})).is_ok(),
        "null expects no header"
    );
    assert!(
        check(&[("mcp-param-unrelated", "x")], &json!({})).is_ok(),
        "undeclared headers are not ours to judge"
    );
    let bad: [&[(&'static str, &str)]; 8] = [
        &[("mcp-param-priority", "42")],
        &[
            ("mcp-param-region", "Goodbye"),
            ("mcp-param-priority", "42"),
        ],
        &[
            ("mcp-param-region", "=?base64?SGVsbG8?="),
            ("mcp-param-priority", "42"),
        ],
        &[
            ("mcp-param-region", "=?base64?SGVs!!!bG8=?="),
            ("mcp-param-priority", "42"),
        ],
        &[("mcp-param-region", "Hello"), ("mcp-param-priority", "43")],
        &[
            ("mcp-param-region", "Hello"),
            ("mcp-param-region", "Hello"),
            ("mcp-param-priority", "42"),
        ],
        &[
            ("mcp-param-region", "Hel\tlo"),
            ("mcp-param-priority", "42"),
        ],
        &[
            ("mcp-param-region", "Hello"),
            ("mcp-param-priority", "42"),
            ("mcp-param-priority", "42"),
        ],
    ];
    for pairs in bad {
        let e = check(pairs, &args).expect_err(&format!("{pairs:?}"));
        assert_eq!(e.code, HEADER_MISMATCH, "{pairs:?}");
    }
    let absent = check(&[("mcp-param-priority", "42")], &json!({"region": "Hello"}));
    assert!(
        absent.is_err(),
        "a header for an absent argument is refused"
    );
}

#[test]
fn statuses() {
    assert_eq!(status_for(None), StatusCode::OK);
    assert_eq!(status_for(Some(-32601)), StatusCode::NOT_FOUND);
    for code in [-32700, -32600, -32020, -32021, -32022] {
        assert_eq!(status_for(Some(code)), StatusCode::BAD_REQUEST);
    }
    assert_eq!(
        status_for(Some(toolwire_protocol::INVALID_PARAMS)),
        StatusCode::OK
    );
    assert_eq!(status_for(Some(-32603)), StatusCode::OK);
}

#[test]
fn a_post_naming_a_session_is_legacy_unless_it_carries_a_2026_meta() {
    let claims = |version: &str, body: &str| {
        let h = headers(&[("mcp-session-id", "s-1"), ("mcp-protocol-version", version)]);
        let raw: toolwire_protocol::RawMessage<'_> = serde_json::from_str(body).unwrap();
        super::legacy::claims(&h, &raw)
    };
    let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let call = |params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
    };
    // No `_meta` in the text: legacy without reading the params for one.
    assert!(claims(
        "2025-11-25",
        &call(r#"{"name":"echo","arguments":{"m":"_meta"}}"#)
    ));
    assert!(claims(
        "2025-11-25",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
    ));
    // A 2026-07-28 `_meta`, written plainly or with an escape, makes it a 2026-07-28 request
    // whatever its headers say.
    assert!(!claims(
        "2025-11-25",
        &call(&format!(r#"{{"name":"echo","_meta":{meta}}}"#))
    ));
    assert!(!claims(
        "2025-11-25",
        &call(&format!(r#"{{"name":"echo","\u005fmeta":{meta}}}"#))
    ));
    // A `_meta` without the required keys is not a 2026-07-28 one.
    assert!(claims(
        "2025-11-25",
        &call(r#"{"name":"echo","_meta":{"progressToken":1}}"#)
    ));
    // A 2026-07-28 version header is never legacy.
    assert!(!claims("2026-07-28", &call(r#"{"name":"echo"}"#)));
}
