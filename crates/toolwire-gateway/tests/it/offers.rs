//! Prompts, resources and resource templates of two upstream Toolwire servers through a
//! gateway: prompts under `prefix__name`, resources under `toolwire://PREFIX/URI`, each read or
//! got from the upstream that offers it, the same URI of two upstreams kept apart, and a change
//! of an upstream's list passed on to downstream listeners.

use std::time::Instant;

use serde_json::json;
use toolwire_client::protocol::{
    Annotations, CompletionArgument, CompletionContext, CompletionReference, ContentBlock,
    PromptArgument, ResourceContents, SubscriptionFilter,
};
use toolwire_client::{CallOptions, Notification};
use toolwire_gateway::{Gateway, GatewayOptions};
use toolwire_host::HostOptions;
use toolwire_server::{Prompt, PromptArgs, RequestContext, Resource, ResourceTemplate, Server};

use crate::support::{DEADLINE, Served, client};

/// An upstream named `name` offering a prompt `greet`, a resource `file:///README.md` (the
/// same URI on every upstream, with the upstream's name in its text) and a template
/// `file:///docs/{+path}` whose reader says which URI it was asked for.
fn upstream(name: &'static str) -> Server {
    Server::builder(name, "1")
        .prompt(
            Prompt::new(
                "greet",
                move |args: PromptArgs, _: RequestContext| async move {
                    Ok(format!("{name} greets {}", args["who"]))
                },
            )
            .description("Greets someone.")
            .argument("who", "Whom to greet", true),
        )
        .resource(
            Resource::new(
                "file:///README.md",
                "readme",
                move |uri: String, _: RequestContext| async move {
                    Ok(ResourceContents::text(
                        uri,
                        "text/markdown",
                        format!("# {name}\u{1b}[2J"),
                    ))
                },
            )
            .mime_type("text/markdown"),
        )
        .resource_template(ResourceTemplate::new(
            "file:///docs/{+path}",
            "docs",
            move |uri: String, vars, _: RequestContext| async move {
                let path = vars.get("path").cloned().unwrap_or_default();
                Ok(ResourceContents::text(
                    uri.clone(),
                    "text/plain",
                    format!("{name} read {uri} ({path})"),
                ))
            },
        ))
        .build()
        .expect("an upstream")
}

/// A gateway in front of `upstreams` (name, prefix, url), its server offering prompts and
/// resources, served over HTTP.
async fn gateway(upstreams: &[(&str, &str, &str)]) -> (Gateway, Served) {
    let downstream = Server::builder("gateway", "1")
        .offer_prompts()
        .offer_resources();
    let host = HostOptions::new(toolwire_gateway::NoPerson);
    crate::gateway::gateway_on(upstreams, downstream, host, GatewayOptions::new()).await
}

fn text_of(contents: &ResourceContents) -> &str {
    match contents {
        ResourceContents::Text(t) => &t.text,
        other => panic!("not text: {other:?}"),
    }
}

async fn prompt_names(client: &toolwire_client::Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_prompts()
        .await
        .expect("a list of prompts")
        .into_iter()
        .map(|p| p.name)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_resources_and_templates_are_served_under_reversible_names() {
    let alpha = Served::start(upstream("alpha"), None).await;
    let beta = Served::start(upstream("beta"), None).await;
    let (gateway, served) = gateway(&[("alpha", "a", &alpha.url), ("beta", "b", &beta.url)]).await;
    let caller = client(&served.url);

    assert_eq!(prompt_names(&caller).await, ["a__greet", "b__greet"]);
    let prompts = caller.list_prompts().await.unwrap();
    let greet = prompts.iter().find(|p| p.name == "a__greet").unwrap();
    assert_eq!(greet.description.as_deref(), Some("Greets someone."));
    let arguments = greet.arguments.as_ref().expect("its arguments");
    assert_eq!(
        (arguments[0].name.as_str(), arguments[0].required),
        ("who", Some(true))
    );
    for (name, want) in [
        ("a__greet", "alpha greets Ada"),
        ("b__greet", "beta greets Ada"),
    ] {
        let got = caller
            .get_prompt(name, json!({"who": "Ada"}))
            .await
            .unwrap();
        match &got.messages[0].content {
            ContentBlock::Text(t) => assert_eq!(t.text, want),
            other => panic!("{other:?}"),
        }
    }

    // The same URI upstream, two URIs downstream, each read from its own upstream.
    let mut uris: Vec<String> = caller
        .list_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    uris.sort();
    assert_eq!(
        uris,
        [
            "toolwire://a/file:///README.md",
            "toolwire://b/file:///README.md"
        ]
    );
    for (uri, want) in [
        ("toolwire://a/file:///README.md", "# alpha"),
        ("toolwire://b/file:///README.md", "# beta"),
    ] {
        let read = caller.read_resource(uri).await.unwrap();
        assert_eq!(read.contents.len(), 1);
        // The upstream's escape sequence is cleaned away; the URI is the one asked for.
        assert_eq!(text_of(&read.contents[0]), want);
        assert_eq!(read.contents[0].uri(), uri);
    }

    // A template: its expansions map back to the upstream's own expansions.
    let templates: Vec<String> = caller
        .list_resource_templates()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.uri_template)
        .collect();
    assert!(
        templates.contains(&"toolwire://a/file:///docs/{+path}".to_owned()),
        "{templates:?}"
    );
    let read = caller
        .read_resource("toolwire://b/file:///docs/guides/a%20b/ü.md")
        .await
        .unwrap();
    assert_eq!(
        text_of(&read.contents[0]),
        "beta read file:///docs/guides/a%20b/ü.md (guides/a%20b/ü.md)"
    );
    assert_eq!(
        read.contents[0].uri(),
        "toolwire://b/file:///docs/guides/a%20b/ü.md"
    );

    // A URI of no upstream, an upstream URI not wrapped, a prompt of no upstream: refused.
    for uri in [
        "toolwire://c/file:///README.md",
        "file:///README.md",
        "toolwire://a/file:///nowhere",
    ] {
        let refused = caller.read_resource(uri).await;
        assert!(refused.is_err(), "{uri}: {refused:?}");
    }
    assert!(
        caller
            .get_prompt("greet", json!({"who": "x"}))
            .await
            .is_err()
    );

    // An upstream that is gone: its last list is still served, and a read says why it fails.
    beta.stop().await;
    let failed = caller
        .read_resource("toolwire://b/file:///README.md")
        .await
        .unwrap_err();
    match failed {
        toolwire_client::Error::Rpc(e) => {
            assert_eq!(e.code, -32603, "{e:?}");
            assert!(e.message.starts_with("the upstream beta failed: "), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    let read = caller
        .read_resource("toolwire://a/file:///README.md")
        .await
        .unwrap();
    assert_eq!(text_of(&read.contents[0]), "# alpha");

    gateway.close().await;
    served.stop().await;
    alpha.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_prompt_or_resource_list_change_reaches_downstream_listeners() {
    let alpha = Served::start(upstream("alpha"), None).await;
    let (gateway, served) = gateway(&[("alpha", "a", &alpha.url)]).await;
    let caller = client(&served.url);
    assert_eq!(prompt_names(&caller).await, ["a__greet"]);
    let mut listen = caller
        .listen(SubscriptionFilter {
            prompts_list_changed: Some(true),
            resources_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .expect("a listen stream");

    alpha
        .server
        .add_prompt(Prompt::new(
            "part",
            |_: PromptArgs, _: RequestContext| async { Ok("Goodbye".to_owned()) },
        ))
        .unwrap();
    wait_for(&mut listen, Notification::PromptsListChanged).await;
    until(|| async { prompt_names(&caller).await == ["a__greet", "a__part"] }).await;

    alpha
        .server
        .add_resource(Resource::new(
            "file:///CHANGES.md",
            "changes",
            |uri: String, _: RequestContext| async move {
                Ok(ResourceContents::text(uri, "text/markdown", "none"))
            },
        ))
        .unwrap();
    wait_for(&mut listen, Notification::ResourcesListChanged).await;
    until(|| async {
        caller
            .list_resources()
            .await
            .unwrap()
            .iter()
            .any(|r| r.uri == "toolwire://a/file:///CHANGES.md")
    })
    .await;

    alpha.server.remove_prompt("greet").unwrap();
    until(|| async { prompt_names(&caller).await == ["a__part"] }).await;

    gateway.close().await;
    served.stop().await;
    alpha.stop().await;
}

/// Waits until `listen` yields `want`.
async fn wait_for(listen: &mut toolwire_client::Subscription, want: Notification) {
    let notified = tokio::time::timeout(DEADLINE, async {
        loop {
            match listen.next().await {
                Some(Ok(n)) if n == want => return,
                Some(_) => continue,
                None => panic!("the listen stream ended"),
            }
        }
    })
    .await;
    assert!(notified.is_ok(), "{want:?} did not reach the listener");
}

/// Waits until `done` says so.
async fn until<F, Fut>(done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < DEADLINE,
            "still not so after {DEADLINE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// An upstream whose definitions carry every field the protocol has for them, and whose prompt
/// and template complete their arguments (the prompt's from the other arguments given).
fn described() -> Server {
    let mut meta = toolwire_client::protocol::JsonObject::new();
    meta.insert("team".into(), json!("docs"));
    Server::builder("described", "1")
        .prompt(
            Prompt::new("greet", |args: PromptArgs, _: RequestContext| async move {
                Ok(format!("hello {}", args["who"]))
            })
            .argument_defined(PromptArgument {
                name: "who".into(),
                title: Some("Whom".into()),
                description: Some("Whom to greet".into()),
                required: Some(true),
            })
            .meta(meta.clone())
            .complete("who", |typed, given| {
                let greeting = given.get("greeting").map_or("", String::as_str);
                ["ada", "alan", "bob"]
                    .iter()
                    .filter(|name| name.starts_with(typed))
                    .map(|name| format!("{greeting}{name}"))
                    .collect()
            }),
        )
        .resource(
            Resource::new(
                "file:///big.bin",
                "big",
                |uri: String, _: RequestContext| async move {
                    Ok(ResourceContents::text(uri, "text/plain", "big"))
                },
            )
            .size(4096)
            .annotations(Annotations {
                priority: Some(0.5),
                ..Default::default()
            })
            .meta(meta.clone()),
        )
        .resource_template(
            ResourceTemplate::new(
                "file:///docs/{+path}",
                "docs",
                |uri: String, _, _: RequestContext| async move {
                    Ok(ResourceContents::text(uri, "text/plain", "doc"))
                },
            )
            .title("The docs")
            .meta(meta)
            .complete("path", |typed, _| vec![format!("{typed}/index.md")]),
        )
        .build()
        .expect("an upstream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_are_served_whole_and_completions_asked_upstream() {
    let upstream = Served::start(described(), None).await;
    let (gateway, served) = gateway(&[("described", "d", &upstream.url)]).await;
    let caller = client(&served.url);

    let prompts = caller.list_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "d__greet");
    let arguments = prompts[0].arguments.as_ref().expect("its arguments");
    assert_eq!(arguments[0].title.as_deref(), Some("Whom"));
    assert_eq!(prompts[0].meta.as_ref().unwrap()["team"], "docs");
    let resources = caller.list_resources().await.unwrap();
    assert_eq!(resources[0].size, Some(4096));
    assert_eq!(
        resources[0].annotations.as_ref().and_then(|a| a.priority),
        Some(0.5)
    );
    let templates = caller.list_resource_templates().await.unwrap();
    assert_eq!(templates[0].title.as_deref(), Some("The docs"));
    assert_eq!(templates[0].meta.as_ref().unwrap()["team"], "docs");

    // Completion of a prompt's argument, with the other arguments given, and of a template's
    // variable, both answered by the upstream's completers.
    let completed = caller
        .complete_with(
            CompletionReference::Prompt {
                name: "d__greet".into(),
                title: None,
            },
            CompletionArgument {
                name: "who".into(),
                value: "a".into(),
            },
            Some(CompletionContext {
                arguments: Some([("greeting".to_owned(), "dear ".to_owned())].into()),
            }),
            CallOptions::default(),
        )
        .await
        .expect("completed");
    assert_eq!(completed.completion.values, ["dear ada", "dear alan"]);
    assert_eq!(completed.completion.total, Some(2));
    let completed = caller
        .complete(
            CompletionReference::Resource {
                uri: templates[0].uri_template.clone(),
            },
            CompletionArgument {
                name: "path".into(),
                value: "guide".into(),
            },
        )
        .await
        .expect("completed");
    assert_eq!(completed.completion.values, ["guide/index.md"]);
    // A prompt the gateway does not serve is the caller's -32602, not a question upstream.
    let unknown = caller
        .complete(
            CompletionReference::Prompt {
                name: "d__nope".into(),
                title: None,
            },
            CompletionArgument {
                name: "who".into(),
                value: String::new(),
            },
        )
        .await
        .expect_err("an unknown prompt");
    assert!(
        matches!(&unknown, toolwire_client::Error::Rpc(e) if e.code == -32602),
        "{unknown}"
    );
    // The upstream stops: the caller is told which upstream failed, with -32603.
    upstream.stop().await;
    let failed = caller
        .complete(
            CompletionReference::Prompt {
                name: "d__greet".into(),
                title: None,
            },
            CompletionArgument {
                name: "who".into(),
                value: "a".into(),
            },
        )
        .await
        .expect_err("the upstream is gone");
    assert!(
        matches!(&failed, toolwire_client::Error::Rpc(e) if e.code == -32603 && e.message.contains("described")),
        "{failed}"
    );
    gateway.close().await;
    served.stop().await;
}

/// The rules decide prompts and reads with what they carry: a prompt's arguments and the
/// variables a URI matched in a template are `args`; an `ask` rule puts a prompt to the person
/// behind the caller (approved: got; declined: refused), a `deny` over a template's variable
/// refuses that read as a URI the gateway does not have, and a default `deny` leaves out of
/// the lists every offer no rule allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_decide_prompts_and_reads_by_their_arguments() {
    use toolwire_client::protocol::{ElicitAction, ElicitResult, ElicitValue};
    use toolwire_gateway::{Rules, RulesConfig};

    let alpha = Served::start(upstream("alpha"), None).await;
    let config: RulesConfig = serde_json::from_value(json!({
        "rules": [
            {"ask": "tool.kind == \"prompt\" && args.who == \"root\"", "why": "greeting root"},
            {"deny": "tool.kind == \"template\" && args.path.startsWith(\"private/\")"},
            {"allow": "tool.kind != \"resource\""}
        ],
        "default": "deny"
    }))
    .unwrap();
    let options = GatewayOptions::new().rules(Rules::compile(&config).unwrap());
    let downstream = Server::builder("gateway", "1")
        .offer_prompts()
        .offer_resources();
    let host = HostOptions::new(toolwire_gateway::NoPerson);
    let (gateway, served) =
        crate::gateway::gateway_on(&[("alpha", "a", &alpha.url)], downstream, host, options).await;
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let person = |approve: bool| {
        let asked = asked.clone();
        toolwire_client::ClientBuilder::new("caller", "1")
            .on_elicit(move |params| {
                let asked = asked.clone();
                async move {
                    let message = serde_json::to_value(&params).unwrap()["message"].clone();
                    asked
                        .lock()
                        .unwrap()
                        .push(message.as_str().unwrap().to_owned());
                    Ok(ElicitResult {
                        action: ElicitAction::Accept,
                        content: Some([("approve".to_owned(), ElicitValue::Bool(approve))].into()),
                        meta: None,
                    })
                }
            })
            .http(&served.url)
            .unwrap()
    };
    let (yes, no) = (person(true), person(false));

    // The default deny: the fixed resource is out of the list and unknown; the rest is listed.
    assert_eq!(prompt_names(&yes).await, ["a__greet"]);
    let listed = yes.list_resources().await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    assert!(
        yes.read_resource("toolwire://a/file:///README.md")
            .await
            .is_err()
    );

    // A prompt with ordinary arguments is got without a question; for root, only once approved.
    yes.get_prompt("a__greet", json!({"who": "Ada"}))
        .await
        .unwrap();
    assert!(asked.lock().unwrap().is_empty());
    let got = yes
        .get_prompt("a__greet", json!({"who": "root"}))
        .await
        .unwrap();
    match &got.messages[0].content {
        ContentBlock::Text(t) => assert_eq!(t.text, "alpha greets root"),
        other => panic!("{other:?}"),
    }
    let question = asked.lock().unwrap().pop().expect("the person was asked");
    assert!(
        question.starts_with("Get the prompt a__greet on the upstream server alpha")
            && question.contains("\"who\": \"root\"")
            && question.contains("greeting root"),
        "{question}"
    );
    let declined = no
        .get_prompt("a__greet", json!({"who": "root"}))
        .await
        .unwrap_err();
    assert!(
        declined
            .to_string()
            .contains("the person did not approve it"),
        "{declined}"
    );

    // A template read is decided by the variables the URI matched.
    let read = yes
        .read_resource("toolwire://a/file:///docs/public/a.md")
        .await
        .unwrap();
    assert!(text_of(&read.contents[0]).contains("alpha read"));
    let refused = yes
        .read_resource("toolwire://a/file:///docs/private/keys.md")
        .await
        .unwrap_err();
    match refused {
        toolwire_client::Error::Rpc(e) => assert_eq!(
            (e.code, e.message.as_str()),
            (
                -32602,
                "Resource not found: toolwire://a/file:///docs/private/keys.md"
            )
        ),
        other => panic!("{other:?}"),
    }
    drop(gateway);
    served.stop().await;
    alpha.stop().await;
}
