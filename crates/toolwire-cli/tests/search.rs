//! `toolwire tools --search "QUERY"` as a person uses it, in a terminal and piped: the tools
//! best matching a task in words, best first, at most `--limit`; scores in `--json`; a search
//! that finds nothing says so and ends with status 1 (as grep), one that asks for too many
//! with 2.

use std::time::Duration;

#[path = "support/home.rs"]
mod home;
#[path = "support/pty.rs"]
mod pty;

use home::{Home, text};
use pty::{finish, see};
use serde_json::{Value, json};
use toolwire_server::{RequestContext, Server, Tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct City {
    /// The city, e.g. "Lisbon".
    city: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Path {
    /// A file's path.
    path: String,
}

fn tool<A>(name: &str, description: &str) -> Tool
where
    A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
{
    Tool::new(
        name,
        |_: A, _: RequestContext| async move { "done".to_owned() },
    )
    .description(description)
}

/// A server on 127.0.0.1, for as long as the value lives.
struct Running {
    url: String,
    _runtime: tokio::runtime::Runtime,
}

fn serve(server: Server) -> Running {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    runtime.spawn(toolwire_server::http::serve(
        server,
        listener,
        Default::default(),
    ));
    Running {
        url,
        _runtime: runtime,
    }
}

fn desk() -> Server {
    Server::builder("desk", "1")
        .tool(tool::<City>(
            "get_forecast",
            "Weather forecast for the coming days: rain, sun, wind",
        ))
        .tool(tool::<City>(
            "air_quality",
            "Pollution and pollen levels now",
        ))
        .tool(tool::<Path>(
            "read_text_file",
            "Read a file from disk as text",
        ))
        .tool(tool::<Path>("move_file", "Move or rename a file"))
        .build()
        .unwrap()
}

#[test]
fn a_task_in_words_finds_its_tool_first_in_a_terminal() {
    let server = serve(desk());
    let home = Home::new("search", &server.url);
    let mut session = home.terminal(&["tools", "--search", "will it rain in Lisbon on Sunday"]);
    session.set_expect_timeout(Some(Duration::from_secs(20)));
    let shown = see(&mut session, "Weather forecast for the coming days");
    assert!(
        shown.contains("demo__get_forecast(city: string)"),
        "{shown:?}"
    );
    assert_eq!(finish(session), 0);

    // Piped: best first, at most the limit.
    let searched = home.run(&["tools", "--search", "rename this document", "--limit", "1"]);
    let (out, err) = text(&searched);
    assert_eq!(searched.status.code(), Some(0), "{err}");
    let heads: Vec<&str> = out.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(heads.len(), 1, "{out}");
    assert!(
        heads[0].starts_with("demo__move_file(path: string)"),
        "{out}"
    );

    // As JSON, with scores, best first.
    let searched = home.run(&["tools", "--search", "pollen", "--json"]);
    let listed: Value = serde_json::from_slice(&searched.stdout).unwrap();
    assert_eq!(listed[0]["name"], json!("demo__air_quality"));
    assert!(listed[0]["score"].as_f64().unwrap() > 0.0);

    // The exact name.
    let searched = home.run(&["tools", "--search", "demo__read_text_file", "--limit", "1"]);
    assert!(
        text(&searched)
            .0
            .starts_with("demo__read_text_file(path: string)")
    );
}

#[test]
fn a_search_that_finds_nothing_or_asks_too_much_says_so() {
    let server = serve(desk());
    let home = Home::new("search-none", &server.url);
    let none = home.run(&["tools", "--search", "zzyzx qwxq"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        text(&none).1.contains("no tool matches zzyzx qwxq"),
        "{}",
        text(&none).1
    );
    let many = home.run(&["tools", "--search", "file", "--limit", "21"]);
    assert_eq!(many.status.code(), Some(2));
    assert!(
        text(&many)
            .1
            .contains("--search: the limit is 21; it must be between 1 and 20"),
        "{}",
        text(&many).1
    );
    // --limit means nothing without --search.
    let alone = home.run(&["tools", "--limit", "3"]);
    assert_eq!(alone.status.code(), Some(2));
    assert!(text(&alone).1.contains("--search"), "{}", text(&alone).1);
}
