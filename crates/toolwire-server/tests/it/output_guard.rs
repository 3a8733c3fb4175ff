//! The output guard end to end (T-15, T-22): what a tool returns is sanitized before it leaves,
//! over HTTP and stdio, for plain calls and tasks; a tool or server that turns it off (with a
//! reason) sends its output as it was, which is how these tests know the guard did the work.

use base64::Engine as _;
use serde_json::{Value, json};
use toolwire_server::protocol::{CallToolResult, ContentBlock, ResourceContents, ResourceLink};
use toolwire_server::{
    NoArgs, OutputGuard, RequestContext, Resource, Server, Structured, Tool, ToolError,
};

use crate::support::*;

const LEAK: &str = "\u{1b}[31mAWS AKIAIOSFODNN7EXAMPLE\u{1b}]0;owned\u{7} jwt eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlX2hlcmU\u{0}";
const CLEAN: &str = "AWS [REDACTED:aws-access-key] jwt [REDACTED:jwt]";

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Secret {
    token: String,
}

fn leaky(name: &str) -> Tool {
    Tool::new(name, |_: NoArgs, _: RequestContext| async {
        LEAK.to_owned()
    })
    .description("Returns terminal escapes and secrets")
}

fn server(guard: Option<OutputGuard>) -> Server {
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let fake = base64::engine::general_purpose::STANDARD.encode(b"<script>alert(1)</script>");
    let mut builder = Server::builder("guarded-output", "1")
        .tool(leaky("leaky"))
        .tool(leaky("raw").raw_output("prints a terminal session verbatim, on purpose"))
        .tool(
            Tool::new("structured", |_: NoArgs, _: RequestContext| async {
                Structured(Secret {
                    token: "ghp_0123456789abcdefghijklmnopqrstuvwxyz".into(),
                })
            })
            .description("Structured output with a token"),
        )
        .tool(
            Tool::new("media", move |_: NoArgs, _: RequestContext| {
                let (png, fake) = (png.clone(), fake.clone());
                async move {
                    let link = |uri: &str| {
                        ContentBlock::ResourceLink(ResourceLink {
                            uri: uri.into(),
                            name: "link".into(),
                            ..Default::default()
                        })
                    };
                    Ok::<_, ToolError>(CallToolResult::new(vec![
                        ContentBlock::image(png, "image/png"),
                        ContentBlock::image(fake, "image/png"),
                        link("notes://1"),
                        link("javascript:alert(1)"),
                    ]))
                }
            })
            .description("Media and links, some of them bad"),
        )
        .tool(
            Tool::new("slow_leak", |_: NoArgs, _: RequestContext| async {
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                LEAK.to_owned()
            })
            .description("Becomes a task, then leaks")
            .task_support(toolwire_server::TaskSupport::Optional),
        )
        .tool(split_secrets())
        .tool(
            Tool::new("huge", |_: NoArgs, _: RequestContext| async {
                "x".repeat(toolwire_server::DEFAULT_MAX_RESULT_BYTES + 10)
            })
            .description("Too much text"),
        )
        .resource(Resource::new(
            "notes://1",
            "note",
            |uri, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "n"))
            },
        ));
    if let Some(guard) = guard {
        builder = builder.output_guard(guard);
    }
    builder.build().unwrap()
}

/// A GitHub token with a zero-width space in the middle: invisible to a reader, and enough
/// to break a pattern match on the text as sent.
const SPLIT: &str = "ghp_0123456789abcdef\u{200B}ghijklmnopqrstuvwxyz";

/// Puts [`SPLIT`] in every string a result can carry: a text block, a resource link's URI
/// and `_meta`, an embedded resource's URI and text, the result's `_meta`, and
/// `structuredContent` at depth, as a value and as a key.
fn split_secrets() -> Tool {
    Tool::raw("split", json!({"type": "object"}), |_, _| async {
        let meta = || {
            let mut meta = serde_json::Map::new();
            meta.insert("dev.example/source".into(), json!({"token": SPLIT}));
            meta
        };
        let mut result = CallToolResult::new(vec![
            ContentBlock::text(format!("token {SPLIT}")),
            ContentBlock::ResourceLink(ResourceLink {
                uri: format!("https://example.com/repo?token={SPLIT}"),
                name: "repo".into(),
                meta: Some(meta()),
                ..Default::default()
            }),
            ContentBlock::resource(ResourceContents::text(
                format!("https://example.com/raw?token={SPLIT}"),
                "text/plain",
                format!("GITHUB_TOKEN={SPLIT}"),
            )),
        ]);
        result.structured_content = Some(json!({
            "deep": [{"token": SPLIT}],
            SPLIT: "the token as a key",
        }));
        result.meta = Some(toolwire_server::protocol::ResultMeta {
            extra: meta(),
            ..Default::default()
        });
        result
    })
    .description("Returns a token split by a zero-width space everywhere a string goes")
}

fn call(id: i64, name: &str) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}}))
}

fn text(reply: &Value, i: usize) -> String {
    reply["result"]["content"][i]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"))
        .to_owned()
}

#[tokio::test]
async fn results_are_sanitized_over_http_unless_a_tool_opts_out() {
    let s = TestServer::start(server(None)).await;
    let leaky = post(&s.url, &call(1, "leaky")).await;
    assert_eq!(text(leaky.last(), 0), CLEAN);
    let raw = post(&s.url, &call(2, "raw")).await;
    assert_eq!(text(raw.last(), 0), LEAK, "opted out with a reason");

    let structured = post(&s.url, &call(3, "structured")).await;
    let result = &structured.last()["result"];
    assert_eq!(
        result["structuredContent"]["token"],
        "[REDACTED:github-token]"
    );
    assert!(
        text(structured.last(), 0).contains("[REDACTED:github-token]"),
        "{result}"
    );

    let media = post(&s.url, &call(4, "media")).await;
    let content = &media.last()["result"]["content"];
    assert_eq!(content[0]["type"], "image", "a real PNG passes");
    assert!(
        text(media.last(), 1).contains("does not start like image/png"),
        "{content}"
    );
    assert_eq!(
        content[2]["type"], "resource_link",
        "the server's own scheme"
    );
    assert!(
        text(media.last(), 3).contains("\"javascript\" is not allowed"),
        "{content}"
    );

    let huge = post(&s.url, &call(5, "huge")).await;
    let cut = text(huge.last(), 0);
    assert!(
        cut.len() <= toolwire_server::DEFAULT_MAX_RESULT_BYTES + 100,
        "{}",
        cut.len()
    );
    assert!(cut.ends_with("truncated by the server: the result exceeded its size limit]"));
    s.stop().await;
}

#[tokio::test]
async fn a_server_without_the_guard_sends_output_as_it_was() {
    let s = TestServer::start(server(Some(OutputGuard::off("a test of the guard itself")))).await;
    assert_eq!(text(post(&s.url, &call(1, "leaky")).await.last(), 0), LEAK);
    let huge = post(&s.url, &call(2, "huge")).await;
    assert_eq!(
        text(huge.last(), 0).len(),
        toolwire_server::DEFAULT_MAX_RESULT_BYTES + 10
    );
    s.stop().await;

    let mine = OutputGuard::default()
        .without_default_secret_patterns()
        .secret_pattern("aws", "AKIA[0-9A-Z]{16}")
        .keep_control_characters();
    let s = TestServer::start(server(Some(mine))).await;
    let reply = post(&s.url, &call(3, "leaky")).await;
    let out = text(reply.last(), 0);
    assert!(
        out.contains("[REDACTED:aws]") && out.contains("eyJhbGciOiJFUzI1NiJ9"),
        "{out}"
    );
    assert!(out.contains('\u{1b}'), "controls kept");
    s.stop().await;
}

#[tokio::test]
async fn results_are_sanitized_over_stdio() {
    let mut session = StdioSession::start(server(None));
    session.send(&call(1, "leaky")).await;
    assert_eq!(text(&session.recv().await, 0), CLEAN);
    session.send(&call(2, "raw")).await;
    assert_eq!(text(&session.recv().await, 0), LEAK);
}

#[test]
fn a_bad_pattern_stops_the_build_naming_it() {
    let bad = Server::builder("x", "1")
        .output_guard(OutputGuard::default().secret_pattern("mine", "("))
        .build();
    assert!(bad.unwrap_err().to_string().contains("output guard"));
    let tool = Server::builder("x", "1")
        .tool(leaky("t").output_guard(OutputGuard::default().secret_pattern("mine", "[")))
        .build();
    assert!(tool.unwrap_err().to_string().contains("its output guard"));
}

#[tokio::test]
async fn a_tasks_result_is_sanitized_too() {
    let s = TestServer::start(server(None)).await;
    let with_tasks = |mut body: Value| {
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        body
    };
    let created = post(&s.url, &with_tasks(call(1, "slow_leak"))).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_owned();
    let get = with_tasks(request(2, "tasks/get", json!({"taskId": task_id})));
    let mut done = Value::Null;
    for _ in 0..100 {
        done = post(&s.url, &get).await.last()["result"].clone();
        if done["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(done["result"]["content"][0]["text"], CLEAN, "{done}");
    s.stop().await;
}

/// A secret split by a zero-width space (or another invisible format character) is still a
/// secret, wherever in the result it is: the guard removes the format characters before
/// matching and walks every string, `_meta` and link URIs included.
#[tokio::test]
async fn a_secret_split_by_a_zero_width_space_is_redacted_in_every_string() {
    let s = TestServer::start(server(None)).await;
    let reply = post(&s.url, &call(1, "split")).await;
    let result = &reply.last()["result"];
    let redacted = "[REDACTED:github-token]";
    let content = &result["content"];
    let strings = [
        ("text", &content[0]["text"]),
        ("link uri", &content[1]["uri"]),
        (
            "link _meta",
            &content[1]["_meta"]["dev.example/source"]["token"],
        ),
        ("embedded uri", &content[2]["resource"]["uri"]),
        ("embedded text", &content[2]["resource"]["text"]),
        (
            "result _meta",
            &result["_meta"]["dev.example/source"]["token"],
        ),
        (
            "structured",
            &result["structuredContent"]["deep"][0]["token"],
        ),
    ];
    for (place, value) in strings {
        let value = value
            .as_str()
            .unwrap_or_else(|| panic!("{place}: {result}"));
        assert!(value.contains(redacted), "{place}: {value:?}");
        assert!(!value.contains("ghp_"), "{place}: {value:?}");
    }
    let keys: Vec<&String> = result["structuredContent"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(keys.contains(&&redacted.to_owned()), "{keys:?}");
    assert!(!reply.body.contains("ghp_"), "{}", reply.body);
    s.stop().await;
}
