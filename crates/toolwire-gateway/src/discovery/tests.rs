//! The property search mode rests on (D-02): over random catalogues, random rules and random
//! OAuth scopes, no search ever returns a tool the caller may not use, and every tool it may
//! use is found by its exact name. The rules deny and allow by upstream and by patterns of
//! names, for some callers or all; tools may need scopes, and each caller holds some, or is
//! not checked for any; the oracle decides them in plain Rust.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, Lines};
use tokio::io::{ReadHalf, WriteHalf};
use toolwire_server::stdio::StdioConfig;
use toolwire_server::{NoArgs, RequestContext, Server, Tool};

use super::{Discovery, Listing, SEARCH_TOOLS, Search, tools};
use crate::policy::Policy;
use crate::rules::{Effect, Kind, RuleConfig, Rules, RulesConfig, ToolFacts};

const WORDS: [&str; 6] = ["read", "write", "list", "delete", "send", "fetch"];

/// The OAuth scopes tools may need and callers may hold.
const SCOPES: [&str; 2] = ["s0", "s1"];

/// One tool of a catalogue.
#[derive(Debug, Clone)]
struct Made {
    upstream: usize,
    name: String,
    description: String,
    /// The scopes a caller needs to use it.
    needs: Vec<&'static str>,
}

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

/// Some of the scopes: none most often.
fn scopes() -> impl Strategy<Value = Vec<&'static str>> {
    prop_oneof![
        2 => Just(Vec::new()),
        1 => prop::sample::subsequence(SCOPES.to_vec(), 0..=SCOPES.len()),
    ]
}

/// Whether a caller granted `granted` (`None`: not checked) may use a tool that needs `needs`.
fn permits(granted: Option<&[&str]>, needs: &[&str]) -> bool {
    granted.is_none_or(|granted| needs.iter().all(|s| granted.contains(s)))
}

/// A catalogue: for each of up to three upstreams, tools named by a word and a number, each
/// described by a few words, some needing scopes.
fn catalogue() -> impl Strategy<Value = Vec<Made>> {
    let tool = (
        0..3usize,
        prop::sample::select(WORDS.to_vec()),
        0..4usize,
        prop::collection::vec(prop::sample::select(WORDS.to_vec()), 1..4),
        scopes(),
    );
    prop::collection::vec(tool, 0..14).prop_map(|tools| {
        let mut seen = std::collections::HashSet::new();
        tools
            .into_iter()
            .map(|(u, word, n, words, needs)| Made {
                upstream: u,
                name: format!("u{u}__{word}_{n}"),
                description: words.join(" "),
                needs,
            })
            .filter(|made| seen.insert(made.name.clone()))
            .collect()
    })
}

/// A server with the catalogue's tools, the rules, and `search_tools` over them.
fn served(catalogue: &[Made], rules: Rules) -> Server {
    let policy = Arc::new(Policy::new(rules));
    let facts: HashMap<String, Arc<ToolFacts>> = catalogue
        .iter()
        .map(|made| {
            let facts = ToolFacts {
                kind: Kind::Tool,
                name: made.name.clone(),
                upstream: format!("u{}", made.upstream),
                description: Some(made.description.clone()),
                ..ToolFacts::default()
            };
            (made.name.clone(), Arc::new(facts))
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
        .map(|made| {
            Tool::new(made.name.clone(), |_: NoArgs, _: RequestContext| async {
                "x"
            })
            .description(made.description.clone())
            .scopes(made.needs.iter().copied())
        })
        .collect();
    let definitions = tools
        .iter()
        .zip(catalogue)
        .map(|(tool, made)| {
            let indexed = super::Indexed {
                definition: Arc::new(tool.definition().clone()),
                scopes: tool.required_scopes().into(),
            };
            (made.name.clone(), format!("u{}", made.upstream), indexed)
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

/// Client `c{number}` on stdio, holding the scopes `granted` (`None`: not checked), as an
/// OAuth token would.
struct Caller {
    number: usize,
    writer: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    serving: tokio::task::JoinHandle<toolwire_server::Result<()>>,
}

impl Caller {
    fn connect(server: &Server, number: usize, granted: Option<&[&str]>) -> Caller {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (reader, writer) = tokio::io::split(server_end);
        let config = match granted {
            Some(granted) => StdioConfig::default().scopes(granted.iter().copied()),
            None => StdioConfig::default(),
        };
        let serving = tokio::spawn(toolwire_server::stdio::serve_io_with(
            server.clone(),
            reader,
            writer,
            config,
        ));
        let (reader, writer) = tokio::io::split(client);
        Caller {
            number,
            writer,
            lines: BufReader::new(reader).lines(),
            serving,
        }
    }

    /// The answer to `request`.
    async fn ask(&mut self, request: &Value) -> Value {
        let line = format!("{request}\n");
        self.writer.write_all(line.as_bytes()).await.expect("sent");
        loop {
            let line = self.lines.next_line().await.expect("read").expect("a line");
            let reply: Value = serde_json::from_str(&line).expect("JSON");
            if reply.get("id").is_some() {
                return reply;
            }
        }
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// The names `search_tools` gives `caller` for `query`.
async fn searched(caller: &mut Caller, query: &str) -> Vec<String> {
    let number = caller.number;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": SEARCH_TOOLS,
        "arguments": {"query": query, "limit": 20},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": format!("c{number}"), "version": "1"},
        },
    }});
    let reply = caller.ask(&request).await;
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
        grants in prop::collection::vec(prop::option::of(scopes()), 3),
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
        let made: HashMap<&str, &Made> =
            catalogue.iter().map(|made| (made.name.as_str(), made)).collect();
        runtime.block_on(async {
            for (caller, granted) in grants.iter().enumerate() {
                let granted = granted.as_deref();
                let may = |made: &Made| {
                    may_use(&rules, default, made.upstream, &made.name, caller)
                        && permits(granted, &made.needs)
                };
                let mut client = Caller::connect(&server, caller, granted);
                let mut asked: Vec<String> = queries.iter().map(|q| (*q).to_owned()).collect();
                asked.push(queries.join(" "));
                asked.extend(catalogue.iter().map(|made| made.name.clone()));
                for query in &asked {
                    for name in searched(&mut client, query).await {
                        prop_assert!(
                            may(made[name.as_str()]),
                            "c{caller} holding {granted:?} found {name} for {query:?} under \
                             {rules:?}, default {default}, {catalogue:?}"
                        );
                    }
                }
                for tool in &catalogue {
                    if may(tool) {
                        let found = searched(&mut client, &tool.name).await;
                        prop_assert_eq!(found.first(), Some(&tool.name), "c{} by exact name", caller);
                    }
                }
            }
            Ok(())
        })?;
    }
}
