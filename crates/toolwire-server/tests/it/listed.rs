//! Tools a caller may call but whose list leaves them out (`ToolVisibility::check_listed`),
//! and a tool that calls another by name (`Server::call_within`), over real HTTP.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use toolwire_server::{
    NoArgs, RequestContext, Server, Tool, ToolCheck, ToolError, ToolVisibility, Viewer,
};

use crate::http_listen::Listen;
use crate::support::*;

/// `secret_*` is for no caller; `quiet_*` may be called by every caller and is listed for none.
struct QuietTools;

impl ToolVisibility for QuietTools {
    fn check<'a>(&'a self, _: Viewer<'a>) -> ToolCheck<'a> {
        Box::new(|tool| tool.starts_with("secret_").then(|| "for nobody".to_owned()))
    }

    fn check_listed<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        let check = self.check(viewer);
        Box::new(move |tool| {
            check(tool).or_else(|| tool.starts_with("quiet_").then(|| "not listed".to_owned()))
        })
    }
}

fn said(name: &'static str) -> Tool {
    Tool::new(
        name,
        move |_: NoArgs, _: RequestContext| async move { name },
    )
    .description("says its name")
}

fn names(reply: &Reply) -> Vec<String> {
    reply.last()["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

#[tokio::test]
async fn a_tool_left_out_of_the_list_is_still_called_and_its_changes_are_no_news() {
    let server = Server::builder("listed", "1")
        .tool(said("shown"))
        .tool(said("quiet_one"))
        .tool(said("secret_one"))
        .tool_visibility(QuietTools)
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let list = post(&s.url, &request(1, "tools/list", json!({}))).await;
    assert_eq!(names(&list), ["shown"]);
    assert_eq!(list.last()["result"]["cacheScope"], "private");

    let quiet = post(&s.url, &call(2, "quiet_one", json!({}))).await;
    assert_eq!(
        quiet.last()["result"]["content"][0]["text"],
        "quiet_one",
        "{}",
        quiet.body
    );
    let secret = post(&s.url, &call(3, "secret_one", json!({}))).await;
    assert_eq!(secret.error_code(), Some(-32602), "{}", secret.body);

    let mut listening = Listen::open(&s, 4, json!({"toolsListChanged": true})).await;
    let ack = listening.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    // A tool the caller may call but is not listed: no news.
    s.server.add_tool(said("quiet_two")).unwrap();
    assert!(listening.quiet_for(300).await, "told of an unlisted tool");
    // A listed one: news.
    s.server.add_tool(said("shown_two")).unwrap();
    let told = listening.next().await.unwrap();
    assert_eq!(told["method"], "notifications/tools/list_changed");
    s.server.remove_tool("quiet_one").unwrap();
    assert!(listening.quiet_for(300).await, "told of an unlisted tool");
    s.stop().await;
}

/// A tool that calls the tool its arguments name through the server.
fn caller(server: Arc<OnceLock<Server>>) -> Tool {
    Tool::raw(
        "call_by_name",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {}}}),
        move |arguments: Value, ctx: RequestContext| {
            let server = server.clone();
            async move {
                let server = server.get().expect("the server is built").clone();
                let name = arguments["name"].as_str().unwrap_or_default().to_owned();
                let inner = arguments.get("arguments").cloned().unwrap_or(json!({}));
                match server.call_within(&name, inner, ctx).await {
                    Some(result) => result,
                    None => Err(ToolError::Failed(format!("No tool {name}"))),
                }
            }
        },
    )
}

#[tokio::test]
async fn a_tool_called_by_name_goes_through_the_checks_of_its_own_call() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Count {
        n: u32,
    }
    let handle = Arc::new(OnceLock::new());
    let server = Server::builder("listed", "1")
        .tool(caller(handle.clone()))
        .tool(said("quiet_one"))
        .tool(said("secret_one"))
        .tool(Tool::new(
            "count",
            |args: Count, _: RequestContext| async move { format!("{}", args.n) },
        ))
        .tool(Tool::new(
            "ask",
            |_: NoArgs, ctx: RequestContext| async move {
                match ctx.request_state::<u8>()? {
                    Some(7) => Ok::<_, ToolError>("answered".to_owned()),
                    _ => Err(toolwire_server::InputRequired::new().state(7u8).into()),
                }
            },
        ))
        .tool_visibility(QuietTools)
        .build()
        .unwrap();
    let _ = handle.set(server.clone());
    let s = TestServer::start(server).await;
    let text = |reply: &Reply| reply.last()["result"]["content"][0]["text"].clone();
    let by_name = |id, name: &str, arguments: Value| {
        call(
            id,
            "call_by_name",
            json!({"name": name, "arguments": arguments}),
        )
    };

    // Unlisted, yet called.
    let quiet = post(&s.url, &by_name(1, "quiet_one", json!({}))).await;
    assert_eq!(text(&quiet), "quiet_one", "{}", quiet.body);
    // Hidden and unknown alike: the calling tool words both.
    for (id, name) in [(2, "secret_one"), (3, "nothing_here")] {
        let refused = post(&s.url, &by_name(id, name, json!({}))).await;
        assert_eq!(
            refused.last()["result"]["isError"],
            true,
            "{}",
            refused.body
        );
        assert_eq!(text(&refused), format!("No tool {name}"));
    }
    // Its input schema is checked.
    let wrong = post(&s.url, &by_name(4, "count", json!({"n": "many"}))).await;
    assert_eq!(wrong.last()["result"]["isError"], true, "{}", wrong.body);
    let wrong = text(&wrong);
    assert!(
        wrong
            .as_str()
            .unwrap()
            .contains("Invalid arguments for tool count"),
        "{wrong}"
    );
    let counted = post(&s.url, &by_name(5, "count", json!({"n": 3}))).await;
    assert_eq!(text(&counted), "3", "{}", counted.body);

    // A round of the tool called is the calling tool's: its retry reaches the tool called.
    let asked = post(&s.url, &by_name(6, "ask", json!({}))).await;
    let result = &asked.last()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let state = result["requestState"].as_str().unwrap().to_owned();
    let mut retry = by_name(7, "ask", json!({}));
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] = json!({});
    let answered = post(&s.url, &retry).await;
    assert_eq!(text(&answered), "answered", "{}", answered.body);
    s.stop().await;
}
