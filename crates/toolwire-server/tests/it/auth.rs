//! The HTTP transport as an OAuth resource server, against an issuer served on 127.0.0.1 with
//! keys made at test time: metadata, challenges, the caller's principal and scopes, the list a
//! caller sees, 403 step-up challenges, and principals kept apart (request state, sessions).
//! The same against the npm `oidc-provider` lives in `auth_oidc.rs`.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolwire_server::http::{HttpConfig, OAuth};
use toolwire_server::protocol::ResourceContents;
use toolwire_server::{
    Elicited, InputRequired, NoArgs, Prompt, RequestContext, Resource, ResourceTemplate, Server,
    Structured, TaskSupport, Tool, ToolError,
};

use crate::support::*;

/// An ES256 key and its JWK.
pub struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    pub jwk: Value,
}

impl SigningKey {
    pub fn new(kid: &str) -> SigningKey {
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let raw = pair.public_key_raw().to_vec();
        let (x, y) = raw[1..].split_at(32);
        SigningKey {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk: json!({"kty": "EC", "crv": "P-256", "x": b64(x), "y": b64(y), "kid": kid, "alg": "ES256", "use": "sig"}),
        }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// An issuer on 127.0.0.1: RFC 8414 metadata and a JWKS.
#[derive(Clone)]
pub struct Issuer {
    pub url: String,
    jwks: Arc<Mutex<Value>>,
}

pub async fn start_issuer(key: &SigningKey) -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let issuer = Issuer {
        url,
        jwks: Arc::new(Mutex::new(json!({"keys": [key.jwk.clone()]}))),
    };
    let reply = |v: Value| {
        (
            [(http::header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        )
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(move |State(i): State<Issuer>| async move {
                reply(json!({"issuer": i.url, "jwks_uri": format!("{}/jwks", i.url)}))
            }),
        )
        .route(
            "/jwks",
            get(
                move |State(i): State<Issuer>| async move { reply(i.jwks.lock().unwrap().clone()) },
            ),
        )
        .with_state(issuer.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    issuer
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

pub fn server() -> Server {
    Server::builder("guarded", "1")
        .tool(
            Tool::new("echo", |p: Pair, _: RequestContext| async move {
                format!("{}", p.a)
            })
            .description("Echoes a"),
        )
        .tool(
            Tool::new("add", |p: Pair, _: RequestContext| async move {
                Structured(Sum { total: p.a + p.b })
            })
            .description("Adds, needs math")
            .scopes(["math"]),
        )
        .tool(
            Tool::new("whoami", |_: NoArgs, ctx: RequestContext| async move {
                format!(
                    "{} with {:?}",
                    ctx.principal().unwrap_or("nobody"),
                    ctx.scopes().unwrap_or_default()
                )
            })
            .description("Says who calls"),
        )
        .tool(
            Tool::new("ask", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Name>("name")? {
                    Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!("hello {}", n.name)),
                    _ => Err(InputRequired::new()
                        .elicit::<Name>("name", "Name?")
                        .state("s")
                        .into()),
                }
            })
            .description("Asks, with sealed state"),
        )
        .prompt(Prompt::new("hello", |_, _: RequestContext| async {
            Ok::<_, ToolError>("Say hello.".to_owned())
        }))
        .prompt(
            Prompt::new("plan", |_, _: RequestContext| async {
                Ok::<_, ToolError>("Make a plan.".to_owned())
            })
            .scopes(["plans"]),
        )
        .resource(Resource::new(
            "notes://public",
            "public",
            |uri, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "open"))
            },
        ))
        .resource(
            Resource::new(
                "notes://secret",
                "secret",
                |uri, _: RequestContext| async move {
                    Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "closed"))
                },
            )
            .scopes(["secrets"]),
        )
        .resource_template(
            ResourceTemplate::new(
                "vault://{key}",
                "vault",
                |uri, _, _: RequestContext| async move {
                    Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "locked"))
                },
            )
            .complete("key", |typed, _| vec![format!("{typed}1")])
            .scopes(["secrets"]),
        )
        .tool(
            Tool::new(
                "confirm_math",
                |_: NoArgs, ctx: RequestContext| async move {
                    match ctx.elicited::<Name>("name")? {
                        Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!(
                            "{} confirmed with {:?}",
                            n.name,
                            ctx.scopes().unwrap_or_default()
                        )),
                        _ => {
                            // A call that waits becomes a task.
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                            Err(InputRequired::new().elicit::<Name>("name", "Name?").into())
                        }
                    }
                },
            )
            .description("A task that asks, needs math")
            .task_support(TaskSupport::Required)
            .scopes(["math"]),
        )
        .tool(
            Tool::new("slow", |_: NoArgs, _: RequestContext| async {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                "slept"
            })
            .description("Becomes a task for a client that declares the extension")
            .task_support(TaskSupport::Optional),
        )
        .build()
        .unwrap()
}

struct Fixture {
    server: TestServer,
    issuer: Issuer,
    key: SigningKey,
    resource: String,
}

impl Fixture {
    async fn start() -> Fixture {
        Fixture::start_with(server()).await
    }

    async fn start_with(server: Server) -> Fixture {
        let key = SigningKey::new("k1");
        let issuer = start_issuer(&key).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let resource = format!("http://{addr}/mcp");
        let config = HttpConfig::default().oauth(
            OAuth::new(issuer.url.clone(), resource.clone())
                .scopes_supported(["tools:read", "math"])
                .scope_implies("admin", ["math", "secrets", "plans"]),
        );
        let task = tokio::spawn(toolwire_server::http::serve(
            server.clone(),
            listener,
            config,
        ));
        Fixture {
            server: TestServer::from_parts(server, addr, task),
            issuer,
            key,
            resource,
        }
    }

    fn token(&self, sub: &str, scope: &str) -> String {
        self.token_with(sub, scope, json!({}))
    }

    /// A token with `extra` claims besides the usual ones.
    fn token_with(&self, sub: &str, scope: &str, extra: Value) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({
            "iss": self.issuer.url, "sub": sub, "aud": self.resource, "scope": scope,
            "exp": now + 300, "iat": now, "client_id": "test"
        });
        for (name, value) in extra.as_object().unwrap() {
            claims[name] = value.clone();
        }
        self.key.sign(&claims)
    }

    async fn post_as(&self, token: Option<&str>, body: &Value) -> Reply {
        let token = token.map(str::to_owned);
        post_with(&self.server.url, body, move |h| {
            if let Some(token) = token {
                h.push(("authorization".into(), format!("Bearer {token}")));
            }
        })
        .await
    }
}

#[tokio::test]
async fn metadata_and_challenges_tell_a_client_where_to_get_a_token() {
    let f = Fixture::start().await;
    let base = f.server.url.trim_end_matches("/mcp").to_owned();
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata: Value = client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(metadata["resource"], f.resource);
        assert_eq!(metadata["authorization_servers"], json!([f.issuer.url]));
        assert_eq!(metadata["scopes_supported"], json!(["tools:read", "math"]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    let body = request(1, "tools/list", json!({}));
    let anonymous = f.post_as(None, &body).await;
    assert_eq!(anonymous.status, 401);
    let challenge = anonymous.headers["www-authenticate"].to_str().unwrap();
    assert_eq!(
        challenge,
        format!(
            "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\", scope=\"tools:read math\""
        )
    );
    let garbage = f.post_as(Some("not-a-jwt"), &body).await;
    assert_eq!(garbage.status, 401);
    assert!(
        garbage.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"invalid_token\"")
    );
    let other = SigningKey::new("k1").sign(
        &json!({"iss": f.issuer.url, "sub": "x", "aud": f.resource, "exp": 4_000_000_000u64}),
    );
    assert_eq!(
        f.post_as(Some(&other), &body).await.status,
        401,
        "a forged signature"
    );
    let in_url = client()
        .post(format!(
            "{}?access_token={}",
            f.server.url,
            f.token("alice", "math")
        ))
        .headers(
            standard_headers(&body)
                .into_iter()
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(in_url.status(), 400, "a token in the query string");
    f.server.stop().await;
}

#[tokio::test]
async fn scopes_decide_what_a_caller_sees_and_may_call() {
    let f = Fixture::start().await;
    let reader = f.token("alice", "tools:read");
    let list = f
        .post_as(Some(&reader), &request(1, "tools/list", json!({})))
        .await;
    let result = &list.last()["result"];
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "whoami", "ask", "slow"], "add needs math");
    assert_eq!(
        result["cacheScope"], "private",
        "a list that depends on the caller"
    );

    let add = request(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    let refused = f.post_as(Some(&reader), &add).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"math\""),
        "what the operation needs, not what was granted (A-07): {challenge}"
    );
    assert!(challenge.contains("resource_metadata=\""), "{challenge}");
    assert_eq!(refused.last()["id"], 2);

    let both = f.token("alice", "tools:read math");
    let added = f.post_as(Some(&both), &add).await;
    assert_eq!(added.last()["result"]["structuredContent"]["total"], 5);
    let list = f
        .post_as(Some(&both), &request(3, "tools/list", json!({})))
        .await;
    assert_eq!(list.last()["result"]["tools"].as_array().unwrap().len(), 6);

    let who = f
        .post_as(
            Some(&both),
            &request(4, "tools/call", json!({"name": "whoami", "arguments": {}})),
        )
        .await;
    let text = who.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text,
        format!("{} alice with [\"tools:read\", \"math\"]", f.issuer.url)
    );
    f.server.stop().await;
}

#[tokio::test]
async fn one_principal_cannot_use_another_ones_request_state_or_session() {
    let f = Fixture::start().await;
    let (alice, bob) = (f.token("alice", "tools:read"), f.token("bob", "tools:read"));
    let mut ask = request(1, "tools/call", json!({"name": "ask", "arguments": {}}));
    ask["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    let asked = f.post_as(Some(&alice), &ask).await;
    let state = asked.last()["result"]["requestState"].clone();
    assert!(state.is_string(), "{}", asked.body);
    let mut retry = ask.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = state;
    retry["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let stolen = f.post_as(Some(&bob), &retry).await;
    assert_eq!(
        stolen.error_code(),
        Some(-32602),
        "bob cannot redeem alice's state: {}",
        stolen.body
    );
    let redeemed = f.post_as(Some(&alice), &retry).await;
    assert_eq!(redeemed.last()["result"]["content"][0]["text"], "hello Ada");

    // A task belongs to the token's principal: another one cannot read it.
    let tasks = json!({"io.modelcontextprotocol/tasks": {}});
    let mut slow = request(3, "tools/call", json!({"name": "slow", "arguments": {}}));
    slow["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": tasks});
    let created = f.post_as(Some(&alice), &slow).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_owned();
    let mut get = request(4, "tasks/get", json!({"taskId": task_id}));
    get["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": tasks});
    let foreign = f.post_as(Some(&bob), &get).await;
    assert_eq!(
        foreign.error_code(),
        Some(-32602),
        "bob cannot see alice's task: {}",
        foreign.body
    );
    let own = f.post_as(Some(&alice), &get).await;
    assert!(own.last()["result"]["status"].is_string(), "{}", own.body);

    // A legacy session belongs to the token's principal.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let legacy = |token: &str, session: Option<&str>, body: &Value| {
        let mut h = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            (
                "accept".to_owned(),
                "application/json, text/event-stream".to_owned(),
            ),
            ("authorization".to_owned(), format!("Bearer {token}")),
        ];
        if let Some(s) = session {
            h.push(("mcp-session-id".into(), s.into()));
        }
        let (url, body) = (f.server.url.clone(), body.to_string());
        async move { post_raw(&url, body, &h).await }
    };
    let opened = legacy(&alice, None, &init).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    assert_eq!(legacy(&bob, Some(&session), &list).await.status, 404);
    assert_eq!(legacy(&alice, Some(&session), &list).await.status, 200);
    let add = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}});
    let refused = legacy(&alice, Some(&session), &add).await;
    assert_eq!(
        refused.status, 403,
        "a legacy client can step up too: {}",
        refused.body
    );
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"math\""),
        "{challenge}"
    );
    assert_eq!(refused.last()["id"], 3);
    let admin = f.token("alice", "admin");
    let added = legacy(&admin, Some(&session), &add).await;
    assert_eq!(
        added.last()["result"]["structuredContent"]["total"],
        2,
        "the same principal with a broader scope (admin implies math): {}",
        added.body
    );
    f.server.stop().await;
}

#[tokio::test]
async fn prompts_resources_and_completions_follow_scopes() {
    let f = Fixture::start().await;
    let reader = f.token("carol", "tools:read");
    let admin = f.token("carol", "admin");
    let names = |reply: &Reply, field: &str, key: &str| -> Vec<String> {
        reply.last()["result"][field]
            .as_array()
            .unwrap_or_else(|| panic!("{}", reply.body))
            .iter()
            .map(|p| p[key].as_str().unwrap().to_owned())
            .collect()
    };
    let prompts = f
        .post_as(Some(&reader), &request(1, "prompts/list", json!({})))
        .await;
    assert_eq!(names(&prompts, "prompts", "name"), ["hello"]);
    assert_eq!(prompts.last()["result"]["cacheScope"], "private");
    let resources = f
        .post_as(Some(&reader), &request(2, "resources/list", json!({})))
        .await;
    assert_eq!(names(&resources, "resources", "uri"), ["notes://public"]);
    assert_eq!(resources.last()["result"]["cacheScope"], "private");
    let templates = f
        .post_as(
            Some(&reader),
            &request(3, "resources/templates/list", json!({})),
        )
        .await;
    assert!(names(&templates, "resourceTemplates", "uriTemplate").is_empty());

    let forbidden = [
        (request(4, "prompts/get", json!({"name": "plan"})), "plans"),
        (
            request(5, "resources/read", json!({"uri": "notes://secret"})),
            "secrets",
        ),
        (
            request(6, "resources/read", json!({"uri": "vault://key1"})),
            "secrets",
        ),
        (
            request(
                7,
                "completion/complete",
                json!({
                "ref": {"type": "ref/resource", "uri": "vault://{key}"},
                "argument": {"name": "key", "value": "k"}}),
            ),
            "secrets",
        ),
    ];
    for (body, scope) in &forbidden {
        let refused = f.post_as(Some(&reader), body).await;
        assert_eq!(refused.status, 403, "{body}: {}", refused.body);
        let challenge = refused.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains(&format!("scope=\"{scope}\""))
                && challenge.contains("insufficient_scope"),
            "{body}: {challenge}"
        );
    }
    let public = f
        .post_as(
            Some(&reader),
            &request(8, "resources/read", json!({"uri": "notes://public"})),
        )
        .await;
    assert_eq!(public.last()["result"]["contents"][0]["text"], "open");

    // A subscription to a resource the caller may not read is not honoured (L-04): the
    // acknowledgement lists only what it will hear about.
    let filter = json!({"resourceSubscriptions": ["notes://secret", "notes://public"]});
    assert_eq!(
        listen_ack(&f, &reader, &filter).await["resourceSubscriptions"],
        json!(["notes://public"])
    );
    assert_eq!(
        listen_ack(&f, &admin, &filter).await["resourceSubscriptions"],
        json!(["notes://secret", "notes://public"])
    );

    // A broader scope implies the narrower ones (A-07: scope hierarchies).
    let prompts = f
        .post_as(Some(&admin), &request(9, "prompts/list", json!({})))
        .await;
    assert_eq!(names(&prompts, "prompts", "name"), ["hello", "plan"]);
    for (body, _) in &forbidden {
        let served = f.post_as(Some(&admin), body).await;
        assert_eq!(served.status, 200, "{body}: {}", served.body);
        assert!(
            served.last()["result"].is_object(),
            "{body}: {}",
            served.body
        );
    }
    f.server.stop().await;
}

/// The `notifications` a listen stream's acknowledgement says it honours.
async fn listen_ack(f: &Fixture, token: &str, filter: &Value) -> Value {
    use futures::StreamExt as _;
    let body = request(90, "subscriptions/listen", json!({"notifications": filter}));
    let mut req = client()
        .post(&f.server.url)
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string());
    for (k, v) in standard_headers(&body) {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut bytes = resp.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), bytes.next())
            .await
            .expect("the acknowledgement within 5 s")
            .expect("a chunk")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let ack = sse_messages(&text).remove(0);
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    ack["params"]["notifications"].clone()
}

/// Answering a task's input makes its handler run again: the scopes are checked again on the
/// update (T-21), and the later steps run with the scopes of the call that started the task.
#[tokio::test]
async fn a_task_update_needs_the_tools_scopes_too() {
    let f = Fixture::start().await;
    let with_tasks = |mut body: Value| {
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}});
        body
    };
    let full = f.token("dan", "tools:read math");
    let created = f
        .post_as(
            Some(&full),
            &with_tasks(request(
                1,
                "tools/call",
                json!({"name": "confirm_math", "arguments": {}}),
            )),
        )
        .await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_owned();
    let get = with_tasks(request(2, "tasks/get", json!({"taskId": task_id})));
    let mut status = Value::Null;
    for _ in 0..100 {
        status = f.post_as(Some(&full), &get).await.last()["result"].clone();
        if status["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status["status"], "input_required", "{status}");
    let update = with_tasks(request(
        3,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {
            "name": {"action": "accept", "content": {"name": "Dan"}}}}),
    ));
    let narrowed = f.token("dan", "tools:read");
    let refused = f.post_as(Some(&narrowed), &update).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("scope=\"math\"")
    );
    let accepted = f.post_as(Some(&full), &update).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    for _ in 0..100 {
        status = f.post_as(Some(&full), &get).await.last()["result"].clone();
        if status["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        status["result"]["content"][0]["text"], "Dan confirmed with [\"tools:read\", \"math\"]",
        "{status}"
    );
    f.server.stop().await;
}

/// A verifier of the author's own (`OAuth::verifier`): the metadata and challenges stay the
/// server's, the tokens are whatever the verifier says.
#[tokio::test]
async fn a_custom_token_verifier_decides_who_calls() {
    use futures::future::BoxFuture;
    use toolwire_auth::{TokenError, TokenVerifier, VerifiedToken};

    struct Fixed;
    impl TokenVerifier for Fixed {
        fn verify<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>> {
            Box::pin(async move {
                match token {
                    "letmein" => Ok(Arc::new(VerifiedToken::new(
                        "https://custom",
                        "alice",
                        vec!["math".to_owned()],
                    ))),
                    "down" => Err(TokenError::Unavailable("the store is down".into())),
                    _ => Err(TokenError::Invalid("unknown token".into())),
                }
            })
        }
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HttpConfig::default().oauth(
        OAuth::new("https://custom", format!("http://{addr}/mcp")).verifier(Arc::new(Fixed)),
    );
    let server = server();
    let task = tokio::spawn(toolwire_server::http::serve(
        server.clone(),
        listener,
        config,
    ));
    let s = TestServer::from_parts(server, addr, task);
    let as_token = |token: &'static str, body: Value| {
        let url = s.url.clone();
        async move {
            post_with(&url, &body, move |h| {
                h.push(("authorization".into(), format!("Bearer {token}")));
            })
            .await
        }
    };
    let who = as_token(
        "letmein",
        request(1, "tools/call", json!({"name": "whoami", "arguments": {}})),
    )
    .await;
    assert_eq!(
        who.last()["result"]["content"][0]["text"],
        "https://custom alice with [\"math\"]"
    );
    assert_eq!(
        as_token("guess", request(2, "tools/list", json!({})))
            .await
            .status,
        401
    );
    assert_eq!(
        as_token("down", request(3, "tools/list", json!({})))
            .await
            .status,
        503
    );
    s.stop().await;
}

/// A tool visibility over the token's claims: tools hidden from a caller are out of its list
/// (which is then private) and refused with the reason; handlers read the claims too.
#[tokio::test]
async fn a_tool_visibility_over_claims_decides_who_sees_and_calls_what() {
    let server = Server::builder("claims", "1")
        .tool(
            Tool::new("tenant", |_: NoArgs, ctx: RequestContext| async move {
                let tenant = ctx.claims().and_then(|c| c.get("tenant")).cloned();
                format!("{}", tenant.unwrap_or_default())
            })
            .description("Says the caller's tenant"),
        )
        .tool(
            Tool::new("acme_only", |_: NoArgs, _: RequestContext| async {
                "welcome"
            })
            .description("For acme"),
        )
        .tool_visibility(|viewer: &toolwire_server::Viewer<'_>, tool: &str| {
            let acme = viewer
                .claims
                .and_then(|c| c.get("tenant"))
                .is_some_and(|t| t == "acme");
            (tool == "acme_only" && !acme).then(|| "only the acme tenant may use it".to_owned())
        })
        .build()
        .unwrap();
    let f = Fixture::start_with(server).await;
    let names = |reply: &Reply| -> Vec<String> {
        reply.last()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let acme = f.token_with("alice", "tools:read", json!({"tenant": "acme"}));
    let other = f.token_with("bob", "tools:read", json!({"tenant": "initech"}));
    let list = f
        .post_as(Some(&acme), &request(1, "tools/list", json!({})))
        .await;
    assert_eq!(names(&list), ["tenant", "acme_only"]);
    assert_eq!(list.last()["result"]["cacheScope"], "private");
    let list = f
        .post_as(Some(&other), &request(2, "tools/list", json!({})))
        .await;
    assert_eq!(names(&list), ["tenant"]);

    let call =
        |id: i64, name: &str| request(id, "tools/call", json!({"name": name, "arguments": {}}));
    let said = f.post_as(Some(&other), &call(3, "tenant")).await;
    assert_eq!(said.last()["result"]["content"][0]["text"], "\"initech\"");
    let refused = f.post_as(Some(&other), &call(4, "acme_only")).await;
    assert_eq!(refused.error_code(), Some(-32602), "{}", refused.body);
    assert!(
        refused.last()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only the acme tenant may use it"),
        "{}",
        refused.body
    );
    let welcomed = f.post_as(Some(&acme), &call(5, "acme_only")).await;
    assert_eq!(welcomed.last()["result"]["content"][0]["text"], "welcome");
    f.server.stop().await;
}

/// The caller's access token reaches a handler only when the resource server is told to hand
/// it over (`OAuth::token_to_handlers`, for a gateway's token exchange): by default a handler
/// has no use for it and never sees it.
#[tokio::test]
async fn handlers_get_the_callers_token_only_when_asked() {
    use futures::future::BoxFuture;
    use toolwire_auth::{TokenError, TokenVerifier, VerifiedToken};

    struct Fixed;
    impl TokenVerifier for Fixed {
        fn verify<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>> {
            Box::pin(async move {
                match token {
                    "letmein" => Ok(Arc::new(VerifiedToken::new(
                        "https://custom",
                        "alice",
                        vec![],
                    ))),
                    _ => Err(TokenError::Invalid("unknown token".into())),
                }
            })
        }
    }

    for handed in [false, true] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let oauth =
            OAuth::new("https://custom", format!("http://{addr}/mcp")).verifier(Arc::new(Fixed));
        let oauth = if handed {
            oauth.token_to_handlers()
        } else {
            oauth
        };
        let server = Server::builder("tokens", "1")
            .tool(
                Tool::new("token", |_: NoArgs, ctx: RequestContext| async move {
                    ctx.access_token().unwrap_or("none").to_owned()
                })
                .description("Says the caller's token"),
            )
            .build()
            .unwrap();
        let task = tokio::spawn(toolwire_server::http::serve(
            server.clone(),
            listener,
            HttpConfig::default().oauth(oauth),
        ));
        let s = TestServer::from_parts(server, addr, task);
        let body = request(1, "tools/call", json!({"name": "token", "arguments": {}}));
        let reply = post_with(&s.url, &body, |h| {
            h.push(("authorization".into(), "Bearer letmein".into()));
        })
        .await;
        let want = if handed { "letmein" } else { "none" };
        assert_eq!(
            reply.last()["result"]["content"][0]["text"],
            want,
            "{}",
            reply.body
        );
        s.stop().await;
    }
}

/// A request without a token counts as an `auth` refusal, a call without the tool's scope as a
/// `scope` one.
#[tokio::test]
async fn refusals_of_access_are_counted_by_reason() {
    let server = Server::builder("guarded", "1")
        .tool(
            Tool::new("add", |p: Pair, _: RequestContext| async move {
                Structured(Sum { total: p.a + p.b })
            })
            .scopes(["math"]),
        )
        .metrics(toolwire_server::observe::Metrics::new())
        .build()
        .unwrap();
    let f = Fixture::start_with(server).await;
    let add = request(
        1,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    assert_eq!(f.post_as(None, &add).await.status, 401);
    let reader = f.token("alice", "tools:read");
    assert_eq!(f.post_as(Some(&reader), &add).await.status, 403);
    let text = f.server.server.metrics().unwrap().encode();
    for reason in ["auth", "scope"] {
        let line = format!("toolwire_refusals_total{{reason=\"{reason}\"}} 1");
        assert!(text.contains(&line), "{line} in {text}");
    }
    f.server.stop().await;
}
