//! Finding a protected server's authorization server, against a real one: the npm package
//! `oidc-provider` (installed by `scripts/oidc`) guarding a Toolwire server on 127.0.0.1. The
//! server's 401 challenge leads to its Protected Resource Metadata, which names the provider,
//! whose metadata is found by RFC 8414 or, when that is missing, by OpenID discovery.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use toolwire_client::auth::{self, DiscoveryError, discovery};
use toolwire_server::http::{HttpConfig, OAuth};
use toolwire_server::{RequestContext, Server, Tool};

/// A running oidc-provider; it exits when its stdin closes (with the test process).
struct Provider {
    _child: Child,
    issuer: String,
}

impl Provider {
    fn start(env: &[(&str, &str)]) -> Provider {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/oidc");
        let path = Command::new("bash")
            .args([script, "path"])
            .output()
            .unwrap();
        assert!(
            path.status.success(),
            "{}",
            String::from_utf8_lossy(&path.stderr)
        );
        let text = String::from_utf8(path.stdout).unwrap();
        let mut lines = text.lines();
        let (node, provider) = (lines.next().unwrap(), lines.next().unwrap());
        let mut child = Command::new(node)
            .args([provider, "0", "--watch-stdin"])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Provider {
            issuer: ready["issuer"].as_str().unwrap().to_owned(),
            _child: child,
        }
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A Toolwire server guarded by `issuer`; its URL.
async fn guarded(issuer: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Server::builder("guarded", "1")
        .tool(Tool::new("hello", |_: NoArgs, _: RequestContext| async {
            "hello"
        }))
        .build()
        .unwrap();
    let oauth = OAuth::new(issuer, url.clone()).scopes_supported(["tools:read", "math"]);
    tokio::spawn(toolwire_server::http::serve(
        server,
        listener,
        HttpConfig::default().oauth(oauth),
    ));
    url
}

/// The server's answer to a request without a token: its status and challenge.
async fn challenged(url: &str) -> (u16, Option<auth::Challenge>) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let reply = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let headers: Vec<String> = reply
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    (
        reply.status().as_u16(),
        auth::challenge::bearer(headers.iter().map(String::as_str)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_leads_to_the_real_authorization_server() {
    let provider = Provider::start(&[]);
    let url = guarded(&provider.issuer).await;
    let (status, challenge) = challenged(&url).await;
    assert_eq!(status, 401);
    let challenge = challenge.expect("a Bearer challenge");
    assert!(challenge.resource_metadata().is_some(), "{challenge:?}");

    let http = discovery::metadata_client();
    let found = auth::discover(&http, &url, Some(&challenge)).await.unwrap();
    assert_eq!(found.resource.resource, url);
    assert_eq!(found.resource.authorization_servers.len(), 1);
    assert_eq!(found.resource.authorization_servers[0], provider.issuer);
    assert_eq!(found.resource.scopes_supported, ["tools:read", "math"]);
    let server = &found.authorization_server;
    assert_eq!(server.issuer, provider.issuer);
    assert_eq!(
        server.authorization_endpoint.as_deref(),
        Some(format!("{}/auth", provider.issuer).as_str())
    );
    assert_eq!(
        server.token_endpoint.as_deref(),
        Some(format!("{}/token", provider.issuer).as_str())
    );
    assert!(server.registration_endpoint.is_some());
    assert!(server.supports_s256(), "{server:?}");

    // Without the header's hint, the well-known URIs find the same metadata.
    let again = auth::discover(&http, &url, None).await.unwrap();
    assert_eq!(again.resource, found.resource);
    assert!(
        again
            .metadata_url
            .ends_with("/.well-known/oauth-protected-resource/mcp")
    );

    // Metadata for another server is refused before anything reaches its issuer.
    let other = guarded(&provider.issuer).await;
    let (_, theirs) = challenged(&other).await;
    match auth::discover(&http, &url, theirs.as_ref()).await {
        Err(DiscoveryError::WrongResource { resource, .. }) => assert_eq!(resource, other),
        wrong => panic!("{wrong:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rfc_8414_the_openid_configuration_is_used() {
    let provider = Provider::start(&[("OIDC_RFC8414", "0")]);
    let http = discovery::metadata_client();
    let metadata = discovery::server_metadata(&http, &provider.issuer)
        .await
        .unwrap();
    assert_eq!(metadata.issuer, provider.issuer);
    // An issuer the documents do not name is refused, whatever they hold.
    let wrong = format!("{}/", provider.issuer);
    match discovery::server_metadata(&http, &wrong).await {
        Err(DiscoveryError::NoServerMetadata { tried, .. }) => {
            assert!(
                tried.contains("(refused)") || tried.contains("HTTP 404"),
                "{tried}"
            )
        }
        right => panic!("{right:?}"),
    }
}
