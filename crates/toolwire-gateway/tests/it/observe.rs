//! The gateway's metrics and readiness as an operator scrapes them: each upstream's state in
//! `toolwire_upstream_up` and `/readyz`, calls made upstream timed by upstream and tool, and a
//! call the rules refuse counted as `policy`.

use serde_json::json;
use toolwire_gateway::GatewayOptions;
use toolwire_host::HostOptions;
use toolwire_server::Server;
use toolwire_server::observe::{Metrics, admin_router};

use crate::gateway::{Allow, gateway_on, shout, upstream};
use crate::support::{Served, client};

/// A loopback URL where nothing listens (a port bound, then released).
fn nowhere() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/mcp")
}

/// The admin endpoints of `server` on a loopback port of their own: `GET path` there.
async fn admin_get(server: &Server, path: &str) -> (u16, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admin = tokio::spawn(axum::serve(listener, admin_router(server.clone())).into_future());
    let response = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let answer = (response.status().as_u16(), response.text().await.unwrap());
    admin.abort();
    answer
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_fails_is_down_in_metrics_and_degrades_readiness() {
    let words = Served::start(upstream("words", vec![shout("Shouts.")]), None).await;
    let down = nowhere();
    let downstream = Server::builder("gateway", "1").metrics(Metrics::new());
    let (gateway, served) = gateway_on(
        &[("words", "w", &words.url), ("gone", "g", &down)],
        downstream,
        HostOptions::new(Allow),
        GatewayOptions::new(),
    )
    .await;
    let caller = client(&served.url);
    let result = caller
        .call_tool("w__shout", json!({"text": "hi"}))
        .await
        .unwrap();
    assert!(!result.is_error(), "{result:?}");

    let server = gateway.server();
    let (status, text) = admin_get(server, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&text, r#"toolwire_upstream_up{upstream="words"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"toolwire_upstream_up{upstream="gone"}"#),
        Some(0.0),
        "{text}"
    );
    let timed = r#"mcp_client_operation_duration_seconds_count{error_type="",gen_ai_tool_name="w__shout",mcp_method_name="tools/call",upstream="words"}"#;
    assert_eq!(sample(&text, timed), Some(1.0), "{text}");

    let (status, body) = admin_get(server, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["degraded"][0]["part"], "upstream:gone", "{body}");
    assert!(
        body["degraded"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("it cannot be reached or listed"),
        "{body}"
    );

    // With the only upstream that served gone too, nothing works: not ready.
    words.stop().await;
    let start = std::time::Instant::now();
    loop {
        let (status, body) = admin_get(server, "/readyz").await;
        if status == 503 {
            assert!(body.contains(r#""part":"upstream:words""#), "{body}");
            break;
        }
        assert!(
            start.elapsed() < crate::support::DEADLINE,
            "still ready: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    gateway.close().await;
    served.stop().await;
}
