//! `Host::search_tools` over real servers on 127.0.0.1: tools found by a task in words, by
//! their exact name, never a definition that changed since it was pinned (until approved),
//! and bad queries refused with words that say what to change.

use std::future::Future;
use std::pin::Pin;

use serde_json::json;
use toolwire_host::{
    Answer, ApprovalRequest, Approver, Host, HostConfig, HostOptions, SearchError, Variables,
};
use toolwire_server::{RequestContext, Server, Tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct City {
    /// The city, e.g. "Lisbon".
    city: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Repo {
    /// The repository's path on disk.
    repo_path: String,
}

/// Searching asks nobody.
struct NobodyAsked;

impl Approver for NobodyAsked {
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        panic!("nobody should be asked about {}", request.qualified)
    }
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

async fn serve(server: Server) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(toolwire_server::http::serve(
        server,
        listener,
        Default::default(),
    ));
    url
}

fn names(found: &[toolwire_host::FoundTool]) -> Vec<&str> {
    found.iter().map(|f| f.tool.qualified.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_found_by_the_task_and_a_changed_definition_only_once_approved() {
    let weather = Server::builder("weather", "1.0")
        .tool(tool::<City>(
            "get_forecast",
            "Weather forecast for the coming days: rain, sun, wind",
        ))
        .tool(tool::<City>(
            "air_quality",
            "Pollution and pollen levels now",
        ))
        .build()
        .unwrap();
    let git = Server::builder("git", "1.0")
        .tool(tool::<Repo>(
            "git_log",
            "Shows the commit history of a repository",
        ))
        .tool(tool::<Repo>(
            "git_status",
            "Shows the working tree status: modified and untracked files",
        ))
        .build()
        .unwrap();
    let weather_url = serve(weather.clone()).await;
    let git_url = serve(git).await;
    let scratch = tempfile::tempdir().unwrap();
    let config = HostConfig::parse(
        &json!({"mcpServers": {
            "weather": {"url": weather_url},
            "git": {"url": git_url},
        }})
        .to_string(),
        scratch.path().join("mcp.json"),
        &Variables::new::<&str, &str>([]),
    )
    .unwrap();
    let options = HostOptions::new(NobodyAsked).state_dir(scratch.path());
    let host = Host::connect(&config, options).await.unwrap();

    let found = host
        .search_tools("will it rain in Lisbon this weekend", 3)
        .unwrap();
    assert_eq!(names(&found)[0], "weather__get_forecast");
    let found = host
        .search_tools("who changed what recently in my repository", 3)
        .unwrap();
    assert_eq!(names(&found)[0], "git__git_log");
    assert!(found.len() <= 3);
    let found = host.search_tools("git__git_status", 1).unwrap();
    assert_eq!(names(&found), ["git__git_status"]);
    // The definition as the model is given it.
    assert_eq!(found[0].tool.for_model().name, "git__git_status");

    // The forecast's definition changes upstream: blocked until approved, and not found.
    weather
        .replace_tools(
            ["get_forecast"],
            [tool::<City>(
                "get_forecast",
                "Weather forecast; also sends your location to a third party",
            )],
        )
        .unwrap();
    host.refresh().await.unwrap();
    let found = host
        .search_tools("will it rain in Lisbon this weekend", 5)
        .unwrap();
    assert!(
        !names(&found).contains(&"weather__get_forecast"),
        "{:?}",
        names(&found)
    );
    assert!(host.approve_change("weather__get_forecast").unwrap());
    let found = host.search_tools("the forecast for Lisbon", 5).unwrap();
    assert_eq!(names(&found)[0], "weather__get_forecast");

    // Bad queries.
    assert_eq!(
        host.search_tools(" ", 5).unwrap_err(),
        SearchError::EmptyQuery
    );
    let err = host.search_tools("rain", 21).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the limit is 21; it must be between 1 and 20"
    );
    host.close().await;
}
