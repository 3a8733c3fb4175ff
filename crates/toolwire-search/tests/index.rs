//! The index as its users meet it: ranking, the caller's check, the server filter, bad
//! queries, deterministic answers and the catalogue's version.

use std::sync::Arc;

use proptest::prelude::*;
use toolwire_protocol::Tool;
use toolwire_search::{Entry, MAX_LIMIT, Query, SearchError, ToolIndex};

fn tool(name: &str, description: &str) -> Arc<Tool> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "name": name, "description": description, "inputSchema": {"type": "object"}
        }))
        .unwrap(),
    )
}

fn entry(server: &str, name: &str, description: &str) -> Entry {
    Entry::new(format!("{server}__{name}"), server, tool(name, description))
}

fn catalogue() -> Vec<Entry> {
    vec![
        entry(
            "github",
            "create_issue",
            "Create a new issue in a GitHub repository",
        ),
        entry(
            "github",
            "search_code",
            "Search for code across GitHub repositories",
        ),
        entry(
            "jira",
            "create_issue",
            "Create a new Jira issue in a project",
        ),
        entry(
            "time",
            "get_current_time",
            "Get the current time in a specific timezone",
        ),
        entry(
            "web",
            "search",
            "Search the web for pages about a topic; find an issue of a magazine",
        ),
    ]
}

fn names<'a>(found: &'a toolwire_search::Found<'a>) -> Vec<&'a str> {
    found
        .hits
        .iter()
        .map(|hit| hit.entry.name.as_str())
        .collect()
}

#[test]
fn words_of_the_task_find_the_tool() {
    let index = ToolIndex::new(catalogue());
    let found = index
        .search(&Query::new("what is the time in Tokyo timezone"), &|_| true)
        .unwrap();
    assert_eq!(names(&found)[0], "time__get_current_time");
}

#[test]
fn an_exact_name_ranks_its_tool_first() {
    let index = ToolIndex::new(catalogue());
    for query in ["web__search", "WEB__SEARCH"] {
        let found = index.search(&Query::new(query), &|_| true).unwrap();
        assert_eq!(names(&found)[0], "web__search", "{query}");
    }
    // The upstream's name: every tool of that name, before any other.
    let found = index
        .search(&Query::new("create_issue"), &|_| true)
        .unwrap();
    let mut first_two = names(&found)[..2].to_vec();
    first_two.sort_unstable();
    assert_eq!(first_two, ["github__create_issue", "jira__create_issue"]);
}

#[test]
fn a_tool_the_caller_may_not_use_is_neither_returned_nor_counted() {
    let index = ToolIndex::new(catalogue());
    let query = Query::new("create an issue");
    let everyone = index.search(&query, &|_| true).unwrap();
    let allowed = |entry: &Entry| entry.server != "github";
    let some = index.search(&query, &allowed).unwrap();
    assert!(names(&everyone).contains(&"github__create_issue"));
    assert!(!names(&some).iter().any(|name| name.starts_with("github__")));
    assert_eq!(some.total_matched + 1, everyone.total_matched);
    // Not even by its exact name.
    let exact = index
        .search(&Query::new("github__create_issue"), &allowed)
        .unwrap();
    assert!(!names(&exact).contains(&"github__create_issue"));
}

#[test]
fn the_servers_filter_keeps_only_their_tools() {
    let index = ToolIndex::new(catalogue());
    let servers = ["jira".to_owned()];
    let query = Query {
        servers: Some(&servers),
        ..Query::new("create an issue")
    };
    let found = index.search(&query, &|_| true).unwrap();
    assert_eq!(names(&found), ["jira__create_issue"]);
    assert_eq!(found.total_matched, 1);
}

#[test]
fn bad_queries_say_what_to_change() {
    let index = ToolIndex::new(catalogue());
    assert_eq!(
        index.search(&Query::new("  \n"), &|_| true).unwrap_err(),
        SearchError::EmptyQuery
    );
    let long = "word ".repeat(300);
    let err = index.search(&Query::new(&long), &|_| true).unwrap_err();
    assert!(
        matches!(
            err,
            SearchError::QueryTooLong {
                chars: 1499,
                most: 1000
            }
        ),
        "{err}"
    );
    for limit in [0, MAX_LIMIT + 1] {
        let query = Query {
            limit,
            ..Query::new("issue")
        };
        let err = index.search(&query, &|_| true).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("the limit is {limit}; it must be between 1 and 20")
        );
    }
    let query = Query {
        limit: MAX_LIMIT,
        ..Query::new("issue")
    };
    assert!(index.search(&query, &|_| true).is_ok());
}

#[test]
fn nothing_matched_is_an_empty_answer() {
    let index = ToolIndex::new(catalogue());
    let found = index.search(&Query::new("zzyzx qwxq"), &|_| true).unwrap();
    assert!(found.hits.is_empty());
    assert_eq!(found.total_matched, 0);
    let empty = ToolIndex::new(Vec::new());
    assert!(
        empty
            .search(&Query::new("issue"), &|_| true)
            .unwrap()
            .hits
            .is_empty()
    );
}

#[test]
fn equal_scores_come_in_name_order_whatever_order_the_catalogue_came_in() {
    let twins = |order: &[&str]| {
        ToolIndex::new(
            order
                .iter()
                .map(|server| entry(server, "fetch_page", "Fetch a web page as markdown"))
                .collect(),
        )
    };
    let a = twins(&["b", "c", "a"]);
    let b = twins(&["c", "a", "b"]);
    let query = Query::new("download a page");
    let found_a = a.search(&query, &|_| true).unwrap();
    let found_b = b.search(&query, &|_| true).unwrap();
    assert_eq!(
        names(&found_a),
        ["a__fetch_page", "b__fetch_page", "c__fetch_page"]
    );
    assert_eq!(names(&found_a), names(&found_b));
    assert_eq!(a.version(), b.version());
}

#[test]
fn the_version_follows_the_definitions() {
    let before = ToolIndex::new(catalogue());
    let mut changed = catalogue();
    changed[0] = entry(
        "github",
        "create_issue",
        "Create a new issue (now with labels)",
    );
    let after = ToolIndex::new(changed);
    assert_ne!(before.version(), after.version());
    assert_eq!(before.version(), ToolIndex::new(catalogue()).version());
    assert_eq!(before.version().len(), 32);
}

#[test]
fn parameters_and_camel_case_names_are_searched() {
    let with_schema = Arc::new(
        serde_json::from_value::<Tool>(serde_json::json!({
            "name": "listPods",
            "description": "Lists what runs",
            "inputSchema": {"type": "object", "properties": {
                "namespace": {"type": "string", "description": "Kubernetes namespace"}
            }}
        }))
        .unwrap(),
    );
    let mut all = catalogue();
    all.push(Entry::new("k8s__listPods", "k8s", with_schema));
    let index = ToolIndex::new(all);
    let found = index
        .search(&Query::new("pods in a kubernetes namespace"), &|_| true)
        .unwrap();
    assert_eq!(names(&found)[0], "k8s__listPods");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over random catalogues, checks and queries: every hit passes the check and the server
    /// filter, no more than the limit come back, scores never rise down the list past the
    /// exact names, and the count never exceeds the tools allowed.
    #[test]
    fn hits_respect_the_check_the_filter_and_the_limit(
        tools in proptest::collection::vec(
            ("[a-c]", "[a-z]{2,6}(_[a-z]{2,6}){0,2}", proptest::collection::vec("[a-z]{2,6}", 0..8)),
            0..40,
        ),
        denied in proptest::collection::vec(any::<bool>(), 40),
        query in proptest::collection::vec("[a-z]{2,6}", 1..4),
        limit in 1usize..=MAX_LIMIT,
        only in proptest::option::of("[a-c]"),
    ) {
        let entries: Vec<Entry> = tools
            .iter()
            .map(|(server, name, words)| entry(server, name, &words.join(" ")))
            .collect();
        let denied_names: Vec<String> = entries
            .iter()
            .zip(&denied)
            .filter(|(_, denied)| **denied)
            .map(|(entry, _)| entry.name.clone())
            .collect();
        let allowed = |entry: &Entry| !denied_names.contains(&entry.name);
        let allowed_count = entries.iter().filter(|entry| allowed(entry)).count();
        let index = ToolIndex::new(entries);
        let servers: Option<Vec<String>> = only.map(|server| vec![server]);
        let text = query.join(" ");
        let query = Query { text: &text, limit, servers: servers.as_deref() };
        let found = index.search(&query, &allowed).unwrap();
        prop_assert!(found.hits.len() <= limit);
        prop_assert!(found.total_matched <= allowed_count);
        prop_assert!(found.hits.len() <= found.total_matched);
        for hit in &found.hits {
            prop_assert!(allowed(hit.entry), "{} is denied", hit.entry.name);
            if let Some(servers) = &servers {
                prop_assert!(servers.contains(&hit.entry.server));
            }
        }
        let names: Vec<&str> = found.hits.iter().map(|hit| hit.entry.name.as_str()).collect();
        let again = index.search(&query, &allowed).unwrap();
        let again: Vec<&str> = again.hits.iter().map(|hit| hit.entry.name.as_str()).collect();
        prop_assert_eq!(names, again);
    }
}
