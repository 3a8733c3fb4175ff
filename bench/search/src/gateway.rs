//! Search mode through a running gateway, as a client meets it over HTTP: the tokens of the
//! whole `tools/list` (every page: the definitions a client would give its model) and of one
//! `search_tools` answer at the default limit (the text the model reads), counted with
//! OpenAI's o200k encoding; and the latency of a `tools/list` page beside a `search_tools`
//! call, one request at a time, interleaved.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use toolwire_client::ClientBuilder;
use toolwire_protocol::methods::ListTools;
use toolwire_protocol::{ContentBlock, PaginatedParams};

/// The gateway's search tool (its name is the gateway's, fixed, never an upstream's).
const SEARCH_TOOLS: &str = "search_tools";

/// A task in words, as the model would put it.
const QUERY: &str = "what time is it in Tokyo right now";

/// The tokens of `text` in o200k.
fn tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

pub(crate) async fn run(url: &str, requests: usize, search: bool) -> anyhow::Result<Value> {
    let client = ClientBuilder::new("search-bench", "1").http(url)?;
    let tools = client.list_tools().await?;
    let list_json = serde_json::to_string(&tools)?;
    let mut report = json!({
        "listed_tools": tools.len(),
        "list_tokens": tokens(&list_json),
        "list_bytes": list_json.len(),
    });
    let arguments = json!({"query": QUERY});
    let mut page = Histogram::<u64>::new(3)?;
    let mut searched = Histogram::<u64>::new(3)?;
    if search {
        let result = client.call_tool(SEARCH_TOOLS, arguments.clone()).await?;
        anyhow::ensure!(!result.is_error(), "search_tools failed: {result:?}");
        let text: String = result
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect();
        report["search_answer_tokens"] = json!(tokens(&text));
        report["search_answer"] = serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    for round in 0..=requests {
        let started = Instant::now();
        std::hint::black_box(
            client
                .send::<ListTools>(&PaginatedParams::default())
                .await?,
        );
        let took = started.elapsed();
        if round > 0 {
            page.record(u64::try_from(took.as_nanos())?)?;
        }
        if search {
            let started = Instant::now();
            std::hint::black_box(client.call_tool(SEARCH_TOOLS, arguments.clone()).await?);
            let took = started.elapsed();
            if round > 0 {
                searched.record(u64::try_from(took.as_nanos())?)?;
            }
        }
    }
    let micros = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    report["list_page_p50_us"] = json!(micros(&page, 0.5));
    report["list_page_p99_us"] = json!(micros(&page, 0.99));
    if search {
        report["search_p50_us"] = json!(micros(&searched, 0.5));
        report["search_p99_us"] = json!(micros(&searched, 0.99));
    }
    client.close().await;
    Ok(report)
}
