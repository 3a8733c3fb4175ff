//! Tool search through `toolwire gateway` as a client meets it: the real binary in front of a
//! dozen servers of `bench/search/corpus`, each replayed by `bench/search/replay` with its real
//! definitions, their tools past the discovery threshold (lowered to 50) so that `auto` gives
//! search; called with `toolwire_client`. The list holds only the search tools; a task in words
//! finds the tool, which runs through `call_tool` and directly; a denied tool is never found,
//! and `call_tool` of it answers as for a name no tool has. (`scripts/search-interop` runs the
//! same with foreign clients over all 50 servers, a withheld definition too.)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_client::{Client, ClientBuilder};

#[path = "support/gateway.rs"]
mod support;

use support::toolwire;

/// The corpus servers behind the gateway (103 tools).
const SERVERS: [&str; 12] = [
    "npm-modelcontextprotocol-server-slack",
    "npm-modelcontextprotocol-server-github",
    "npm-modelcontextprotocol-server-brave-search",
    "npm-modelcontextprotocol-server-filesystem",
    "npm-modelcontextprotocol-server-memory",
    "npm-modelcontextprotocol-server-google-maps",
    "npm-modelcontextprotocol-server-puppeteer",
    "npm-modelcontextprotocol-server-gitlab",
    "pypi-mcp-server-time",
    "pypi-mcp-server-fetch",
    "pypi-mcp-server-git",
    "pypi-mcp-server-sqlite",
];

const DENIED: &str = "github__create_issue";
const UNKNOWN: &str = "github__no_such_tool";

fn bench_search() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/search")
}

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The text blocks of a result, and whether it is an error.
fn text(result: &toolwire_client::protocol::CallToolResult) -> (String, bool) {
    let value = serde_json::to_value(result).unwrap();
    let text = value["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect();
    (text, result.is_error == Some(true))
}

/// The names `search_tools` finds for `query`, best first.
async fn search(client: &Client, query: &str, limit: u64) -> Vec<String> {
    let result = client
        .call_tool("search_tools", json!({"query": query, "limit": limit}))
        .await
        .expect("search_tools answers");
    let (text, is_error) = text(&result);
    assert!(!is_error, "search_tools failed: {text}");
    let found = result.structured_content.expect("structuredContent");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        found,
        "the text is the structured content's JSON"
    );
    assert!(found["catalog_version"].is_string() && found["total_matched"].is_u64());
    found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(
                t["inputSchema"].is_object() && t["score"].is_number(),
                "{t}"
            );
            t["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn a_gateway_past_its_threshold_serves_search_and_finds_only_what_the_caller_may_use() {
    if !python3() {
        eprintln!("SKIPPED: python3 is not installed; the replayed corpus servers need it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let replay = bench_search().join("replay");
    let mut servers = serde_json::Map::new();
    let mut prefixes = Vec::new();
    for name in SERVERS {
        let file = bench_search().join("corpus").join(format!("{name}.json"));
        let corpus: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let prefix = corpus["prefix"].as_str().unwrap().to_owned();
        servers.insert(
            prefix.clone(),
            json!({"command": "python3", "args": [replay, file], "prefix": prefix}),
        );
        prefixes.push(prefix);
    }
    let config = json!({
        "mcpServers": servers,
        "gateway": {
            "discovery": {"threshold": 50},
            "policy": {"rules": [{"deny": format!("tool.name == \"{DENIED}\"")}]},
        }
    });
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut command = toolwire(&dir);
    command
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    let started = support::start(command, "the gateway serves at ");
    let _gateway = started.child;

    // Every upstream connected: before the gateway served, or after.
    let mut seen = started.before;
    let deadline = Instant::now() + Duration::from_secs(60);
    let connected = |seen: &[String], p: &str| {
        seen.iter().any(|l| {
            l.contains(&format!("toolwire: upstream {p}: "))
                || l.contains(&format!(" upstream={p} tools="))
        })
    };
    while let Some(missing) = prefixes.iter().find(|p| !connected(&seen, p)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match started.lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("{missing} did not connect within 60 s: {seen:#?}"),
        }
    }
    let lines = started.lines;
    std::thread::spawn(move || while lines.recv().is_ok() {});

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = ClientBuilder::new("gateway-search-test", "1")
            .timeout(Duration::from_secs(30))
            .http(&started.url)
            .unwrap();
        let mut listed: Vec<String> = client
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            ["call_tool", "search_tools"],
            "103 tools > 50: search"
        );

        // A task in words finds the tool; it runs through call_tool and directly.
        let found = search(&client, "post a message to a Slack channel", 5).await;
        assert!(
            found.iter().any(|n| n == "slack__slack_post_message"),
            "{found:?}"
        );
        let arguments = json!({"channel_id": "C0123456", "text": "hello"});
        let want = r#"called slack_post_message with {"channel_id":"C0123456","text":"hello"}"#;
        let through = client
            .call_tool(
                "call_tool",
                json!({"name": "slack__slack_post_message", "arguments": arguments}),
            )
            .await
            .unwrap();
        assert_eq!(text(&through), (want.to_owned(), false));
        let direct = client
            .call_tool("slack__slack_post_message", arguments)
            .await
            .unwrap();
        assert_eq!(text(&direct), (want.to_owned(), false));
        let found = search(&client, "what time is it in Tokyo right now", 5).await;
        assert!(
            found.iter().any(|n| n == "time__get_current_time"),
            "{found:?}"
        );

        // The denied tool: never found, by words or by name; call_tool answers as for a name
        // no tool has; a direct call is refused.
        for query in ["open a new issue in a GitHub repository", DENIED] {
            let found = search(&client, query, 20).await;
            assert!(!found.iter().any(|n| n == DENIED), "{query}: {found:?}");
            assert!(
                found.iter().any(|n| n.starts_with("github__")),
                "{query}: the rest of github is found: {found:?}"
            );
        }
        let call = |name: &str| {
            client.call_tool(
                "call_tool",
                json!({"name": name, "arguments": {"owner": "o", "repo": "r", "title": "t"}}),
            )
        };
        let (denied, denied_error) = text(&call(DENIED).await.unwrap());
        let (unknown, unknown_error) = text(&call(UNKNOWN).await.unwrap());
        assert!(denied_error && unknown_error, "{denied} / {unknown}");
        assert_eq!(
            denied.replace(DENIED, "NAME"),
            unknown.replace(UNKNOWN, "NAME")
        );
        match client
            .call_tool(DENIED, json!({"owner": "o", "repo": "r", "title": "t"}))
            .await
        {
            Ok(result) => {
                let (said, is_error) = text(&result);
                assert!(is_error && !said.starts_with("called "), "{said}");
            }
            Err(error) => assert!(!error.to_string().contains("called "), "{error}"),
        }
    });
}
