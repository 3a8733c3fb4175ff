//! Retrieval quality: recall at 1 and 5 and the mean reciprocal rank of the index's answers to
//! the queries, beside plain BM25 over name and description; with an embeddings endpoint, the
//! hybrid search too (the tools' and the queries' vectors asked of it, as a gateway asks).

use std::collections::HashMap;

use anyhow::Context as _;
use serde_json::{Value, json};
use toolwire_search::{Found, MAX_LIMIT, Query, ToolIndex, Vectors, embedding_text};

use crate::corpus::{self, Case};

/// Recall at 1 and 5, and the mean reciprocal rank over the first 20, of `rank`'s answers.
fn measure(cases: &[Case], rank: impl Fn(&str) -> Vec<String>) -> Value {
    let (mut at1, mut at5, mut mrr) = (0.0, 0.0, 0.0);
    for case in cases {
        let ranked = rank(&case.query);
        if let Some(position) = ranked.iter().position(|id| case.relevant.contains(id)) {
            at1 += f64::from(u8::from(position == 0));
            at5 += f64::from(u8::from(position < 5));
            mrr += 1.0 / (position as f64 + 1.0);
        }
    }
    let n = cases.len() as f64;
    json!({"recall_at_1": at1 / n, "recall_at_5": at5 / n, "mrr": mrr / n})
}

/// The table, as JSON: the corpus's size, then each ranking's figures over all queries and
/// over each half (the even half is the one the weights were chosen on).
/// `embeddings`: an OpenAI-compatible embeddings endpoint (`…/v1/embeddings`) whose model
/// makes the hybrid row.
pub(crate) async fn run(embeddings: Option<&str>) -> anyhow::Result<Value> {
    let tools = corpus::tools()?;
    let cases = corpus::cases()?;
    let ids: HashMap<&str, &str> = tools
        .iter()
        .map(|t| (t.entry.name.as_str(), t.id.as_str()))
        .collect();
    let index = ToolIndex::new(tools.iter().map(|t| t.entry.clone()).collect());
    // The corpus ids of a search's hits, best first.
    let found_ids = |found: &Found<'_>| -> Vec<String> {
        found
            .hits
            .iter()
            .map(|hit| ids[hit.entry.name.as_str()].to_owned())
            .collect()
    };
    let ours = |text: &str| -> Vec<String> {
        let query = Query {
            limit: MAX_LIMIT,
            ..Query::new(text)
        };
        index
            .search(&query, &|_| true)
            .map_or_else(|_| Vec::new(), |found| found_ids(&found))
    };
    let baseline = bm25::SearchEngineBuilder::<String>::with_documents(
        bm25::Language::English,
        tools.iter().map(|t| {
            let description = t.entry.tool.description.as_deref().unwrap_or("");
            bm25::Document::new(t.id.clone(), format!("{} {description}", t.entry.tool.name))
        }),
    )
    .build();
    let plain = |text: &str| -> Vec<String> {
        baseline
            .search(text, MAX_LIMIT)
            .into_iter()
            .map(|result| result.document.id)
            .collect()
    };
    let even: Vec<Case> = cases.iter().step_by(2).cloned().collect();
    let odd: Vec<Case> = cases.iter().skip(1).step_by(2).cloned().collect();
    // A ranking's figures over all queries and over each half.
    let halves = |rank: &dyn Fn(&str) -> Vec<String>| json!({"all": measure(&cases, rank), "even": measure(&even, rank), "odd": measure(&odd, rank)});
    let mut rankings = json!({
        "plain BM25 (name + description)": halves(&plain),
        "toolwire-search (lexical, default)": halves(&ours),
    });
    if let Some(url) = embeddings {
        let texts: Vec<String> = index.entries().iter().map(embedding_text).collect();
        let vectors = Vectors::new(&index, embed(url, &texts).await?)?;
        let queries: Vec<String> = cases.iter().map(|c| c.query.clone()).collect();
        let query_vectors: HashMap<String, Vec<f32>> = queries
            .iter()
            .cloned()
            .zip(embed(url, &queries).await?)
            .collect();
        let hybrid = |text: &str| -> Vec<String> {
            let query = Query {
                limit: MAX_LIMIT,
                ..Query::new(text)
            };
            index
                .search_hybrid(&query, &vectors, &query_vectors[text], &|_| true)
                .map_or_else(|_| Vec::new(), |found| found_ids(&found))
        };
        rankings[HYBRID] = halves(&hybrid);
    }
    let servers = {
        let mut servers: Vec<&str> = tools.iter().map(|t| t.entry.server.as_str()).collect();
        servers.dedup();
        servers.len()
    };
    Ok(json!({
        "servers": servers,
        "tools": tools.len(),
        "queries": cases.len(),
        "rankings": rankings,
    }))
}

/// The hybrid row's name.
const HYBRID: &str = "toolwire-search hybrid (all-MiniLM-L6-v2)";

/// The most texts in one request, as the gateway sends them.
const BATCH: usize = 64;

/// The vectors of `texts`, in order, from the OpenAI-compatible endpoint at `url`.
async fn embed(url: &str, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
    #[derive(serde::Deserialize)]
    struct Answer {
        data: Vec<Row>,
    }
    #[derive(serde::Deserialize)]
    struct Row {
        index: usize,
        embedding: Vec<f32>,
    }
    let client = reqwest::Client::new();
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(BATCH) {
        let answer: Answer = client
            .post(url)
            .json(&json!({"model": "all-MiniLM-L6-v2", "input": batch}))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("embeddings from {url}"))?
            .json()
            .await
            .with_context(|| format!("embeddings from {url}"))?;
        let mut rows = answer.data;
        rows.sort_by_key(|row| row.index);
        anyhow::ensure!(
            rows.len() == batch.len(),
            "{url} answered {} vectors for {} texts",
            rows.len(),
            batch.len()
        );
        vectors.extend(rows.into_iter().map(|row| row.embedding));
    }
    Ok(vectors)
}
