//! Finding a protected server's authorization server, against a real one: the npm package
//! `oidc-provider` (installed by `scripts/oidc`) guarding a Toolwire server on 127.0.0.1. The
//! server's 401 challenge leads to its Protected Resource Metadata, which names the provider,
//! whose metadata is found by RFC 8414 or, when that is missing, by OpenID discovery. The
//! provider is on plain http at another origin than the server, so every client here allows
//! plain http for development (`AuthHttp::allow_insecure_http`, `OAuth::allow_insecure_http`);
//! without it the same discovery is refused.

#[path = "support/oidc.rs"]
mod oidc;
use oidc::{Browser, Provider};

use serde_json::json;
use toolwire_client::auth::{self, AuthHttp, DiscoveryError, discovery};
use toolwire_server::http::{HttpConfig, OAuth};
use toolwire_server::{RequestContext, Server, Tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A server with the one tool `hello`, named `name`.
fn hello_server(name: &str) -> toolwire_server::ServerBuilder {
    Server::builder(name, "1").tool(Tool::new("hello", |_: NoArgs, _: RequestContext| async {
        "hello"
    }))
}

/// `server` on 127.0.0.1, guarded by the OAuth settings `guard` makes for its URL; its URL.
async fn serve_guarded(server: Server, guard: impl FnOnce(&str) -> OAuth) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(toolwire_server::http::serve(
        server,
        listener,
        HttpConfig::default().oauth(guard(&url)),
    ));
    url
}

/// A Toolwire server guarded by `issuer`; its URL.
async fn guarded(issuer: &str) -> String {
    serve_guarded(hello_server("guarded").build().unwrap(), |url| {
        OAuth::new(issuer, url).scopes_supported(["tools:read", "math"])
    })
    .await
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

    // The provider is on plain http at another origin than the server: refused, unless plain
    // http is allowed for development.
    match auth::discover(&AuthHttp::new(&url), Some(&challenge)).await {
        Err(DiscoveryError::Refused { error, .. }) => {
            let message = error.to_string();
            assert!(message.contains(&provider.issuer), "{message}");
            assert!(message.contains("--insecure-oauth-http"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let http = AuthHttp::new(&url).allow_insecure_http(true);
    let found = auth::discover(&http, Some(&challenge)).await.unwrap();
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
    let again = auth::discover(&http, None).await.unwrap();
    assert_eq!(again.resource, found.resource);
    assert!(
        again
            .metadata_url
            .ends_with("/.well-known/oauth-protected-resource/mcp")
    );

    // Metadata for another server is refused before anything reaches its issuer.
    let other = guarded(&provider.issuer).await;
    let (_, theirs) = challenged(&other).await;
    match auth::discover(&http, theirs.as_ref()).await {
        Err(DiscoveryError::WrongResource { resource, .. }) => assert_eq!(resource, other),
        wrong => panic!("{wrong:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rfc_8414_the_openid_configuration_is_used() {
    let provider = Provider::start(&[("OIDC_RFC8414", "0")]);
    let http = AuthHttp::new("https://mcp.example.com/mcp").allow_insecure_http(true);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_authorized_refreshed_and_the_guarded_server_opens() {
    use toolwire_client::auth::request::{self, Pkce};
    use toolwire_client::auth::token::{self, TokenError};
    let provider = Provider::start(&[]);
    let url = guarded(&provider.issuer).await;
    let (_, challenge) = challenged(&url).await;
    let http = AuthHttp::new(&url).allow_insecure_http(true);
    let found = auth::discover(&http, challenge.as_ref()).await.unwrap();
    let server = &found.authorization_server;
    let resource = &found.resource.resource;

    // A client identity by dynamic registration (RFC 7591), for a loopback redirect.
    let redirect_uri = "http://127.0.0.1:45999/callback";
    let client = token::register(&http, server, "toolwire test", &[redirect_uri.to_owned()])
        .await
        .unwrap();
    assert_eq!(client.issuer, provider.issuer);

    // One authorization, as a browser would go through it; the code and state read back.
    let authorize = |pkce: &Pkce, state: &str| {
        let scope = request::initial_scope(challenge.as_ref(), &found.resource);
        assert_eq!(scope.as_deref(), Some("tools:read math"));
        let asked = request::AuthorizationRequest {
            client_id: &client.client_id,
            redirect_uri,
            scope: scope.as_deref(),
            state,
            pkce,
        };
        request::authorization_url(server, &found.resource, &asked).unwrap()
    };
    let (pkce, state) = (Pkce::new(), request::random_token());
    let redirect = Browser::default()
        .sign_in(&authorize(&pkce, &state), &provider.issuer, redirect_uri)
        .await;
    assert!(request::read_redirect(&redirect, server, "forged").is_err());
    let code = request::read_redirect(&redirect, server, &state).unwrap();
    // The provider checks the verifier against the challenge: another one is refused.
    let other = Pkce::new();
    let grant = token::CodeGrant {
        code: &code,
        redirect_uri,
        verifier: &other.verifier,
        resource,
    };
    let wrong = token::exchange_code(&http, server, &client, grant).await;
    assert!(
        matches!(&wrong, Err(TokenError::Refused { error, .. }) if error == "invalid_grant"),
        "{wrong:?}"
    );

    // The code was spent by the refused attempt: authorize again, with the right verifier,
    // and this time the browser's last hop lands on a loopback listener on a free port (a
    // native client's registered 127.0.0.1 redirect matches any port, RFC 8252 §7.3).
    let loopback = toolwire_client::auth::Loopback::bind().await.unwrap();
    let caught_uri = loopback.redirect_uri().to_owned();
    let (pkce, state) = (Pkce::new(), request::random_token());
    let expected = state.clone();
    let waiting = tokio::spawn(async move {
        loopback
            .wait(&expected, std::time::Duration::from_secs(20))
            .await
    });
    let asked = request::AuthorizationRequest {
        client_id: &client.client_id,
        redirect_uri: &caught_uri,
        scope: Some("tools:read math"),
        state: &state,
        pkce: &pkce,
    };
    let start = request::authorization_url(server, &found.resource, &asked).unwrap();
    let last_hop = Browser::default()
        .sign_in(&start, &provider.issuer, &caught_uri)
        .await;
    let page = reqwest::get(&last_hop).await.unwrap();
    assert_eq!(page.status(), 200);
    let redirect = waiting.await.unwrap().unwrap();
    assert_eq!(redirect, last_hop);
    let code = request::read_redirect(&redirect, server, &state).unwrap();
    let redirect_uri = caught_uri.as_str();
    let grant = token::CodeGrant {
        code: &code,
        redirect_uri,
        verifier: &pkce.verifier,
        resource,
    };
    let tokens = token::exchange_code(&http, server, &client, grant)
        .await
        .unwrap();
    let open = |access: String| {
        let url = url.clone();
        async move {
            let client = toolwire_client::ClientBuilder::new("auth-test", "1")
                .bearer_token(access)
                .http(&url)
                .unwrap();
            client.list_tools().await.map(|t| t[0].name.clone())
        }
    };
    assert_eq!(open(tokens.access_token.clone()).await.unwrap(), "hello");

    // A refresh token was issued (the registration asked for the grant): it gives a new
    // access token that opens the server too.
    let refresh_token = tokens.refresh_token.clone().expect("a refresh token");
    let refreshed = token::refresh(&http, server, &client, &refresh_token, resource)
        .await
        .unwrap();
    assert_ne!(refreshed.access_token, tokens.access_token);
    assert_eq!(open(refreshed.access_token).await.unwrap(), "hello");

    // A machine client with the provider's pre-registered confidential identity.
    let machine = toolwire_client::auth::ClientIdentity::new(
        provider.issuer.clone(),
        "rs-test",
        Some("rs-secret".into()),
    );
    let machine_tokens =
        token::client_credentials(&http, server, &machine, resource, Some("tools:read"))
            .await
            .unwrap();
    assert_eq!(open(machine_tokens.access_token).await.unwrap(), "hello");
}

fn text(result: &toolwire_client::protocol::CallToolResult) -> String {
    match &result.content[0] {
        toolwire_client::protocol::ContentBlock::Text(t) => t.text.clone(),
        other => panic!("{other:?}"),
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Pair {
    a: i64,
    b: i64,
}

/// The whole flow inside a client, against the real provider and its real login and consent
/// pages: a 401 leads to registration and an authorization (signed in and consented in the
/// "browser", the redirect caught on a loopback port); a tool that needs another scope gets a
/// 403 `insufficient_scope` and a step-up to the union of scopes; an expired token is
/// refreshed without asking again; and a second client with the same credential file uses the
/// kept token without asking at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_authorizes_steps_up_refreshes_and_remembers() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolwire_client::auth::{CredentialStore, FileStore, LoopbackAuthorizer};

    const TTL: u64 = 4;
    let provider = Provider::start(&[("OIDC_INTERACTIONS", "pages"), ("OIDC_TOKEN_TTL", "4")]);
    let server = hello_server("guarded")
        .tool(
            Tool::new("add", |p: Pair, _: RequestContext| async move {
                (p.a + p.b).to_string()
            })
            .scopes(["math"]),
        )
        .build()
        .unwrap();
    let url = serve_guarded(server, |url| {
        OAuth::new(&provider.issuer, url)
            .scopes_supported(["tools:read", "math"])
            .required_scopes(["tools:read"])
            // Expired means expired (the default allows a minute of clock skew).
            .leeway(std::time::Duration::ZERO)
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials.json");
    let asked = Arc::new(AtomicUsize::new(0));
    let pages = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let client_for = |store: Arc<FileStore>| {
        let (asked, pages, issuer) = (asked.clone(), pages.clone(), provider.issuer.clone());
        let authorizer = LoopbackAuthorizer::new(move |start: &str| {
            asked.fetch_add(1, Ordering::SeqCst);
            let (start, issuer, pages) = (start.to_owned(), issuer.clone(), pages.clone());
            tokio::spawn(async move {
                let mut browser = Browser::default();
                // The browser's last hop reaches the client's loopback listener.
                let status = browser.authorize(&start, &issuer).await;
                pages.lock().unwrap().extend(browser.pages);
                assert_eq!(status, 200);
            });
        })
        .timeout(std::time::Duration::from_secs(30));
        toolwire_client::ClientBuilder::new("oauth-test", "1")
            .oauth(
                toolwire_client::auth::OAuth::new()
                    .allow_insecure_http()
                    .client_name("toolwire oauth test")
                    .store(store)
                    .authorizer(Arc::new(authorizer)),
            )
            .http(&url)
            .unwrap()
    };
    let store = Arc::new(FileStore::new(&file));
    let client = client_for(store.clone());

    // 401: registered, signed in, consented; the listed tools come back (those this token
    // may call: `add` needs `math`).
    let tools = client.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["hello"]);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    {
        let pages = pages.lock().unwrap();
        assert!(
            pages.iter().any(|p| p.contains("name=\"password\"")),
            "a login page"
        );
        assert!(
            pages.iter().any(|p| p.contains("value=\"consent\"")),
            "a consent page"
        );
    }
    let identity = store
        .identity(&provider.issuer)
        .unwrap()
        .expect("registered");
    let first = store.tokens(&provider.issuer, &url).unwrap().expect("kept");
    let granted = first.tokens.scope.clone().unwrap_or_default();
    assert!(granted.split(' ').any(|s| s == "tools:read"), "{granted}");
    assert!(!granted.split(' ').any(|s| s == "math"), "{granted}");
    assert!(first.tokens.refresh_token.is_some());

    // `add` needs `math`: 403 insufficient_scope, a second authorization for the union.
    let sum = client
        .call_tool("add", serde_json::json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(!sum.is_error(), "{sum:?}");
    assert_eq!(text(&sum), "5");
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    let stepped = store.tokens(&provider.issuer, &url).unwrap().unwrap();
    let granted = stepped.tokens.scope.clone().unwrap_or_default();
    for scope in ["tools:read", "math"] {
        assert!(granted.split(' ').any(|s| s == scope), "{granted}");
    }
    // Still the same registration.
    assert_eq!(store.identity(&provider.issuer).unwrap(), Some(identity));

    // The access token expires: the server answers 401 invalid_token, the refresh token gets
    // a new one, nobody is asked.
    tokio::time::sleep(std::time::Duration::from_secs(TTL + 2)).await;
    let hello = client
        .call_tool("hello", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(text(&hello), "hello");
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    let refreshed = store.tokens(&provider.issuer, &url).unwrap().unwrap();
    assert_ne!(refreshed.tokens.access_token, stepped.tokens.access_token);

    // The file is the user's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // Another run with the same file: the kept token is used, nobody is asked.
    let again = client_for(Arc::new(FileStore::new(&file)));
    let sum = again
        .call_tool("add", serde_json::json!({"a": 20, "b": 22}))
        .await
        .unwrap();
    assert_eq!(text(&sum), "42");
    assert_eq!(asked.load(Ordering::SeqCst), 2);
}

/// A server that refuses every token its authorization server issues (here: it accepts only
/// ES256 signatures, and the provider signs with RS256): the person signs in once, the fresh
/// token is refused, and the client stops with an error that says so instead of asking again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_at_once_is_not_asked_for_again() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolwire_client::auth::{AuthError, LoopbackAuthorizer};

    let provider = Provider::start(&[]);
    let url = serve_guarded(hello_server("picky").build().unwrap(), |url| {
        OAuth::new(&provider.issuer, url)
            .scopes_supported(["tools:read"])
            .algorithms([jsonwebtoken::Algorithm::ES256])
    })
    .await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let issuer = provider.issuer.clone();
    let authorizer = LoopbackAuthorizer::new(move |start: &str| {
        counter.fetch_add(1, Ordering::SeqCst);
        let (start, issuer) = (start.to_owned(), issuer.clone());
        tokio::spawn(async move {
            Browser::default().authorize(&start, &issuer).await;
        });
    });
    let client = toolwire_client::ClientBuilder::new("oauth-test", "1")
        .oauth(
            toolwire_client::auth::OAuth::new()
                .allow_insecure_http()
                .authorizer(Arc::new(authorizer)),
        )
        .http(&url)
        .unwrap();
    match client.list_tools().await {
        Err(toolwire_client::Error::Authorization(AuthError::Refused { issuer, .. })) => {
            assert_eq!(issuer, provider.issuer)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}
