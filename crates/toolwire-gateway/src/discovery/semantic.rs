//! The optional semantic stage of `search_tools`: an OpenAI-compatible embeddings endpoint the
//! operator configures (`discovery.embeddings`), the served tools' vectors computed in the
//! background whenever the served set changes, and each query's vector asked for at search.
//!
//! Nothing waits on it: until the catalogue's vectors are ready, and whenever the endpoint
//! fails or is slow for a query, a search answers lexically (and says so). Vectors are kept by
//! a digest of the text embedded, so a change embeds only the definitions that are new or
//! changed. A failing endpoint is logged once per streak of failures, with its error, and the
//! background computation retries with backoff.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use toolwire_search::{ToolIndex, VectorError, Vectors, embedding_text};

use super::config::EmbeddingsConfig;

/// The most texts in one request: OpenAI's endpoint takes more, small local servers fewer.
pub(crate) const BATCH: usize = 64;

/// A background batch of the catalogue waits at least this long (a query waits the configured
/// timeout): a local model on a small machine takes seconds for 64 texts, and nothing waits on
/// the batch.
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The first wait before the catalogue's vectors are asked for again after a failure; each
/// failure doubles it, up to [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MOST_BACKOFF: Duration = Duration::from_secs(60);

/// Why the endpoint gave no vectors.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbedError {
    /// The request failed or timed out.
    #[error("the request failed: {0}")]
    Request(#[from] reqwest::Error),
    /// The endpoint answered with an error status.
    #[error("it answered {status}: {message}")]
    Status {
        status: reqwest::StatusCode,
        message: String,
    },
    /// The answer is not one vector per text.
    #[error("its answer is not one vector per text: {0}")]
    Answer(String),
    /// The vectors cannot be used (dimensions differ, not finite, zero).
    #[error(transparent)]
    Vectors(#[from] VectorError),
}

/// An OpenAI-compatible embeddings endpoint.
pub(crate) struct Endpoint {
    client: reqwest::Client,
    config: EmbeddingsConfig,
    /// The API key, read from the configured environment variable.
    key: Option<String>,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    index: usize,
    embedding: Vec<f32>,
}

impl Endpoint {
    /// The endpoint of `config`, its key read from the environment now; `None` (logged) when
    /// no client can be made.
    fn new(config: &EmbeddingsConfig) -> Option<Endpoint> {
        let key = config.api_key_env.as_ref().and_then(|name| {
            let key = std::env::var(name).ok().filter(|k| !k.is_empty());
            if key.is_none() {
                tracing::warn!(
                    variable = %name,
                    "discovery.embeddings.apiKeyEnv names {name}, which is not set: requests go without a key"
                );
            }
            key
        });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build();
        match client {
            Ok(client) => Some(Endpoint {
                client,
                config: config.clone(),
                key,
            }),
            Err(error) => {
                tracing::error!(%error, "no client for the embeddings endpoint: search stays lexical");
                None
            }
        }
    }

    /// The vectors of `texts` (at most [`BATCH`]), in order, waiting `timeout` at most.
    async fn embed(&self, texts: &[&str], timeout: Duration) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request =
            self.client.post(&self.config.url).timeout(timeout).json(
                &json!({"model": self.config.model, "input": texts, "encoding_format": "float"}),
            );
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let message: String = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(body)
                .chars()
                .take(300)
                .collect();
            return Err(EmbedError::Status { status, message });
        }
        let mut rows = response.json::<Answer>().await?.data;
        rows.sort_by_key(|row| row.index);
        let in_order = rows.iter().enumerate().all(|(i, row)| row.index == i);
        if rows.len() != texts.len() || !in_order {
            return Err(EmbedError::Answer(format!(
                "{} vectors for {} texts",
                rows.len(),
                texts.len()
            )));
        }
        Ok(rows.into_iter().map(|row| row.embedding).collect())
    }
}

/// The semantic stage of one configuration: its endpoint, the vectors it gave by text digest,
/// and the catalogue's vectors once ready.
pub(crate) struct Semantic {
    endpoint: Endpoint,
    /// Each embedded text's vector, by the SHA-256 of the text.
    cache: Mutex<HashMap<[u8; 32], Arc<[f32]>>>,
    /// The vectors of the index last made ready.
    ready: ArcSwapOption<Vectors>,
    /// The background computation, stopped when another starts or the stage is dropped.
    computing: Mutex<Option<tokio::task::AbortHandle>>,
    /// Whether the endpoint's last answer was a failure (logged once per streak).
    failing: AtomicBool,
}

impl Drop for Semantic {
    fn drop(&mut self) {
        if let Some(task) = self.computing.get_mut().map(Option::take).ok().flatten() {
            task.abort();
        }
    }
}

/// Why a search answered lexically: a label of the fallback counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// The catalogue's vectors are not ready yet.
    NotReady,
    /// The endpoint failed or timed out for the query.
    Failed,
}

impl Fallback {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Fallback::NotReady => "not_ready",
            Fallback::Failed => "failed",
        }
    }
}

impl Semantic {
    /// The stage of `config`; `None` when no client can be made.
    pub(crate) fn new(config: &EmbeddingsConfig) -> Option<Semantic> {
        Some(Semantic {
            endpoint: Endpoint::new(config)?,
            cache: Mutex::default(),
            ready: ArcSwapOption::empty(),
            computing: Mutex::new(None),
            failing: AtomicBool::new(false),
        })
    }

    /// The configuration it was made from.
    pub(crate) fn config(&self) -> &EmbeddingsConfig {
        &self.endpoint.config
    }

    /// Stops the background computation (the stage is replaced).
    pub(crate) fn stop(&self) {
        if let Some(task) = self
            .computing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }

    /// The vectors of `index`, when they are ready.
    pub(crate) fn ready_for(&self, index: &ToolIndex) -> Option<Arc<Vectors>> {
        self.ready
            .load_full()
            .filter(|vectors| vectors.version() == index.version())
    }

    /// Starts computing `index`'s vectors in the background (on the current Tokio runtime),
    /// stopping any computation of an earlier index.
    pub(crate) fn refresh(self: &Arc<Self>, index: Arc<ToolIndex>) {
        let mut computing = self.computing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = computing.take() {
            old.abort();
        }
        if self.ready_for(&index).is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "no Tokio runtime to compute the tools' embeddings on: search stays lexical"
            );
            return;
        };
        let task = runtime.spawn(compute(Arc::downgrade(self), index));
        *computing = Some(task.abort_handle());
    }

    /// The vector of a query, waiting the configured timeout at most; a failure is logged
    /// (once per streak).
    pub(crate) async fn query(&self, text: &str) -> Option<Vec<f32>> {
        let timeout = self.endpoint.config.timeout;
        match self.endpoint.embed(&[text], timeout).await {
            Ok(mut vectors) => {
                self.answered();
                vectors.pop()
            }
            Err(error) => {
                self.failed(&error);
                None
            }
        }
    }

    /// The vectors of `index`'s entries: those of texts already embedded from the cache, the
    /// others asked for in batches (each batch kept as it comes, so a failure loses no work).
    async fn vectors_of(&self, index: &ToolIndex) -> Result<Vectors, EmbedError> {
        let texts: Vec<String> = index.entries().iter().map(embedding_text).collect();
        let digests: Vec<[u8; 32]> = texts.iter().map(|t| Sha256::digest(t).into()).collect();
        let missing: Vec<usize> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let mut seen = HashSet::new();
            (0..texts.len())
                .filter(|&i| !cache.contains_key(&digests[i]) && seen.insert(digests[i]))
                .collect()
        };
        let timeout = self.endpoint.config.timeout.max(BATCH_TIMEOUT);
        for batch in missing.chunks(BATCH) {
            let batch_texts: Vec<&str> = batch.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.endpoint.embed(&batch_texts, timeout).await?;
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (&i, vector) in batch.iter().zip(vectors) {
                cache.insert(digests[i], vector.into());
            }
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let vectors = digests
            .iter()
            .map(|d| cache.get(d).map(|v| v.to_vec()).unwrap_or_default())
            .collect();
        // Only the served texts' vectors are kept: a removed tool's are not needed again.
        let served: HashSet<&[u8; 32]> = digests.iter().collect();
        cache.retain(|digest, _| served.contains(digest));
        Ok(Vectors::new(index, vectors)?)
    }

    /// Notes a failure: logged when it starts a streak.
    fn failed(&self, error: &EmbedError) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %error,
                url = %self.endpoint.config.url,
                "the embeddings endpoint failed: search_tools answers lexically until it answers again"
            );
        }
    }

    /// Notes an answer: logged when it ends a streak of failures.
    fn answered(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!(
                url = %self.endpoint.config.url,
                "the embeddings endpoint answers again"
            );
        }
    }
}

/// Computes `index`'s vectors until they are ready (retrying with backoff), unless the stage
/// is gone.
async fn compute(semantic: Weak<Semantic>, index: Arc<ToolIndex>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(stage) = semantic.upgrade() else {
            return;
        };
        match stage.vectors_of(&index).await {
            Ok(vectors) => {
                stage.answered();
                tracing::debug!(
                    tools = index.entries().len(),
                    "the tools' embeddings are ready"
                );
                stage.ready.store(Some(Arc::new(vectors)));
                return;
            }
            Err(error) => stage.failed(&error),
        }
        drop(stage);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}
