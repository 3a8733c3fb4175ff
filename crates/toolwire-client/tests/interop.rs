//! Interop with servers Toolwire did not write: the Python SDK (`mcp` 2.x from PyPI, speaking
//! 2026-07-28) and a legacy server speaking only 2025-11-25 (`mcp` 1.x), each over Streamable
//! HTTP and stdio. The servers are `interop/python/{modern,legacy}_server.py`.
//!
//! The two Python environments install themselves from PyPI on first use (scripts/parts: about
//! 70 MB each, under a minute, once); `TOOLWIRE_INTEROP_MODERN_PYTHON` and
//! `TOOLWIRE_INTEROP_LEGACY_PYTHON` name other interpreters with `mcp` installed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolwire_client::protocol::{ContentBlock, ElicitRequestParams, SubscriptionFilter};
use toolwire_client::{CallOptions, Client, ClientBuilder, ServerEra, StdioCommand};
use toolwire_testkit::RegistryPart;

#[derive(Clone, Copy, Debug)]
enum Flavor {
    /// PyPI `mcp` 2.x, 2026-07-28.
    Modern,
    /// PyPI `mcp` 1.x, 2025-11-25 only.
    Legacy,
}

impl Flavor {
    fn python(self) -> String {
        let var = match self {
            Flavor::Modern => "TOOLWIRE_INTEROP_MODERN_PYTHON",
            Flavor::Legacy => "TOOLWIRE_INTEROP_LEGACY_PYTHON",
        };
        let part = match self {
            Flavor::Modern => RegistryPart::Mcp2Python,
            Flavor::Legacy => RegistryPart::Mcp1Python,
        };
        std::env::var(var).unwrap_or_else(|_| part.path().to_string_lossy().into_owned())
    }

    fn script(self) -> String {
        let name = match self {
            Flavor::Modern => "modern_server.py",
            Flavor::Legacy => "legacy_server.py",
        };
        let path: PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "..",
            "..",
            "interop",
            "python",
            name,
        ]
        .iter()
        .collect();
        path.to_string_lossy().into_owned()
    }
}

/// A Python HTTP server, killed on drop.
struct PythonServer {
    child: Child,
    url: String,
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_http(flavor: Flavor) -> PythonServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(flavor.python())
        .arg(flavor.script())
        .arg("127.0.0.1")
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the Python server");
    let server = PythonServer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the {flavor:?} Python server did not listen on port {port} within 15 s");
}

/// A client that answers elicitations with the name "Ada" and counts them.
fn builder(elicited: Arc<AtomicUsize>) -> ClientBuilder {
    ClientBuilder::new("toolwire-interop", "1.0")
        .timeout(Duration::from_secs(30))
        .on_elicit(move |request| {
            let elicited = elicited.clone();
            async move {
                elicited.fetch_add(1, Ordering::SeqCst);
                match request {
                    ElicitRequestParams::Form(form) => {
                        assert!(form.requested_schema.properties.contains_key("name"));
                        toolwire_client::accepted(&json!({"name": "Ada"}))
                    }
                    other => panic!("expected a form elicitation, got {other:?}"),
                }
            }
        })
}

fn text(result: &toolwire_client::protocol::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The same script against every server: list, plain and structured calls, elicitation,
/// progress, a failing tool, and the era the client settled on.
async fn exercise(client: &Client, flavor: Flavor, elicited: &AtomicUsize) {
    let discover = client.discover().await.expect("discover");
    let expected = match flavor {
        Flavor::Modern => ServerEra::Modern {
            version: "2026-07-28".into(),
        },
        Flavor::Legacy => ServerEra::Legacy {
            version: "2025-11-25".into(),
        },
    };
    assert_eq!(client.era(), Some(expected));
    assert!(discover.capabilities.tools.is_some(), "{discover:?}");

    let tools = client.list_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["echo", "add", "greet", "count", "fail"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }

    let echoed = client
        .call_tool("echo", json!({"message": "héllo wörld"}))
        .await
        .expect("echo");
    assert!(!echoed.is_error());
    assert_eq!(text(&echoed), "héllo wörld");

    // Structured output, validated against the tool's outputSchema by the client.
    let sum = client
        .call_tool("add", json!({"a": 2, "b": 40}))
        .await
        .expect("add");
    assert_eq!(sum.structured_content, Some(json!({"sum": 42})));

    // Elicitation: an MRTR round (modern) or a server request mid-call (legacy).
    let greeting = client.call_tool("greet", json!({})).await.expect("greet");
    assert_eq!(text(&greeting), "Hello, Ada!", "{greeting:?}");
    assert_eq!(elicited.load(Ordering::SeqCst), 1);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let counted = client
        .call_tool_with(
            "count",
            json!({"n": 3}),
            CallOptions::default().on_progress(move |p| record.lock().unwrap().push(p.progress)),
        )
        .await
        .expect("count");
    assert_eq!(text(&counted), "counted to 3");
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);

    let failed = client.call_tool("fail", json!({})).await.expect("fail");
    assert!(failed.is_error(), "{failed:?}");
    assert!(!text(&failed).is_empty(), "{failed:?}");

    let unknown = client.call_tool("no_such_tool", json!({})).await;
    assert!(
        unknown.is_err() || unknown.as_ref().is_ok_and(|r| r.is_error()),
        "{unknown:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http() {
    let server = start_http(Flavor::Modern).await;
    let elicited = Arc::new(AtomicUsize::new(0));
    let client = builder(elicited.clone()).http(&server.url).unwrap();
    exercise(&client, Flavor::Modern, &elicited).await;
    // The Python SDK acknowledges a listen stream.
    let subscription = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .expect("listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio() {
    let elicited = Arc::new(AtomicUsize::new(0));
    let command = StdioCommand::new(Flavor::Modern.python())
        .arg(Flavor::Modern.script())
        .arg("--stdio");
    let client = builder(elicited.clone())
        .spawn_command(command)
        .await
        .unwrap();
    exercise(&client, Flavor::Modern, &elicited).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_server_over_http() {
    let server = start_http(Flavor::Legacy).await;
    let elicited = Arc::new(AtomicUsize::new(0));
    let client = builder(elicited.clone()).http(&server.url).unwrap();
    exercise(&client, Flavor::Legacy, &elicited).await;

    // The era is remembered for the origin (V-14): a second client initializes at once.
    let again = ClientBuilder::new("toolwire-interop", "1.0")
        .http(&server.url)
        .unwrap();
    again.list_tools().await.expect("tools/list");
    assert!(matches!(again.era(), Some(ServerEra::Legacy { .. })));

    // Without fallback, the same server fails with a clear error (V-12 still inspected).
    let strict = ClientBuilder::new("toolwire-interop", "1.0")
        .legacy_fallback(false)
        .http(&server.url)
        .unwrap();
    let error = strict.list_tools().await.expect_err("a legacy server");
    assert!(
        error.to_string().contains("legacy fallback is off"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_server_over_stdio() {
    let elicited = Arc::new(AtomicUsize::new(0));
    let command = StdioCommand::new(Flavor::Legacy.python())
        .arg(Flavor::Legacy.script())
        .arg("--stdio");
    let client = builder(elicited.clone())
        .spawn_command(command)
        .await
        .unwrap();
    exercise(&client, Flavor::Legacy, &elicited).await;
    client.close().await;

    // Modern-only clients still probe, so a legacy server fails deterministically (V-11).
    let command = StdioCommand::new(Flavor::Legacy.python())
        .arg(Flavor::Legacy.script())
        .arg("--stdio");
    let strict = ClientBuilder::new("toolwire-interop", "1.0")
        .legacy_fallback(false)
        .spawn_command(command)
        .await
        .unwrap();
    let error = strict.list_tools().await.expect_err("a legacy server");
    assert!(
        error.to_string().contains("legacy fallback is off"),
        "{error}"
    );
    strict.close().await;
}
