//! `toolwire gateway` as an OAuth resource server, against the real authorization server (the
//! npm `oidc-provider` of `interop/oidc`, installed by `scripts/oidc` on first use): callers
//! present its access tokens, the gateway's CEL rules read each caller's principal, scopes and
//! claims, and the upstream — a real `toolwire serve --http` behind a recording proxy that
//! keeps the `Authorization` header of every request — never sees a caller's token, only the
//! credential the gateway's file names for it.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../../../interop/oidc/launch.rs"]
mod launch;

#[path = "support/oidc_gateway.rs"]
mod oidc;
#[path = "support/gateway.rs"]
mod support;

use oidc::{
    Provider, Recorder, Reply, STEP, called, free_port, last_message, recording_proxy, send,
};
use support::{BIN, Killed, started_drained as started, toolwire};

/// The credential the gateway's file gives the upstream (through the environment).
const UPSTREAM_CREDENTIAL: &str = "gateway-to-upstream-7f3a";

/// The names in a caller's `tools/list`, and its `cacheScope`.
async fn listed(http: &reqwest::Client, url: &str, token: &str) -> (Vec<String>, Value) {
    let reply = send(http, url, Some(token), "tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.message);
    let result = &reply.message["result"];
    let names = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {}", reply.message))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (names, result["cacheScope"].clone())
}

/// One request of a legacy (2025-11-25) session, with `token` as the bearer: the status, the
/// session id the reply names, and its last JSON-RPC message.
async fn legacy(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .timeout(STEP);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let reply = request.body(body.to_string()).send().await.unwrap();
    let status = reply.status().as_u16();
    let session = reply
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = reply.text().await.unwrap();
    let message = last_message(&text);
    (status, session, message)
}

/// The tool names of a `tools/list` result.
fn names(message: &Value) -> Vec<String> {
    message["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {message}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A real `toolwire serve --http` upstream: the process and its URL.
async fn serve_upstream(dir: &tempfile::TempDir) -> (Killed, String) {
    let mut upstream = toolwire(dir);
    upstream
        .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("notes"));
    tokio::task::spawn_blocking(move || started(upstream, "serving the example tools at "))
        .await
        .unwrap()
}

/// The first test's world: the provider, the gateway in front of the recorded upstream, and
/// the callers' tokens as they are issued.
struct Scene {
    provider: Provider,
    dir: tempfile::TempDir,
    resource: String,
    url: String,
    http: reqwest::Client,
    recorder: Arc<Recorder>,
    gateway: Option<Killed>,
    _upstream: Killed,
    /// Every caller token issued so far, to look for upstream and in the audit log.
    tokens: Vec<String>,
}

/// The rules of the first test's gateway, over the caller's scopes, claims (a real one,
/// `client_id`, and a custom one, `team`) and principal.
fn rules() -> Value {
    json!({"rules": [
        {
            "deny": "tool.name == \"up__add\" && !(\"math\" in caller.scopes)",
            "why": "adding needs the math scope",
        },
        {
            "deny": "tool.name == \"up__word_count\" && caller.claims.client_id != \"rs-test-2\"",
            "why": "word counts are for the second client",
        },
        {
            "deny": "tool.name == \"up__echo\" && caller.principal.endsWith(\" rs-test\") && args.message.contains(\"secret\")",
            "why": "the first client may not echo secrets",
        },
        {
            "deny": "tool.name.startsWith(\"up__note_\") && \"team\" in caller.claims && caller.claims.team == \"contractors\"",
            "why": "notes are not for contractors",
        },
    ]})
}

impl Scene {
    /// The provider, a real `toolwire serve --http` upstream behind the recorder, and the
    /// gateway: an OAuth resource server of the provider, the upstream's credential from its
    /// environment.
    async fn start() -> Scene {
        let provider = Provider::start().await;
        let dir = tempfile::tempdir().unwrap();
        let (upstream, upstream_url) = serve_upstream(&dir).await;
        let recorder = Arc::new(Recorder::default());
        let (proxy, forwarding) = recording_proxy(recorder.clone()).await;
        forwarding.forward_to(upstream_url.trim_end_matches("/mcp").to_owned());

        let port = free_port();
        let resource = format!("http://127.0.0.1:{port}/mcp");
        let config = json!({
            "mcpServers": {
                "upstream": {
                    "url": format!("{proxy}/mcp"),
                    "prefix": "up",
                    "headers": {"Authorization": "Bearer ${UPSTREAM_CREDENTIAL}"},
                },
            },
            "gateway": {
                "auth": {"issuer": provider.issuer(), "resource": resource},
                "tools": {
                    "up__current_time": {"scopes": ["admin"]},
                    "up__note_create": {"rate_limit": {"calls": 2, "period_seconds": 3600}},
                },
                "audit": {"file": "gateway-audit.jsonl"},
                "policy": rules(),
            },
        });
        let file = dir.path().join("gateway.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let mut gateway = toolwire(&dir);
        gateway
            .env("UPSTREAM_CREDENTIAL", UPSTREAM_CREDENTIAL)
            .args(["gateway", "--http", &format!("127.0.0.1:{port}")])
            .arg("--config")
            .arg(&file);
        let (gateway, url) =
            tokio::task::spawn_blocking(move || started(gateway, "the gateway serves at "))
                .await
                .unwrap();
        assert_eq!(url, resource);
        Scene {
            provider,
            dir,
            resource,
            url,
            http: reqwest::Client::new(),
            recorder,
            gateway: Some(gateway),
            _upstream: upstream,
            tokens: Vec::new(),
        }
    }

    /// A token of `client` for the gateway with `scope`.
    async fn token(&mut self, client: (&str, &str), scope: &str) -> String {
        let token = self.provider.token(client, &self.resource, scope).await;
        self.tokens.push(token.clone());
        token
    }

    async fn send(&self, token: Option<&str>, method: &str, params: Value) -> Reply {
        send(&self.http, &self.url, token, method, params).await
    }

    async fn listed(&self, token: &str) -> (Vec<String>, Value) {
        listed(&self.http, &self.url, token).await
    }

    async fn called(&self, token: &str, tool: &str, arguments: Value) -> (String, bool) {
        called(&self.http, &self.url, token, tool, arguments).await
    }

    /// Without a token: 401, and the challenge names the resource metadata, which names the
    /// provider. A token for another resource: 401 `invalid_token`.
    async fn strangers_are_refused(&self) {
        let anonymous = self.send(None, "tools/list", json!({})).await;
        assert_eq!(anonymous.status, 401, "{}", anonymous.message);
        // With sign-in on, nothing on the MCP address names upstreams or tools to anyone who
        // asks: the operator's endpoints are --admin's only.
        let base = self.url.trim_end_matches("/mcp");
        for path in ["/metrics", "/readyz", "/healthz"] {
            let answer = self
                .http
                .get(format!("{base}{path}"))
                .timeout(STEP)
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let body = answer.text().await.unwrap_or_default();
            assert_ne!(status, 200, "{path} answers anyone: {body}");
            assert!(!body.contains("up__"), "{path}: {body}");
        }
        let metadata_url = anonymous
            .challenge
            .split("resource_metadata=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("a resource_metadata challenge: {}", anonymous.challenge))
            .to_owned();
        let metadata: Value = self
            .http
            .get(&metadata_url)
            .timeout(STEP)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(metadata["resource"], json!(self.resource), "{metadata}");
        assert_eq!(
            metadata["authorization_servers"],
            json!([self.provider.issuer()]),
            "{metadata}"
        );

        let elsewhere = self
            .provider
            .token(
                ("rs-test", "rs-secret"),
                "http://127.0.0.1:9/mcp",
                "tools:read math",
            )
            .await;
        let refused = self.send(Some(&elsewhere), "tools/list", json!({})).await;
        assert_eq!(refused.status, 401, "{}", refused.message);
        assert!(
            refused.challenge.contains("invalid_token"),
            "{}",
            refused.challenge
        );
    }

    /// A's and B's lists differ as the rules over scopes and claims say, a custom claim hides
    /// the notes from a contractor, and a tool's own scopes keep it out of both lists.
    async fn each_caller_sees_its_own_list(&mut self, a: &str, b: &str) {
        let (a_tools, a_scope) = self.listed(a).await;
        let (b_tools, b_scope) = self.listed(b).await;
        let has = |tools: &[String], name: &str| tools.iter().any(|t| t == name);
        for tools in [&a_tools, &b_tools] {
            assert!(
                has(tools, "up__echo") && has(tools, "up__note_create"),
                "{tools:?}"
            );
            assert!(!has(tools, "up__current_time"), "admin only: {tools:?}");
        }
        assert!(
            !has(&a_tools, "up__add"),
            "A has no math scope: {a_tools:?}"
        );
        assert!(
            !has(&a_tools, "up__word_count"),
            "A's client_id claim is not rs-test-2: {a_tools:?}"
        );
        assert!(
            has(&b_tools, "up__add") && has(&b_tools, "up__word_count"),
            "{b_tools:?}"
        );
        assert_eq!((a_scope, b_scope), (json!("private"), json!("private")));

        // A custom claim, from the provider's test mint (its token endpoint adds none).
        let contractor = self
            .provider
            .mint(json!({"aud": self.resource, "scope": "tools:read", "team": "contractors"}))
            .await;
        self.tokens.push(contractor.clone());
        let (c_tools, _) = self.listed(&contractor).await;
        assert!(
            has(&c_tools, "up__echo") && !c_tools.iter().any(|t| t.starts_with("up__note_")),
            "{c_tools:?}"
        );
    }

    /// Calls: a tool's own scope gets the step-up challenge; B adds; A's call of a tool not
    /// in its list is refused with the rule's reason; a rule over the arguments refuses A's
    /// echo of a secret with its reason and lets B's through. Four calls reach the upstream.
    async fn calls_are_decided_per_caller(&mut self, a: &str, b: &str) {
        let step_up = self
            .send(
                Some(a),
                "tools/call",
                json!({"name": "up__current_time", "arguments": {}}),
            )
            .await;
        assert_eq!(step_up.status, 403, "{}", step_up.message);
        assert!(
            step_up.challenge.contains("insufficient_scope") && step_up.challenge.contains("admin"),
            "{}",
            step_up.challenge
        );
        let admin = self
            .token(("rs-test", "rs-secret"), "tools:read admin")
            .await;
        let (now, error) = self.called(&admin, "up__current_time", json!({})).await;
        assert!(!error && !now.is_empty(), "{now}");

        let (sum, error) = self.called(b, "up__add", json!({"a": 2, "b": 3})).await;
        assert!(!error && sum.contains('5'), "{sum}");
        let hidden = self
            .send(
                Some(a),
                "tools/call",
                json!({"name": "up__add", "arguments": {"a": 2, "b": 3}}),
            )
            .await;
        assert!(
            hidden.message["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("adding needs the math scope")),
            "{}",
            hidden.message
        );
        let secret = json!({"message": "the secret"});
        let (refusal, error) = self.called(a, "up__echo", secret.clone()).await;
        assert!(
            error && refusal.contains("the first client may not echo secrets"),
            "{refusal}"
        );
        let (echoed, error) = self.called(b, "up__echo", secret).await;
        assert!(!error && echoed.contains("the secret"), "{echoed}");
        let (echoed, error) = self
            .called(a, "up__echo", json!({"message": "hello"}))
            .await;
        assert!(!error && echoed.contains("hello"), "{echoed}");
    }

    /// A tool's quota is each caller's own: A's third call is refused, B's first is not.
    /// Three calls reach the upstream.
    async fn quotas_are_per_principal(&self, a: &str, b: &str) {
        let create = json!({"text": "a line"});
        for _ in 0..2 {
            let (text, error) = self.called(a, "up__note_create", create.clone()).await;
            assert!(!error, "{text}");
        }
        let third = self
            .send(
                Some(a),
                "tools/call",
                json!({"name": "up__note_create", "arguments": create}),
            )
            .await;
        assert!(
            third.message.to_string().contains("called too often"),
            "{}",
            third.message
        );
        let (text, error) = self.called(b, "up__note_create", create).await;
        assert!(!error, "B's own quota: {text}");
    }

    /// A legacy (2025-11-25) session through the gateway: bound to B's principal, its list
    /// follows the token of each request (B with fewer scopes loses up__add), and A cannot
    /// use it.
    async fn legacy_sessions_are_per_caller(&mut self, a: &str, b: &str) {
        let (http, url) = (&self.http, self.url.as_str());
        let (status, session, init) = legacy(
            http,
            url,
            b,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "legacy-caller", "version": "1"},
            }}),
        )
        .await;
        assert_eq!(status, 200, "{init}");
        let session = session.unwrap_or_else(|| panic!("a session id: {init}"));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = legacy(http, url, b, Some(&session), initialized).await;
        assert_eq!(status, 202);
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        let (status, _, b_legacy) = legacy(http, url, b, Some(&session), list.clone()).await;
        assert_eq!(status, 200, "{b_legacy}");
        assert!(
            names(&b_legacy).contains(&"up__add".to_owned()),
            "{b_legacy}"
        );
        let b_reader = self.token(("rs-test-2", "rs-secret-2"), "tools:read").await;
        let (http, url) = (&self.http, self.url.as_str());
        let (status, _, fewer) = legacy(http, url, &b_reader, Some(&session), list.clone()).await;
        assert_eq!(status, 200, "{fewer}");
        assert!(
            !names(&fewer).contains(&"up__add".to_owned())
                && names(&fewer).contains(&"up__word_count".to_owned()),
            "the list follows this request's token: {fewer}"
        );
        let (status, _, stolen) = legacy(http, url, a, Some(&session), list).await;
        assert_eq!(
            status, 404,
            "another principal's session is unknown to A: {stolen}"
        );
    }

    /// The upstream saw the calls the gateway made, every request with the gateway's own
    /// credential and none with a caller's token anywhere in it.
    fn upstream_never_saw_a_callers_token(&self, calls: usize) {
        let seen = self.recorder.seen.lock().unwrap().clone();
        let made = seen.iter().filter(|(m, _)| m == "tools/call").count();
        assert_eq!(made, calls, "nothing refused reached it: {seen:?}");
        let expected = format!("Bearer {UPSTREAM_CREDENTIAL}");
        for (method, authorization) in &seen {
            assert_eq!(
                authorization.as_deref(),
                Some(expected.as_str()),
                "{method}: every upstream request carries the configured credential: {seen:?}"
            );
        }
        let whole = self.recorder.whole.lock().unwrap().clone();
        for token in &self.tokens {
            assert!(
                !whole.iter().any(|request| request.contains(token.as_str())),
                "a caller's token reached the upstream"
            );
        }
    }

    /// Stops the gateway with SIGTERM (bounded) and reads its audit log, written out as it
    /// stops: each call under its caller's principal, and no token anywhere.
    async fn audit_names_principals_and_no_tokens(&mut self) {
        let mut gateway = self.gateway.take().unwrap();
        let stopped = tokio::task::spawn_blocking(move || {
            let pid = gateway.0.id().to_string();
            let term = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
            assert!(term.success());
            let deadline = Instant::now() + STEP;
            while Instant::now() < deadline {
                if let Some(status) = gateway.0.try_wait().unwrap() {
                    return Some(status);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        })
        .await
        .unwrap();
        assert!(
            stopped.is_some(),
            "the gateway stops on SIGTERM within {STEP:?}"
        );
        let audit = std::fs::read_to_string(self.dir.path().join("state/gateway-audit.jsonl"))
            .expect("the gateway's audit file");
        let events: Vec<Value> = audit
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let issuer = self.provider.issuer();
        let of = |client: &str, tool: &str| {
            let principal = json!(format!("{issuer} {client}"));
            events
                .iter()
                .filter(|e| e["principal"] == principal && e["tool"] == json!(tool))
                .count()
        };
        assert_eq!(of("rs-test-2", "up__add"), 1, "{audit}");
        assert_eq!(
            of("rs-test", "up__echo"),
            2,
            "the refused and the allowed: {audit}"
        );
        assert_eq!(of("rs-test-2", "up__echo"), 1, "{audit}");
        for token in &self.tokens {
            assert!(!audit.contains(token.as_str()), "a token in the audit log");
        }
    }
}

/// The toolwire client, presenting `token`, sees that caller's list.
async fn the_client_shows(dir: &std::path::Path, url: &str, token: &str) -> String {
    let (dir, url, token) = (dir.to_owned(), url.to_owned(), token.to_owned());
    let shown = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .current_dir(&dir)
            .env("HOME", &dir)
            .env("TOOLWIRE_STATE_DIR", dir.join("client-state"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .args(["tools", &url, "--bearer", &token])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_a_real_authorization_server_get_their_own_lists_and_never_reach_upstream() {
    let mut scene = Scene::start().await;
    scene.strangers_are_refused().await;
    // Caller A (client rs-test, scope tools:read) and caller B (rs-test-2, tools:read math).
    let a = scene.token(("rs-test", "rs-secret"), "tools:read").await;
    let b = scene
        .token(("rs-test-2", "rs-secret-2"), "tools:read math")
        .await;
    scene.each_caller_sees_its_own_list(&a, &b).await;
    let shown = the_client_shows(scene.dir.path(), &scene.url, &a).await;
    assert!(
        shown.contains("up__echo")
            && !shown.contains("up__add")
            && !shown.contains("up__word_count"),
        "{shown}"
    );
    scene.calls_are_decided_per_caller(&a, &b).await;
    scene.quotas_are_per_principal(&a, &b).await;
    scene.legacy_sessions_are_per_caller(&a, &b).await;
    // The admin's current_time, B's add and echo, A's allowed echo, A's two notes and B's.
    scene.upstream_never_saw_a_callers_token(7);
    scene.audit_names_principals_and_no_tokens().await;
}

/// Opaque tokens, introspected (RFC 7662) by the gateway with its own client secret from the
/// environment: the introspection answer's claims reach the rules as `caller.claims`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspected_callers_get_their_own_lists() {
    let provider = Provider::start().await;
    let issuer = provider.issuer();
    let dir = tempfile::tempdir().unwrap();
    let (_upstream, upstream_url) = serve_upstream(&dir).await;

    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    provider.opaque_for(&resource).await;
    let config = json!({
        "mcpServers": {"upstream": {"url": upstream_url, "prefix": "up"}},
        "gateway": {
            "auth": {
                "issuer": issuer,
                "resource": resource,
                "introspection": {"client_id": "rs-introspect", "client_secret_env": "RS_SECRET"},
            },
            "policy": {"rules": [
                {
                    "deny": "tool.name == \"up__word_count\" && caller.claims.client_id != \"rs-test-2\"",
                    "why": "word counts are for the second client",
                },
                {
                    "deny": "tool.name == \"up__add\" && !(\"math\" in caller.scopes)",
                    "why": "adding needs the math scope",
                },
            ]},
        },
    });
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .env("RS_SECRET", "rs-introspect-secret")
        .args([
            "gateway",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--config",
        ])
        .arg(&file);
    let (_gateway, url) =
        tokio::task::spawn_blocking(move || started(gateway, "the gateway serves at "))
            .await
            .unwrap();
    let http = reqwest::Client::new();

    let a = provider
        .token(("rs-test", "rs-secret"), &resource, "tools:read")
        .await;
    let b = provider
        .token(("rs-test-2", "rs-secret-2"), &resource, "tools:read math")
        .await;
    assert!(!a.contains('.') && !b.contains('.'), "opaque: {a} {b}");
    let (a_tools, a_scope) = listed(&http, &url, &a).await;
    let (b_tools, _) = listed(&http, &url, &b).await;
    assert!(
        a_tools.contains(&"up__echo".to_owned())
            && !a_tools.contains(&"up__add".to_owned())
            && !a_tools.contains(&"up__word_count".to_owned()),
        "{a_tools:?}"
    );
    assert!(
        b_tools.contains(&"up__add".to_owned()) && b_tools.contains(&"up__word_count".to_owned()),
        "{b_tools:?}"
    );
    assert_eq!(a_scope, json!("private"));
    let (count, error) = called(
        &http,
        &url,
        &b,
        "up__word_count",
        json!({"text": "one two"}),
    )
    .await;
    assert!(!error && count.contains('2'), "{count}");
    let forged = send(
        &http,
        &url,
        Some("not-a-token-it-issued"),
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(forged.status, 401, "{}", forged.message);
}
