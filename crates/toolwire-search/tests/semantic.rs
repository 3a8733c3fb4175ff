//! The semantic stage as its users meet it: vectors checked against the index, a vector that
//! points at a tool finding it with no word in common, the exact name and the caller's check
//! still deciding first, and deterministic answers.

use std::sync::Arc;

use proptest::prelude::*;
use toolwire_protocol::Tool;
use toolwire_search::{
    COSINE_FLOOR, Entry, Query, SearchError, ToolIndex, VectorError, Vectors, embedding_text,
};

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

/// Four tools, in name order: each index's vector is a unit axis, so a query vector along an
/// axis points at exactly one tool.
fn catalogue() -> ToolIndex {
    ToolIndex::new(vec![
        entry("files", "read_file", "Read the contents of a file"),
        entry("git", "git_log", "Shows the commit logs"),
        entry(
            "time",
            "get_current_time",
            "Get the current time in a timezone",
        ),
        entry("weather", "forecast", "The forecast for a city"),
    ])
}

fn axes(index: &ToolIndex) -> Vectors {
    let n = index.entries().len();
    let vectors = (0..n)
        .map(|i| (0..n).map(|j| if i == j { 2.0 } else { 0.0 }).collect())
        .collect();
    Vectors::new(index, vectors).unwrap()
}

fn axis(n: usize, i: usize) -> Vec<f32> {
    (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect()
}

fn names<'a>(found: &'a toolwire_search::Found<'a>) -> Vec<&'a str> {
    found.hits.iter().map(|h| h.entry.name.as_str()).collect()
}

#[test]
fn a_vector_pointing_at_a_tool_finds_it_with_no_word_in_common() {
    let index = catalogue();
    let vectors = axes(&index);
    let query = Query::new("will I need an umbrella tomorrow");
    let lexical = index.search(&query, &|_| true).unwrap();
    assert!(lexical.hits.is_empty(), "{:?}", names(&lexical));
    let found = index
        .search_hybrid(&query, &vectors, &axis(4, 3), &|_| true)
        .unwrap();
    assert_eq!(names(&found), ["weather__forecast"]);
    assert_eq!(found.total_matched, 1);
}

#[test]
fn a_tool_below_the_cosine_floor_sharing_no_word_is_not_matched() {
    let index = catalogue();
    let vectors = axes(&index);
    let below = COSINE_FLOOR / 2.0;
    let found = index
        .search_hybrid(
            &Query::new("will I need an umbrella tomorrow"),
            &vectors,
            &[below, 0.0, 0.0, 1.0],
            &|_| true,
        )
        .unwrap();
    assert_eq!(names(&found), ["weather__forecast"]);
    assert_eq!(found.total_matched, 1);
}

#[test]
fn words_and_meaning_are_weighed_together() {
    let index = catalogue();
    let vectors = axes(&index);
    // The words name the clock tool; the vector leans to the git tool, more than to the clock.
    let mut leaning = vec![0.0, 0.9, 0.3, 0.0];
    let found = index
        .search_hybrid(&Query::new("current time"), &vectors, &leaning, &|_| true)
        .unwrap();
    assert_eq!(names(&found), ["git__git_log", "time__get_current_time"]);
    // Equal meaning: the words decide.
    leaning = vec![0.0, 0.5, 0.5, 0.0];
    let found = index
        .search_hybrid(&Query::new("current time"), &vectors, &leaning, &|_| true)
        .unwrap();
    assert_eq!(names(&found)[0], "time__get_current_time");
}

#[test]
fn an_exact_name_still_ranks_first() {
    let index = catalogue();
    let vectors = axes(&index);
    let found = index
        .search_hybrid(&Query::new("git__git_log"), &vectors, &axis(4, 0), &|_| {
            true
        })
        .unwrap();
    assert_eq!(names(&found)[0], "git__git_log");
}

#[test]
fn the_check_and_the_servers_filter_apply() {
    let index = catalogue();
    let vectors = axes(&index);
    let query = Query::new("will I need an umbrella tomorrow");
    let found = index
        .search_hybrid(&query, &vectors, &axis(4, 3), &|e| e.server != "weather")
        .unwrap();
    assert!(!names(&found).contains(&"weather__forecast"));
    assert_eq!(found.total_matched, 0);
    let servers = ["git".to_owned()];
    let only_git = Query {
        servers: Some(&servers),
        ..query
    };
    let found = index
        .search_hybrid(&only_git, &vectors, &[1.0, 1.0, 1.0, 1.0], &|_| true)
        .unwrap();
    assert_eq!(names(&found), ["git__git_log"]);
}

#[test]
fn equal_scores_come_in_name_order() {
    let index = catalogue();
    let vectors = Vectors::new(&index, vec![vec![1.0, 0.0]; 4]).unwrap();
    let found = index
        .search_hybrid(&Query::new("anything"), &vectors, &[1.0, 0.0], &|_| true)
        .unwrap();
    assert_eq!(
        names(&found),
        [
            "files__read_file",
            "git__git_log",
            "time__get_current_time",
            "weather__forecast"
        ]
    );
}

#[test]
fn bad_vectors_are_refused_naming_whose() {
    let index = catalogue();
    let good = || vec![vec![1.0, 0.0]; 4];
    let with = |position: usize, vector: Vec<f32>| {
        let mut vectors = good();
        vectors[position] = vector;
        vectors
    };
    let cases: [(Vec<Vec<f32>>, VectorError); 4] = [
        (
            vec![vec![1.0]; 3],
            VectorError::Count {
                given: 3,
                entries: 4,
            },
        ),
        (
            with(2, vec![1.0, 0.0, 0.0]),
            VectorError::Dimension {
                of: "time__get_current_time".into(),
                expected: 2,
                found: 3,
            },
        ),
        (
            with(1, vec![f32::NAN, 1.0]),
            VectorError::NotFinite {
                of: "git__git_log".into(),
            },
        ),
        (
            with(3, vec![0.0, 0.0]),
            VectorError::Zero {
                of: "weather__forecast".into(),
            },
        ),
    ];
    for (vectors, want) in cases {
        assert_eq!(Vectors::new(&index, vectors).unwrap_err(), want);
    }
    let vectors = Vectors::new(&index, good()).unwrap();
    let query = Query::new("time");
    let cases = [
        (vec![1.0, 0.0, 0.0], "has 3 dimensions; the others have 2"),
        (vec![0.0, 0.0], "the query is zero"),
        (vec![f32::INFINITY, 0.0], "not a finite number"),
    ];
    for (vector, want) in cases {
        let error = index
            .search_hybrid(&query, &vectors, &vector, &|_| true)
            .unwrap_err();
        assert!(error.to_string().contains(want), "{error}");
    }
    // Vectors of another catalogue.
    let other = ToolIndex::new(vec![entry("x", "y", "z")]);
    let error = other
        .search_hybrid(&query, &vectors, &[1.0, 0.0], &|_| true)
        .unwrap_err();
    assert!(matches!(
        error,
        SearchError::Vectors(VectorError::OtherIndex { .. })
    ));
}

#[test]
fn the_query_is_checked_as_a_lexical_search_checks_it() {
    let index = catalogue();
    let vectors = axes(&index);
    let error = index
        .search_hybrid(&Query::new("  "), &vectors, &axis(4, 0), &|_| true)
        .unwrap_err();
    assert_eq!(error, SearchError::EmptyQuery);
}

#[test]
fn a_definition_served_under_its_qualified_name_names_its_server_once() {
    let served = Entry::new(
        "time__get_current_time",
        "time",
        tool("time__get_current_time", "Get the current time."),
    );
    assert_eq!(
        embedding_text(&served),
        "time get current time: Get the current time."
    );
}

#[test]
fn the_embedded_text_is_the_short_layout() {
    let text = embedding_text(&entry(
        "brave-search",
        "brave_web_search",
        "Performs a web search using the Brave Search API, ideal for general queries, news, \
         articles, and online content. Use this for broad information gathering.",
    ));
    assert_eq!(
        text,
        "brave search brave web search: Performs a web search using the Brave Search API, ideal \
         for general queries, news, articles, and online content."
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// No hybrid search returns or counts a tool the caller may not use or a server it did not
    /// ask for, whatever the vectors; scores are finite; every hit is matched.
    #[test]
    fn hits_respect_the_check_and_the_filter(
        tools in proptest::collection::vec(("[a-c]", "[a-z]{2,6}", "[a-z]{2,6}( [a-z]{2,6}){0,4}"), 1..25),
        vectors in proptest::collection::vec(proptest::collection::vec(-1.0f32..1.0, 3), 25),
        denied in proptest::collection::vec(any::<bool>(), 25),
        query in proptest::collection::vec(-1.0f32..1.0, 3),
        words in "[a-z]{2,6}( [a-z]{2,6}){0,2}",
        only in proptest::option::of("[a-c]"),
    ) {
        let entries: Vec<Entry> = tools
            .iter()
            .enumerate()
            .map(|(i, (server, name, description))| entry(server, &format!("{name}{i}"), description))
            .collect();
        let index = ToolIndex::new(entries);
        let mut given: Vec<Vec<f32>> = vectors[..index.entries().len()].to_vec();
        for vector in &mut given {
            vector.push(1.0); // never zero
        }
        let vectors = Vectors::new(&index, given).unwrap();
        let mut query_vector = query.clone();
        query_vector.push(0.5);
        let position = |name: &str| index.entries().iter().position(|e| e.name == name).unwrap();
        let denied_name = |name: &str| denied[position(name)];
        let servers = only.map(|s| vec![s]);
        let query = Query { limit: 20, servers: servers.as_deref(), ..Query::new(&words) };
        let found = index
            .search_hybrid(&query, &vectors, &query_vector, &|e| !denied_name(&e.name))
            .unwrap();
        let may = index
            .entries()
            .iter()
            .filter(|e| !denied_name(&e.name) && servers.as_ref().is_none_or(|s| s.contains(&e.server)))
            .count();
        prop_assert!(found.total_matched <= may);
        prop_assert!(found.hits.len() <= found.total_matched);
        for hit in &found.hits {
            prop_assert!(!denied_name(&hit.entry.name));
            if let Some(servers) = &servers {
                prop_assert!(servers.contains(&hit.entry.server));
            }
            prop_assert!(hit.score.is_finite() && (0.0..=1.0 + 1e-6).contains(&hit.score));
        }
    }
}
