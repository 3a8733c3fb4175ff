//! The property search mode rests on (D-02): over random catalogues and random rules, no
//! search ever returns a tool the caller may not use, and every tool it may use is found by
//! its exact name. The rules deny and allow by upstream and by patterns of names, for some
//! callers or all; the oracle decides them in plain Rust.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use toolwire_server::{NoArgs, RequestContext, Server, Tool};

use super::{Discovery, Listing, SEARCH_TOOLS, Search, tools};
use crate::policy::Policy;
use crate::rules::{Effect, Kind, RuleConfig, Rules, RulesConfig, ToolFacts};

const WORDS: [&str; 6] = ["read", "write", "list", "delete", "send", "fetch"];

/// What a rule is about.
#[derive(Debug, Clone)]
enum Target {
    Upstream(usize),
    NameStarts(usize, &'static str),
    NameContains(&'static str),
}

#[derive(Debug, Clone)]
struct Rule {
    effect: Effect,
    target: Target,
    /// Only for the client of this number, when given.
    caller: Option<usize>,
}

impl Rule {
    fn cel(&self) -> String {
        let target = match &self.target {
            Target::Upstream(u) => format!("tool.upstream == \"u{u}\""),
            Target::NameStarts(u, word) => format!("tool.name.startsWith(\"u{u}__{word}\")"),
            Target::NameContains(word) => format!("tool.name.contains(\"{word}\")"),
        };
        match self.caller {
            Some(c) => format!("{target} && caller.client.name == \"c{c}\""),
            None => target,
        }
    }

    fn holds(&self, upstream: usize, name: &str, caller: usize) -> bool {
        let target = match &self.target {
            Target::Upstream(u) => *u == upstream,
            Target::NameStarts(u, word) => name.starts_with(&format!("u{u}__{word}")),
            Target::NameContains(word) => name.contains(word),
        };
        target && self.caller.is_none_or(|c| c == caller)
    }
}

/// The oracle: deny over ask and allow, then the default.
fn may_use(rules: &[Rule], default: Effect, upstream: usize, name: &str, caller: usize) -> bool {
    let holding = |effect| {
        rules
            .iter()
            .any(|r| r.effect == effect && r.holds(upstream, name, caller))
    };
    if holding(Effect::Deny) {
        false
    } else if holding(Effect::Ask) || holding(Effect::Allow) {
        true
    } else {
        default != Effect::Deny
    }
}

fn effect() -> impl Strategy<Value = Effect> {
    prop_oneof![Just(Effect::Allow), Just(Effect::Ask), Just(Effect::Deny)]
}

fn rule() -> impl Strategy<Value = Rule> {
    let target = prop_oneof![
        (0..3usize).prop_map(Target::Upstream),
        (0..3usize, prop::sample::select(WORDS.to_vec()))
            .prop_map(|(u, w)| Target::NameStarts(u, w)),
        prop::sample::select(WORDS.to_vec()).prop_map(Target::NameContains),
    ];
    (effect(), target, prop::option::of(0..3usize)).prop_map(|(effect, target, caller)| Rule {
        effect,
        target,
        caller,
    })
}

/// A catalogue: for each of up to three upstreams, tools named by a word and a number, each
/// described by a few words.
fn catalogue() -> impl Strategy<Value = Vec<(usize, String, String)>> {
    let tool = (
        0..3usize,
        prop::sample::select(WORDS.to_vec()),
        0..4usize,
        prop::collection::vec(prop::sample::select(WORDS.to_vec()), 1..4),
    );
    prop::collection::vec(tool, 0..14).prop_map(|tools| {
        let mut seen = std::collections::HashSet::new();
        tools
            .into_iter()
            .map(|(u, word, n, words)| (u, format!("u{u}__{word}_{n}"), words.join(" ")))
            .filter(|(_, name, _)| seen.insert(name.clone()))
            .collect()
    })
}

/// A server with the catalogue's tools, the rules, and `search_tools` over them.
fn served(catalogue: &[(usize, String, String)], rules: Rules) -> Server {
    let policy = Arc::new(Policy::new(rules));
    let facts: HashMap<String, Arc<ToolFacts>> = catalogue
        .iter()
        .map(|(u, name, description)| {
            let facts = ToolFacts {
                kind: Kind::Tool,
                name: name.clone(),
                upstream: format!("u{u}"),
                description: Some(description.clone()),
                ..ToolFacts::default()
            };
            (name.clone(), Arc::new(facts))
        })
        .collect();
    policy.set_facts(facts);
    let config = toolwire_host::HostConfig::parse(
        r#"{"mcpServers": {}}"#,
        "/nonexistent/gateway.json",
        &toolwire_host::Variables::new::<&str, &str>([]),
    )
    .expect("a configuration");
    let search = Arc::new(Search::new(Discovery::default(), policy, &config));
    let tools: Vec<Tool> = catalogue
        .iter()
        .map(|(_, name, description)| {
            Tool::new(name.clone(), |_: NoArgs, _: RequestContext| async { "x" })
                .description(description.clone())
        })
        .collect();
    let definitions = tools
        .iter()
        .zip(catalogue)
        .map(|(tool, (u, name, _))| {
            (
                name.clone(),
                format!("u{u}"),
                Arc::new(tool.definition().clone()),
            )
        })
        .collect();
    search.update(1, || definitions);
    Server::builder("property", "1")
        .tools(tools)
        .tool(tools::search_tools(search.clone()))
        .tool_visibility(Listing(search))
        .build()
        .expect("a server")
}

/// The names `search_tools` gives client `c{caller}` for `query`.
async fn searched(server: &Server, caller: usize, query: &str) -> Vec<String> {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": SEARCH_TOOLS,
        "arguments": {"query": query, "limit": 20},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": format!("c{caller}"), "version": "1"},
        },
    }});
    let replies = server.handle_message(request.to_string().as_bytes()).await;
    let reply: Value = serde_json::from_str(replies.last().expect("a reply")).expect("JSON");
    let result = &reply["result"];
    assert_ne!(result["isError"], true, "{query:?}: {reply}");
    result["structuredContent"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_search_returns_a_tool_the_caller_may_not_use(
        catalogue in catalogue(),
        rules in prop::collection::vec(rule(), 0..5),
        default in effect(),
        queries in prop::collection::vec(prop::sample::select(WORDS.to_vec()), 1..4),
    ) {
        let config = RulesConfig {
            rules: rules
                .iter()
                .map(|r| RuleConfig { effect: r.effect, expr: r.cel(), why: None })
                .collect(),
            default,
        };
        let server = served(&catalogue, Rules::compile(&config).expect("rules compile"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let upstream: HashMap<&str, usize> =
            catalogue.iter().map(|(u, name, _)| (name.as_str(), *u)).collect();
        runtime.block_on(async {
            for caller in 0..3 {
                let mut asked: Vec<String> = queries.iter().map(|q| (*q).to_owned()).collect();
                asked.push(queries.join(" "));
                asked.extend(catalogue.iter().map(|(_, name, _)| name.clone()));
                for query in &asked {
                    for name in searched(&server, caller, query).await {
                        let u = upstream[name.as_str()];
                        prop_assert!(
                            may_use(&rules, default, u, &name, caller),
                            "c{caller} found {name} for {query:?} under {rules:?}, default {default}"
                        );
                    }
                }
                for (u, name, _) in &catalogue {
                    if may_use(&rules, default, *u, name, caller) {
                        let found = searched(&server, caller, name).await;
                        prop_assert_eq!(found.first(), Some(name), "c{} by exact name", caller);
                    }
                }
            }
            Ok(())
        })?;
    }
}
