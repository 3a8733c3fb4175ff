//! Prompts, resources, templates and completion over real HTTP, and their listen notifications.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::protocol::{Completion, ContentBlock, PromptMessage, ResourceContents, Role};
use toolwire_server::{
    CompletionAsk, Elicited, Error, InputRequired, Prompt, RequestContext, Resource,
    ResourceTemplate, Server, ToolError,
};

use crate::support::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Topic {
    topic: String,
}

fn server() -> Server {
    Server::builder("offers", "1")
        .page_size(2)
        .prompt(
            Prompt::new("review", |args, _: RequestContext| async move {
                Ok::<_, ToolError>(vec![PromptMessage {
                    role: Role::User,
                    content: ContentBlock::text(format!("Review this {} code", args["language"])),
                }])
            })
            .description("Code review")
            .argument("language", "The language", true)
            .argument("style", "Optional style", false)
            .complete("language", |value, _| {
                ["rust", "ruby", "python"]
                    .iter()
                    .filter(|l| l.starts_with(value))
                    .map(|l| (*l).to_owned())
                    .collect()
            })
            .complete("style", |value, _| {
                assert_ne!(value, "boom", "a completer with a bug");
                Vec::new()
            }),
        )
        .prompt(
            Prompt::new("ask", |_, ctx: RequestContext| async move {
                match ctx.elicited::<Topic>("topic")? {
                    Some(Elicited::Accepted(t)) => Ok(format!("Talk about {}", t.topic)),
                    _ => Err(ToolError::from(
                        InputRequired::new().elicit::<Topic>("topic", "Which topic?"),
                    )),
                }
            })
            .description("Asks for a topic"),
        )
        .prompt(
            Prompt::new("third", |_, _: RequestContext| async {
                Ok::<_, ToolError>("3".to_owned())
            })
            .description("Third"),
        )
        .resource(
            Resource::new(
                "mem://notes",
                "notes",
                |uri, _: RequestContext| async move {
                    Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "hello"))
                },
            )
            .description("Notes"),
        )
        .resource(
            Resource::new("mem://empty", "empty", |_, _: RequestContext| async {
                Ok::<_, ToolError>(Vec::new())
            })
            .description("Returns nothing (a server bug)"),
        )
        .resource_template(
            ResourceTemplate::new(
                "mem://users/{id}",
                "user",
                |uri, vars, _: RequestContext| async move {
                    if vars["id"] == "404" {
                        return Err(ToolError::failed("no such user"));
                    }
                    Ok(ResourceContents::text(
                        uri,
                        "application/json",
                        json!({"id": vars["id"]}).to_string(),
                    ))
                },
            )
            .description("A user by id")
            .complete("id", |value, _| {
                (0..150)
                    .map(|i| i.to_string())
                    .filter(|i| i.starts_with(value))
                    .collect()
            }),
        )
        .build()
        .unwrap()
}

fn names(reply: &Reply, field: &str, key: &str) -> Vec<String> {
    reply.last()["result"][field]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn discover_declares_what_is_offered() {
    let s = TestServer::start(server()).await;
    let caps = post(&s.url, &request(1, "server/discover", json!({})))
        .await
        .last()["result"]["capabilities"]
        .clone();
    assert_eq!(caps["prompts"], json!({"listChanged": true}));
    assert_eq!(
        caps["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    assert_eq!(caps["completions"], json!({}));
    s.stop().await;
    // A tools-only server declares none of them and answers their methods with 404 + -32601.
    let tools_only = TestServer::start(builder().build().unwrap()).await;
    for method in ["prompts/list", "resources/list", "resources/templates/list"] {
        let reply = post(&tools_only.url, &request(1, method, json!({}))).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (404, Some(-32601)),
            "{method}"
        );
    }
    let err = tools_only
        .server
        .add_prompt(Prompt::new("p", |_, _: RequestContext| async {
            Ok::<_, ToolError>(String::new())
        }));
    assert!(matches!(err, Err(Error::NotOffered("prompts"))));
    tools_only.stop().await;
}

#[tokio::test]
async fn lists_page_with_cache_hints() {
    let s = TestServer::start(server()).await;
    let first = post(&s.url, &request(1, "prompts/list", json!({}))).await;
    assert_eq!(names(&first, "prompts", "name"), ["review", "ask"]);
    assert_eq!(
        first.last()["result"]["prompts"][0]["arguments"][0],
        json!({"name": "language", "description": "The language", "required": true})
    );
    let cursor = first.last()["result"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = post(
        &s.url,
        &request(2, "prompts/list", json!({"cursor": cursor})),
    )
    .await;
    assert_eq!(names(&second, "prompts", "name"), ["third"]);
    assert!(second.last()["result"].get("nextCursor").is_none());
    // A prompts cursor is not a resources cursor.
    assert_eq!(
        post(
            &s.url,
            &request(3, "resources/list", json!({"cursor": cursor}))
        )
        .await
        .error_code(),
        Some(-32602)
    );
    let resources = post(&s.url, &request(4, "resources/list", json!({}))).await;
    assert_eq!(
        names(&resources, "resources", "uri"),
        ["mem://notes", "mem://empty"]
    );
    let templates = post(&s.url, &request(5, "resources/templates/list", json!({}))).await;
    assert_eq!(
        names(&templates, "resourceTemplates", "uriTemplate"),
        ["mem://users/{id}"]
    );
    for reply in [&first, &resources, &templates] {
        assert!(
            reply.last()["result"]["ttlMs"].is_u64()
                && reply.last()["result"]["cacheScope"].is_string()
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn prompts_get() {
    let s = TestServer::start(server()).await;
    let get = |id, name: &str, args: Value| {
        request(id, "prompts/get", json!({"name": name, "arguments": args}))
    };
    let reply = post(&s.url, &get(1, "review", json!({"language": "rust"}))).await;
    assert_eq!(
        reply.last()["result"]["messages"][0]["content"]["text"],
        "Review this rust code"
    );
    assert_eq!(
        reply.last()["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "offers"
    );
    let missing = post(&s.url, &get(2, "review", json!({}))).await;
    assert_eq!(missing.error_code(), Some(-32602));
    assert!(missing.body.contains("language"));
    assert_eq!(
        post(&s.url, &get(3, "nope", json!({}))).await.error_code(),
        Some(-32602)
    );
    let not_strings = post(&s.url, &get(4, "review", json!({"language": 5}))).await;
    assert_eq!(not_strings.error_code(), Some(-32602));
    // prompts/get may answer input_required (R-03).
    let mut ask = get(5, "ask", json!({}));
    ask["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    let reply = post(&s.url, &ask).await;
    assert_eq!(reply.last()["result"]["resultType"], "input_required");
    ask["params"]["inputResponses"] =
        json!({"topic": {"action": "accept", "content": {"topic": "tides"}}});
    let reply = post(&s.url, &ask).await;
    assert_eq!(
        reply.last()["result"]["messages"][0]["content"]["text"],
        "Talk about tides"
    );
    s.stop().await;
}

#[tokio::test]
async fn resources_read() {
    let s = TestServer::start(server()).await;
    let read = |id, uri: &str| request(id, "resources/read", json!({"uri": uri}));
    let reply = post(&s.url, &read(1, "mem://notes")).await;
    let result = &reply.last()["result"];
    assert_eq!(
        result["contents"][0],
        json!({"uri": "mem://notes", "mimeType": "text/plain", "text": "hello"})
    );
    assert_eq!(
        (result["ttlMs"].as_u64(), result["cacheScope"].as_str()),
        (Some(300_000), Some("private"))
    );
    let reply = post(&s.url, &read(2, "mem://users/7")).await;
    assert_eq!(
        reply.last()["result"]["contents"][0]["text"],
        "{\"id\":\"7\"}"
    );
    for (uri, code) in [
        ("mem://nothing", -32602),
        ("mem://users/7/x", -32602),
        ("mem://users/404", -32602),
        ("mem://empty", -32603),
    ] {
        let reply = post(&s.url, &read(3, uri)).await;
        assert_eq!(reply.error_code(), Some(code), "{uri}: {}", reply.body);
        if code == -32602 {
            assert_eq!(reply.last()["error"]["data"]["uri"], uri, "R-04");
        }
    }
    // Mcp-Name carries the URI.
    let wrong = post_with(&s.url, &read(4, "mem://notes"), |h| {
        set_header(h, "mcp-name", Some("mem://other"))
    })
    .await;
    assert_eq!((wrong.status, wrong.error_code()), (400, Some(-32020)));
    s.stop().await;
}

#[tokio::test]
async fn completion() {
    let s = TestServer::start(server()).await;
    let complete = |reference: Value, name: &str, value: &str| {
        request(
            1,
            "completion/complete",
            json!({"ref": reference, "argument": {"name": name, "value": value}}),
        )
    };
    let reply = post(
        &s.url,
        &complete(
            json!({"type": "ref/prompt", "name": "review"}),
            "language",
            "r",
        ),
    )
    .await;
    assert_eq!(
        reply.last()["result"]["completion"],
        json!({"values": ["rust", "ruby"], "total": 2, "hasMore": false})
    );
    let reply = post(
        &s.url,
        &complete(
            json!({"type": "ref/resource", "uri": "mem://users/{id}"}),
            "id",
            "",
        ),
    )
    .await;
    let completion = &reply.last()["result"]["completion"];
    assert_eq!(
        completion["values"].as_array().unwrap().len(),
        100,
        "at most 100 values"
    );
    assert_eq!(
        (
            completion["total"].as_u64(),
            completion["hasMore"].as_bool()
        ),
        (Some(150), Some(true))
    );
    let reply = post(
        &s.url,
        &complete(
            json!({"type": "ref/prompt", "name": "review"}),
            "style",
            "x",
        ),
    )
    .await;
    assert_eq!(reply.last()["result"]["completion"]["values"], json!([]));
    let reply = post(
        &s.url,
        &complete(json!({"type": "ref/prompt", "name": "nope"}), "a", ""),
    )
    .await;
    assert_eq!(reply.error_code(), Some(-32602));
    // A completer that panics is contained like every other handler: a generic -32603, on
    // HTTP and in memory (stdio), and the server goes on.
    let boom = complete(
        json!({"type": "ref/prompt", "name": "review"}),
        "style",
        "boom",
    );
    let reply = post(&s.url, &boom).await;
    assert_eq!(reply.error_code(), Some(-32603), "{}", reply.body);
    assert!(
        !reply.body.contains("a completer with a bug"),
        "{}",
        reply.body
    );
    let replies = s.server.handle_message(boom.to_string().as_bytes()).await;
    assert!(replies[0].contains("-32603"), "{replies:?}");
    let reply = post(
        &s.url,
        &complete(
            json!({"type": "ref/prompt", "name": "review"}),
            "language",
            "p",
        ),
    )
    .await;
    assert_eq!(
        reply.last()["result"]["completion"]["values"],
        json!(["python"])
    );
    s.stop().await;
}

/// A server whose prompt and template complete any argument asynchronously (as a gateway asks
/// its upstream), the prompt's `own` argument by its own completer.
fn completing_any() -> Server {
    let any = |ask: CompletionAsk, _: RequestContext| async move {
        match ask.value.as_str() {
            "refuse" => Err(ToolError::failed("nothing starts with refuse")),
            "many" => Ok(Completion {
                values: (0..150).map(|i| format!("many{i}")).collect(),
                total: None,
                has_more: None,
            }),
            typed => Ok(Completion {
                values: vec![format!(
                    "{}:{typed}:{}",
                    ask.argument,
                    ask.context.get("other").map_or("-", String::as_str)
                )],
                total: Some(7),
                has_more: Some(true),
            }),
        }
    };
    Server::builder("any", "1")
        .prompt(
            Prompt::new("p", |_, _: RequestContext| async {
                Ok::<_, ToolError>("p".to_owned())
            })
            .argument("own", "Completed by its own completer", false)
            .argument("other", "Completed by the prompt's", false)
            .complete("own", |value, _| vec![format!("own:{value}")])
            .complete_any(any),
        )
        .resource_template(
            ResourceTemplate::new("mem://t/{x}", "t", |uri, _, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "t"))
            })
            .complete_any(any),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn completion_by_a_completer_of_any_argument() {
    let s = TestServer::start(completing_any()).await;
    let complete = |reference: Value, name: &str, value: &str, context: Value| {
        let reply = request(
            1,
            "completion/complete",
            json!({"ref": reference, "argument": {"name": name, "value": value},
                   "context": {"arguments": context}}),
        );
        let url = s.url.clone();
        async move { post(&url, &reply).await }
    };
    let prompt = json!({"type": "ref/prompt", "name": "p"});
    let template = json!({"type": "ref/resource", "uri": "mem://t/{x}"});
    // The completer is given the argument, the typed value and the other arguments, and its
    // total and hasMore are kept.
    let reply = complete(prompt.clone(), "other", "ab", json!({"own": "1"})).await;
    assert_eq!(
        reply.last()["result"]["completion"],
        json!({"values": ["other:ab:-"], "total": 7, "hasMore": true})
    );
    let reply = complete(template.clone(), "x", "q", json!({"other": "o"})).await;
    assert_eq!(
        reply.last()["result"]["completion"]["values"],
        json!(["x:q:o"])
    );
    // An argument with its own completer is completed by it.
    let reply = complete(prompt.clone(), "own", "z", json!({})).await;
    assert_eq!(
        reply.last()["result"]["completion"]["values"],
        json!(["own:z"])
    );
    // Past 100 values the result is cut and says so.
    let reply = complete(template.clone(), "x", "many", json!({})).await;
    let completion = &reply.last()["result"]["completion"];
    assert_eq!(completion["values"].as_array().map(Vec::len), Some(100));
    assert_eq!(
        (
            completion["total"].as_u64(),
            completion["hasMore"].as_bool()
        ),
        (Some(150), Some(true))
    );
    // A completer's failure is the caller's -32602 with its words.
    let reply = complete(prompt, "other", "refuse", json!({})).await;
    assert_eq!(reply.error_code(), Some(-32602), "{}", reply.body);
    assert!(
        reply.body.contains("nothing starts with refuse"),
        "{}",
        reply.body
    );
    s.stop().await;
}

#[tokio::test]
async fn listen_follows_prompts_resources_and_updates() {
    let s = TestServer::start(server()).await;
    let body = request(
        9,
        "subscriptions/listen",
        json!({"notifications": {
        "promptsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": ["mem://users", "mem:"]}}),
    );
    let mut req = client().post(&s.url).body(body.to_string());
    for (k, v) in standard_headers(&body) {
        req = req.header(k, v);
    }
    let mut resp = req.send().await.unwrap();
    let mut text = String::new();
    let mut messages = Vec::new();
    let mut next = async || loop {
        if let Some(m) = messages.pop() {
            return m;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(end) = text.rfind("\n\n") {
            let complete: String = text.drain(..end + 2).collect();
            messages = sse_messages(&complete);
            messages.reverse();
        }
    };
    let ack: Value = next().await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": ["mem://users", "mem:"]})
    );
    // A bare scheme covers no other resource: mem://notes is not sent.
    s.server.notify_resource_updated("mem://notes");
    s.server.notify_resource_updated("mem://users/7");
    let updated: Value = next().await;
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "only the subscribed subtree"
    );
    assert_eq!(updated["params"]["uri"], "mem://users/7");
    s.server.remove_prompt("third").unwrap();
    assert_eq!(next().await["method"], "notifications/prompts/list_changed");
    s.server.remove_resource("mem://empty").unwrap();
    assert_eq!(
        next().await["method"],
        "notifications/resources/list_changed"
    );
    for m in [ack, updated] {
        wire::check("subscriptions/listen", &m);
    }
    drop(resp);
    s.stop().await;
}

/// Hides the prompt `third`, the resource `mem://notes` and the template `mem://users/{id}`
/// from every caller, and nothing else.
struct HidesSome;

impl toolwire_server::ToolVisibility for HidesSome {
    fn check<'a>(&'a self, _: toolwire_server::Viewer<'a>) -> toolwire_server::ToolCheck<'a> {
        Box::new(|_| None)
    }

    fn check_offers<'a>(
        &'a self,
        _: toolwire_server::Viewer<'a>,
        kind: toolwire_server::OfferKind,
    ) -> toolwire_server::ToolCheck<'a> {
        use toolwire_server::OfferKind;
        let hidden = match kind {
            OfferKind::Prompt => "third",
            OfferKind::Resource => "mem://notes",
            _ => "mem://users/{id}",
        };
        Box::new(move |key| (key == hidden).then(|| "not for you".to_owned()))
    }
}

/// A prompt, resource or template a visibility hides is out of the caller's lists (then
/// private) and, to that caller, is one the server does not have: getting, reading,
/// completing and subscribing answer exactly as they answer a name or URI that does not exist,
/// never with the reason.
#[tokio::test]
async fn hidden_prompts_resources_and_templates_are_unknown_to_the_caller() {
    let mut built = Server::builder("offers", "1");
    for prompt in ["review", "third"] {
        built = built.prompt(
            Prompt::new(prompt, |_, _: RequestContext| async {
                Ok::<_, ToolError>("a prompt".to_owned())
            })
            .complete("language", |_, _| vec!["rust".to_owned()]),
        );
    }
    for uri in ["mem://notes", "mem://open"] {
        built = built.resource(Resource::new(
            uri,
            "r",
            |uri, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "secret"))
            },
        ));
    }
    let template = ResourceTemplate::new("mem://users/{id}", "user", |uri, _, _| async move {
        Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "secret"))
    })
    .complete("id", |_, _| vec!["1".to_owned()]);
    let s = TestServer::start(
        built
            .resource_template(template)
            .tool_visibility(HidesSome)
            .build()
            .unwrap(),
    )
    .await;
    let url = s.url.clone();
    let asked = |id, method: &'static str, params| {
        let url = url.clone();
        async move { post(&url, &request(id, method, params)).await }
    };

    let listed = asked(1, "prompts/list", json!({})).await;
    assert_eq!(names(&listed, "prompts", "name"), ["review"]);
    assert_eq!(listed.last()["result"]["cacheScope"], "private");
    let listed = asked(2, "resources/list", json!({})).await;
    assert_eq!(names(&listed, "resources", "uri"), ["mem://open"]);
    let listed = asked(3, "resources/templates/list", json!({})).await;
    assert!(names(&listed, "resourceTemplates", "uriTemplate").is_empty());

    // Each answer is the one for something that does not exist, whatever the name.
    let error = |reply: &Reply| reply.last()["error"].clone();
    let hidden = error(&asked(4, "prompts/get", json!({"name": "third"})).await);
    let none = error(&asked(5, "prompts/get", json!({"name": "fourth"})).await);
    assert_eq!(hidden["code"], -32602);
    assert_eq!(hidden["message"], "Unknown prompt: third");
    assert_eq!(none["message"], "Unknown prompt: fourth");
    for uri in ["mem://notes", "mem://users/7"] {
        let hidden = error(&asked(6, "resources/read", json!({"uri": uri})).await);
        assert_eq!(hidden["code"], -32602, "{uri}");
        assert_eq!(hidden["message"], format!("Resource not found: {uri}"));
        assert_eq!(hidden["data"], json!({"uri": uri}));
    }
    let opened = asked(7, "resources/read", json!({"uri": "mem://open"})).await;
    assert_eq!(opened.last()["result"]["contents"][0]["text"], "secret");
    let complete =
        |reference| json!({"ref": reference, "argument": {"name": "language", "value": ""}});
    let hidden = error(
        &asked(
            8,
            "completion/complete",
            complete(json!({"type": "ref/prompt", "name": "third"})),
        )
        .await,
    );
    assert_eq!(hidden["message"], "Unknown prompt: third");
    let hidden = error(
        &asked(
            9,
            "completion/complete",
            complete(json!({"type": "ref/resource", "uri": "mem://users/{id}"})),
        )
        .await,
    );
    assert_eq!(
        hidden["message"],
        "Unknown resource template: mem://users/{id}"
    );
    let seen = asked(
        10,
        "completion/complete",
        complete(json!({"type": "ref/prompt", "name": "review"})),
    )
    .await;
    assert_eq!(
        seen.last()["result"]["completion"]["values"],
        json!(["rust"])
    );
    // A subscription to a hidden resource is not honoured (its changes are not the caller's).
    let body = request(
        11,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["mem://notes", "mem://open"]}}),
    );
    let mut req = client().post(&s.url).body(body.to_string());
    for (k, v) in standard_headers(&body) {
        req = req.header(k, v);
    }
    let mut resp = req.send().await.unwrap();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .expect("the acknowledgement")
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let ack = &sse_messages(&text)[0];
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["mem://open"]),
        "{ack}"
    );
    drop(resp);
    s.stop().await;
}
