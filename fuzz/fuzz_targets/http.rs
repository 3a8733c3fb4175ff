//! A POST through the HTTP router: the input's first lines are header lines (`name: value`),
//! the rest after an empty line is the body. Host/Origin, content type, Accept, the MCP
//! headers and `Mcp-Param-*` mirrored against the body.
#![no_main]

use std::sync::OnceLock;

use tower::ServiceExt as _;

fn router() -> axum::Router {
    static ROUTER: OnceLock<axum::Router> = OnceLock::new();
    ROUTER
        .get_or_init(|| {
            let config = toolwire_server::http::HttpConfig::default().no_flood_limit("fuzzing");
            toolwire_server::http::router(toolwire_fuzz::server().clone(), config)
        })
        .clone()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (&data[..0], data),
    };
    let mut request = http::Request::post("/mcp").header("host", "127.0.0.1");
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(&line[..colon]),
            http::HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        request = request.header(name, value);
    }
    let Ok(request) = request.body(axum::body::Body::from(body.to_vec())) else {
        return;
    };
    let response = toolwire_fuzz::runtime()
        .block_on(router().oneshot(request))
        .expect("the router never fails");
    let status = response.status().as_u16();
    assert!(status != 500, "a request made the server fail: {status}");
});
