//! The OAuth flow against a hostile MCP server on 127.0.0.1, with no real authorization server:
//! its challenge, its Protected Resource Metadata and its authorization server's metadata point
//! the client at another local listener (a stand-in for a cloud metadata service, which holds
//! secrets), at link-local addresses and at other schemes. The client sends nothing there,
//! opens nothing there, follows no redirect there, and no byte of any answer reaches its
//! errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolwire_client::ClientBuilder;
use toolwire_client::auth::{Authorizer, AuthorizerError, AuthorizerFuture, OAuth};

/// In every body the listeners here send: an error that contains it repeats an answer.
const SECRET: &str = "SECRET-wJalrXUtnFEMI";

/// What a [`Site`] answers at one path.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Answer {
    fn json(body: Value) -> Answer {
        Answer {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
        }
    }
}

/// A scripted HTTP listener on 127.0.0.1: answers by path, records every path asked for.
/// Unscripted paths get a 404 whose body holds the secret.
#[derive(Clone)]
struct Site {
    /// `http://127.0.0.1:PORT`.
    origin: String,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Site {
    async fn start() -> Site {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let site = Site {
            origin: format!("http://{}", listener.local_addr().unwrap()),
            answers: Arc::default(),
            seen: Arc::default(),
        };
        let serving = site.clone();
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let site = serving.clone();
            async move { site.answer(&uri) }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        site
    }

    fn answer(&self, uri: &Uri) -> Response {
        let path = uri.path().to_owned();
        self.seen.lock().unwrap().push(path.clone());
        let answer = self.answers.lock().unwrap().get(&path).cloned();
        let answer = answer.unwrap_or(Answer {
            status: 404,
            headers: Vec::new(),
            body: format!("{SECRET}-404"),
        });
        let mut response =
            (StatusCode::from_u16(answer.status).unwrap(), answer.body).into_response();
        for (name, value) in answer.headers {
            response.headers_mut().insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(&value).unwrap(),
            );
        }
        response
    }

    fn script(&self, path: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(path.to_owned(), answer);
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// A stand-in for a cloud metadata service: any request counts, every answer is a secret.
struct Secret {
    origin: String,
    hits: Arc<AtomicUsize>,
}

impl Secret {
    async fn start() -> Secret {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({
                    "Code": "Success",
                    "AccessKeyId": format!("{SECRET}-key"),
                    "SecretAccessKey": format!("{SECRET}-secret"),
                    "resource": format!("{SECRET}-resource"),
                    "issuer": format!("{SECRET}-issuer"),
                    "error": format!("{SECRET}-error"),
                }))
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        Secret { origin, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// An authorizer that records the URLs it is asked to open and opens none.
#[derive(Default, Clone)]
struct Recording(Arc<Mutex<Vec<String>>>);

impl Recording {
    fn opened(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Authorizer for Recording {
    fn redirect_uri(&self) -> AuthorizerFuture<'_> {
        Box::pin(async { Ok("http://127.0.0.1:9/callback".to_owned()) })
    }

    fn authorize<'a>(&'a self, url: &'a str) -> AuthorizerFuture<'a> {
        self.0.lock().unwrap().push(url.to_owned());
        Box::pin(async { Err(AuthorizerError("nobody signs in in this test".into())) })
    }
}

/// A hostile MCP server: every POST to /mcp is refused with 401 and `challenge` (if any) as its
/// `WWW-Authenticate`.
async fn hostile(challenge: Option<String>) -> Site {
    let site = Site::start().await;
    let headers = challenge
        .map(|c| vec![("www-authenticate", c)])
        .unwrap_or_else(|| vec![("www-authenticate", "Bearer".to_owned())]);
    site.script(
        "/mcp",
        Answer {
            status: 401,
            headers,
            body: String::new(),
        },
    );
    site
}

/// Protected Resource Metadata for the server at `site`, naming `issuer`, served at its
/// well-known URI.
fn resource_metadata(site: &Site, issuer: &str) {
    site.script(
        "/.well-known/oauth-protected-resource/mcp",
        Answer::json(json!({
            "resource": format!("{}/mcp", site.origin),
            "authorization_servers": [issuer],
        })),
    );
}

/// Authorization server metadata for the issuer `site`'s origin, with `endpoints` over the
/// defaults (all at the site, S256 offered).
fn server_metadata(site: &Site, endpoints: Value) {
    let origin = &site.origin;
    let mut metadata = json!({
        "issuer": origin,
        "authorization_endpoint": format!("{origin}/authorize"),
        "token_endpoint": format!("{origin}/token"),
        "registration_endpoint": format!("{origin}/register"),
        "code_challenge_methods_supported": ["S256"],
    });
    for (name, value) in endpoints.as_object().unwrap() {
        metadata[name] = value.clone();
    }
    site.script(
        "/.well-known/oauth-authorization-server",
        Answer::json(metadata),
    );
}

/// Lists the tools of the server at `site` with `oauth`; the error it ends with, as a person
/// reads it.
async fn refused(site: &Site, oauth: OAuth) -> String {
    let client = ClientBuilder::new("hostile-test", "1")
        .timeout(Duration::from_secs(30))
        .oauth(oauth)
        .http(format!("{}/mcp", site.origin))
        .unwrap();
    let error = client
        .list_tools()
        .await
        .expect_err("nothing is authorized here");
    error.to_string()
}

/// The checks every case ends with: the secret listener was never asked, and no byte of any
/// answer is in the error.
#[track_caller]
fn clean(secret: &Secret, error: &str) {
    assert_eq!(secret.hits(), 0, "the secret listener was asked: {error}");
    assert!(
        !error.contains(SECRET),
        "an answer reached the error: {error}"
    );
}

/// The challenge's `resource_metadata` may not send the client to another origin over plain
/// http, to a link-local address (written any way), or to another scheme.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_cannot_send_the_client_to_metadata_elsewhere() {
    let secret = Secret::start().await;
    let cases = [
        (
            format!(
                "{}/latest/meta-data/iam/security-credentials/admin",
                secret.origin
            ),
            "plain http",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "link-local",
        ),
        (
            "http://2852039166/latest/meta-data/".to_owned(),
            "link-local",
        ),
        (
            "http://[::ffff:169.254.169.254]/latest/".to_owned(),
            "link-local",
        ),
        ("https://[fe80::1]/metadata".to_owned(), "link-local"),
        ("file:///etc/passwd".to_owned(), "https"),
    ];
    for (url, why) in cases {
        let server = hostile(Some(format!("Bearer resource_metadata=\"{url}\""))).await;
        let error = refused(
            &server,
            OAuth::new().authorizer(Arc::new(Recording::default())),
        )
        .await;
        clean(&secret, &error);
        assert!(error.contains(why), "{url}: {error}");
        assert_eq!(server.seen(), ["/mcp"], "{url}: {error}");
    }
}

/// The resource metadata (at the server's own origin) may not name an authorization server
/// elsewhere over plain http, nor at a link-local address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_metadata_cannot_name_an_issuer_elsewhere_over_http() {
    let secret = Secret::start().await;
    for (issuer, why) in [
        (secret.origin.clone(), "plain http"),
        ("https://169.254.169.254".to_owned(), "link-local"),
        ("file:///etc".to_owned(), "https"),
    ] {
        let server = hostile(None).await;
        resource_metadata(&server, &issuer);
        let error = refused(
            &server,
            OAuth::new().authorizer(Arc::new(Recording::default())),
        )
        .await;
        clean(&secret, &error);
        assert!(error.contains(why), "{issuer}: {error}");
    }
}

/// The authorization server's registration and token endpoints may not point elsewhere over
/// plain http (nor link-local): nothing is registered or exchanged there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issuers_endpoints_cannot_point_elsewhere_over_http() {
    let secret = Secret::start().await;
    let elsewhere = |path: &str| json!(format!("{}{path}", secret.origin));
    for (endpoints, oauth) in [
        (
            json!({"registration_endpoint": elsewhere("/register")}),
            OAuth::new().authorizer(Arc::new(Recording::default())),
        ),
        (
            json!({"token_endpoint": elsewhere("/token")}),
            OAuth::new()
                .client(None, "machine", Some("s".into()))
                .client_credentials(),
        ),
        (
            json!({"token_endpoint": "http://[::ffff:a9fe:a9fe]/token"}),
            OAuth::new()
                .client(None, "machine", Some("s".into()))
                .client_credentials()
                .allow_insecure_http(),
        ),
    ] {
        let server = hostile(None).await;
        resource_metadata(&server, &server.origin);
        server_metadata(&server, endpoints.clone());
        let error = refused(&server, oauth).await;
        clean(&secret, &error);
        assert!(
            error.contains("plain http") || error.contains("link-local"),
            "{endpoints}: {error}"
        );
        for path in ["/register", "/token"] {
            assert!(
                !server.seen().iter().any(|p| p == path),
                "{endpoints}: {error}"
            );
        }
    }
}

/// Only an `https:` authorization endpoint, or `http:` on this machine, is handed to the
/// person's browser; anything else is refused before the authorizer is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_endpoint_is_opened_only_over_https_or_on_this_machine() {
    let secret = Secret::start().await;
    let configured = |recording: &Recording| {
        OAuth::new()
            .client(None, "public-client", None)
            .authorizer(Arc::new(recording.clone()))
    };
    for endpoint in [
        "file:///etc/passwd",
        "javascript:alert(document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "http://as.example.com/authorize",
        "https://accounts.example.com@evil.example/authorize",
        "https://169.254.169.254/authorize",
    ] {
        let server = hostile(None).await;
        resource_metadata(&server, &server.origin);
        server_metadata(&server, json!({"authorization_endpoint": endpoint}));
        let recording = Recording::default();
        let error = refused(&server, configured(&recording)).await;
        clean(&secret, &error);
        assert_eq!(
            recording.opened(),
            Vec::<String>::new(),
            "{endpoint}: {error}"
        );
        assert!(
            error.contains("authorization endpoint"),
            "{endpoint}: {error}"
        );
    }
    // The same flow does reach the person with an https endpoint, or one on this machine.
    for endpoint in [
        "https://as.example.com/authorize",
        "http://127.0.0.1:9/authorize",
        "http://localhost:9/authorize",
    ] {
        let server = hostile(None).await;
        resource_metadata(&server, &server.origin);
        server_metadata(&server, json!({"authorization_endpoint": endpoint}));
        let recording = Recording::default();
        let error = refused(&server, configured(&recording)).await;
        assert!(error.contains("nobody signs in"), "{endpoint}: {error}");
        let opened = recording.opened();
        assert_eq!(opened.len(), 1, "{endpoint}: {error}");
        assert!(opened[0].starts_with(&format!("{endpoint}?")), "{opened:?}");
    }
}

/// A redirect from a metadata URL is not followed, wherever it points.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_not_followed() {
    let secret = Secret::start().await;
    let server = hostile(None).await;
    server.script(
        "/.well-known/oauth-protected-resource/mcp",
        Answer {
            status: 302,
            headers: vec![("location", format!("{}/latest/meta-data/", secret.origin))],
            body: format!("{SECRET}-redirect"),
        },
    );
    let error = refused(
        &server,
        OAuth::new().authorizer(Arc::new(Recording::default())),
    )
    .await;
    clean(&secret, &error);
    assert!(error.contains("302"), "{error}");
}

/// What a metadata URL or the token endpoint answers reaches the error only as its status and
/// content type: not in a document of the wrong shape, nor an error page, nor the issuer a
/// document names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_byte_of_an_answer_reaches_the_error() {
    let secret = Secret::start().await;
    let wrong_shapes = [
        json!({"authorization_servers": format!("{SECRET}-1"), "resource": "x"}),
        json!({"resource": [format!("{SECRET}-2")]}),
        json!({"scopes_supported": format!("{SECRET}-3")}),
    ];
    for document in wrong_shapes {
        let server = hostile(None).await;
        server.script(
            "/.well-known/oauth-protected-resource/mcp",
            Answer::json(document.clone()),
        );
        let error = refused(&server, OAuth::new()).await;
        clean(&secret, &error);
    }
    let server = hostile(None).await;
    server.script(
        "/.well-known/oauth-protected-resource/mcp",
        Answer {
            status: 500,
            headers: vec![("content-type", "text/plain".into())],
            body: format!("{SECRET}-500"),
        },
    );
    let error = refused(&server, OAuth::new()).await;
    clean(&secret, &error);
    assert!(error.contains("500"), "{error}");

    // A document naming another issuer: refused, without repeating what it names.
    let server = hostile(None).await;
    resource_metadata(&server, &server.origin);
    server_metadata(
        &server,
        json!({"issuer": format!("https://{SECRET}.example")}),
    );
    let error = refused(&server, OAuth::new()).await;
    clean(&secret, &error);

    // The token endpoint (at the server's origin) answers with something that is not an OAuth
    // error, or a success that is not tokens.
    for (status, body) in [
        (400, json!({"message": format!("{SECRET}-400")})),
        (
            200,
            json!({"access_token": 1, "note": format!("{SECRET}-200")}),
        ),
        (200, json!({"token_type": format!("{SECRET}-200")})),
    ] {
        let server = hostile(None).await;
        resource_metadata(&server, &server.origin);
        server_metadata(&server, json!({}));
        server.script(
            "/token",
            Answer {
                status,
                ..Answer::json(body)
            },
        );
        let oauth = OAuth::new()
            .client(None, "machine", Some("s".into()))
            .client_credentials();
        let error = refused(&server, oauth).await;
        clean(&secret, &error);
        assert!(server.seen().iter().any(|p| p == "/token"), "{error}");
    }
}

/// With the development opt-in, authorization servers and metadata on plain http at another
/// origin are used (here: a second listener standing for a development authorization server,
/// reached by name); link-local addresses and other schemes stay refused. Without it, the
/// same server is refused with an error that names the opt-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_development_opt_in_allows_plain_http_elsewhere_but_never_link_local() {
    let secret = Secret::start().await;
    let development = Site::start().await;
    let by_name = development.origin.replace("127.0.0.1", "localhost");
    let machine = || {
        OAuth::new()
            .client(None, "machine", Some("s".into()))
            .client_credentials()
    };
    let server = hostile(Some(format!("Bearer resource_metadata=\"{by_name}/prm\""))).await;
    development.script(
        "/prm",
        Answer::json(json!({
            "resource": format!("{}/mcp", server.origin),
            "authorization_servers": [by_name],
        })),
    );
    development.script(
        "/.well-known/oauth-authorization-server",
        Answer::json(json!({
            "issuer": by_name,
            "token_endpoint": format!("{by_name}/token"),
        })),
    );
    development.script(
        "/token",
        Answer {
            status: 401,
            ..Answer::json(
                json!({"error": "invalid_client", "error_description": "unknown client"}),
            )
        },
    );

    let error = refused(&server, machine()).await;
    clean(&secret, &error);
    assert!(error.contains("plain http"), "{error}");
    assert!(error.contains("--insecure-oauth-http"), "{error}");
    assert_eq!(development.seen(), Vec::<String>::new());

    let error = refused(&server, machine().allow_insecure_http()).await;
    clean(&secret, &error);
    assert!(error.contains("invalid_client (unknown client)"), "{error}");
    assert_eq!(
        development.seen(),
        ["/prm", "/.well-known/oauth-authorization-server", "/token"]
    );

    for (issuer, why) in [
        ("http://169.254.169.254", "link-local"),
        ("http://[fe80::a9fe:a9fe]", "link-local"),
        ("ftp://auth.example.com", "https"),
    ] {
        development.script(
            "/prm",
            Answer::json(json!({
                "resource": format!("{}/mcp", server.origin),
                "authorization_servers": [issuer],
            })),
        );
        let error = refused(&server, machine().allow_insecure_http()).await;
        clean(&secret, &error);
        assert!(error.contains(why), "{issuer}: {error}");
    }
}
