//! Properties of the server's lists: however many tools and whatever the page size,
//! walking `tools/list` page by page returns every tool exactly once, in the same order each
//! time.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};
use toolwire_server::{Server, Tool};

use crate::support::request;

/// Every page of `tools/list`, as names.
fn walk(server: &Server, runtime: &tokio::runtime::Runtime) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        assert!(page < 1000, "the pages never end");
        let mut params = json!({});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let body = request(page, "tools/list", params).to_string();
        let replies = runtime.block_on(server.handle_message(body.as_bytes()));
        let reply: Value = serde_json::from_str(replies.last().unwrap()).unwrap();
        let result = &reply["result"];
        for tool in result["tools"].as_array().unwrap() {
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    names
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pages_return_every_tool_exactly_once(
        names in proptest::collection::btree_set("[a-z][a-z0-9_]{0,7}", 0..40),
        page_size in 1usize..12,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut builder = Server::builder("props", "1").page_size(page_size);
        for name in &names {
            builder = builder.tool(Tool::raw(name.clone(), json!({"type": "object"}), |_, _| async { "ok" }).description("x"));
        }
        let server = builder.build().unwrap();
        let first = walk(&server, &runtime);
        let seen: BTreeSet<String> = first.iter().cloned().collect();
        prop_assert_eq!(seen.len(), first.len(), "a tool came twice: {:?}", first);
        prop_assert_eq!(&seen, &names);
        prop_assert_eq!(walk(&server, &runtime), first, "the order is deterministic");
    }
}
