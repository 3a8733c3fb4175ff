//! The host over real servers installed from the registries (installed on first use by
//! `scripts/host-interop env`): npm `@modelcontextprotocol/server-everything`
//! and PyPI `mcp-server-time`, both 2025-11-25 servers on stdio, next to a Toolwire server over
//! HTTP, in one list, called through the policy.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolwire_host::{
    Answer, ApprovalRequest, Approver, Host, HostConfig, HostOptions, ServerState, Variables,
};
use toolwire_server::{RequestContext, Server, Tool};

/// Allows every call once and notes what it was shown.
#[derive(Clone, Default)]
struct AllowOnce(Arc<Mutex<Vec<(String, Value, bool)>>>);

impl Approver for AllowOnce {
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        self.0.lock().unwrap().push((
            request.qualified.to_owned(),
            request.arguments.clone(),
            request.annotations_trusted,
        ));
        Box::pin(async { Answer::AllowOnce })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

/// A variable naming a real server (installed on first use; see `toolwire_testkit::real_server`).
fn var(name: &str) -> String {
    toolwire_testkit::real_server(name)
}

fn first_text(result: &toolwire_client::protocol::CallToolResult) -> String {
    serde_json::to_value(result).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_servers_and_a_toolwire_server_in_one_list() {
    let ours = Server::builder("ours", "1")
        .tool(Tool::new(
            "reverse",
            |a: Text, _: RequestContext| async move { a.text.chars().rev().collect::<String>() },
        ))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(toolwire_server::http::serve(
        ours,
        listener,
        Default::default(),
    ));
    let config = HostConfig::parse(
        &json!({
            "mcpServers": {
                "everything": {"command": "${TOOLWIRE_HOST_NODE}",
                               "args": ["${TOOLWIRE_HOST_EVERYTHING}", "stdio"],
                               "tools": {"deny": ["*long*", "*sampl*", "*elicit*"]}},
                "time": {"command": "${TOOLWIRE_HOST_TIME_PYTHON}",
                         "args": ["-m", "mcp_server_time", "--local-timezone=UTC"],
                         "trust": true},
                "ours": {"url": url, "approval": {"allow": ["ours__*"]}},
            }
        })
        .to_string(),
        "interop.json",
        &Variables::new([
            ("TOOLWIRE_HOST_NODE", var("TOOLWIRE_HOST_NODE")),
            ("TOOLWIRE_HOST_EVERYTHING", var("TOOLWIRE_HOST_EVERYTHING")),
            (
                "TOOLWIRE_HOST_TIME_PYTHON",
                var("TOOLWIRE_HOST_TIME_PYTHON"),
            ),
        ]),
    )
    .unwrap();
    let approver = AllowOnce::default();
    let scratch = tempfile::tempdir().unwrap();
    let audit = scratch.path().join("audit.jsonl");
    let host = Host::connect(
        &config,
        HostOptions::new(approver.clone()).audit_log(&audit),
    )
    .await
    .unwrap();
    for status in host.servers() {
        eprintln!("{}: {:?}", status.name, status.state);
        assert!(
            matches!(status.state, ServerState::Connected { tools } if tools > 0),
            "{status:?}"
        );
    }
    let tools = host.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.qualified.as_str()).collect();
    eprintln!("tools: {names:?}");
    assert!(names.contains(&"everything__echo"), "{names:?}");
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(names.contains(&"ours__reverse"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("long")),
        "the deny filter holds: {names:?}"
    );

    // A legacy npm server, asked about (untrusted) with its full arguments.
    let echo = host
        .call("everything__echo", json!({"message": "hello"}))
        .await;
    assert!(!echo.is_error(), "{echo:?}");
    assert!(first_text(&echo).contains("hello"), "{echo:?}");
    // A legacy Python server, trusted: its read-only hint (if it gives one) is relied on; else
    // the person is asked. Either way the call goes through.
    let now = host
        .call("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert!(!now.is_error(), "{now:?}");
    assert!(first_text(&now).contains("UTC"), "{now:?}");
    // Our own, allowed by rule without asking.
    let reversed = host.call("ours__reverse", json!({"text": "abc"})).await;
    assert_eq!(first_text(&reversed), "cba");
    // A bad argument reaches the model as an error result, never a panic.
    let bad = host.call("everything__echo", json!({"message": 5})).await;
    assert!(bad.is_error(), "{bad:?}");

    // The npm server's prompts, resources and templates beside its tools, under the host's
    // names; a resource and a template's expansion read from it through them.
    let prompts: Vec<String> = host.prompts().iter().map(|p| p.qualified.clone()).collect();
    let resources: Vec<String> = host.resources().iter().map(|r| r.uri.clone()).collect();
    let templates: Vec<String> = host
        .resource_templates()
        .iter()
        .map(|t| t.uri_template.clone())
        .collect();
    eprintln!("prompts: {prompts:?}\nresources: {resources:?}\ntemplates: {templates:?}");
    assert!(
        !prompts.is_empty() && prompts.iter().all(|p| p.starts_with("everything__")),
        "{prompts:?}"
    );
    let first = resources
        .first()
        .expect("the everything server lists resources");
    assert!(first.starts_with("toolwire://everything/"), "{resources:?}");
    let read = host.read_resource(first).await.unwrap();
    assert_eq!(read.contents[0].uri(), first);
    let template = templates.first().expect("and resource templates");
    let (_, original) = toolwire_host::uris::unwrap(template).unwrap();
    assert!(original.contains('{'), "{template}");
    // An expansion of the host's template is the server's expansion, read from it.
    if let Some(at) = template.find('{') {
        let expanded = format!("{}1", &template[..at]);
        let read = host.read_resource(&expanded).await;
        assert!(read.is_ok(), "{expanded}: {read:?}");
    }
    let simple = prompts
        .iter()
        .find(|p| p.contains("simple"))
        .unwrap_or(&prompts[0]);
    let got = host.get_prompt(simple, json!({})).await;
    assert!(got.is_ok(), "{simple}: {got:?}");

    let asked = approver.0.lock().unwrap().clone();
    assert_eq!(asked[0].0, "everything__echo");
    assert_eq!(asked[0].1, json!({"message": "hello"}));
    assert!(!asked[0].2, "an untrusted server's hints are not relied on");
    assert!(asked.iter().all(|(name, ..)| name != "ours__reverse"));
    host.close().await;
    let verified = toolwire_host::verify(&audit).unwrap();
    assert!(verified.records >= 9, "{verified:?}");
}
