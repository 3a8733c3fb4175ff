//! The index: one BM25 scorer per field over every entry, and the search that adds their
//! weighted scores, keeps what the caller may use, and ranks.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bm25::{DefaultTokenizer, Embedder, EmbedderBuilder, Language, Tokenizer};
use sha2::{Digest as _, Sha256};
use toolwire_protocol::Tool;

use crate::words::{Fields, split_identifiers};
use crate::{DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, SearchError};

/// The weight of each field's BM25 score in a tool's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// The tool's names, split into words.
    pub name: f32,
    /// Its server's name (prefix).
    pub server: f32,
    /// Its title.
    pub title: f32,
    /// Its description.
    pub description: f32,
    /// Its parameters' names and descriptions.
    pub parameters: f32,
    /// All of the above as one text (one BM25 over everything, whose term frequencies and
    /// lengths span the fields).
    pub all: f32,
}

impl Default for Weights {
    fn default() -> Weights {
        // Chosen on half of bench/search's queries (the other half confirms): one BM25 over
        // all of a tool's text finds more than fields weighed apart (a task's words fall in
        // any field), and the description, which says what the tool does, weighs a little
        // more. Names weigh nothing more: the exact name ranks first anyway, and a task's
        // words are seldom a tool's name.
        Weights {
            name: 0.0,
            server: 0.0,
            title: 0.0,
            description: 0.25,
            parameters: 0.0,
            all: 1.0,
        }
    }
}

/// One tool as a caller could be offered it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name a caller calls it by (a gateway's `prefix__tool`).
    pub name: String,
    /// The server it comes from, by the name (prefix) callers know it by.
    pub server: String,
    /// The definition as its server lists it.
    pub tool: Arc<Tool>,
}

impl Entry {
    /// `tool` from `server`, called `name`.
    pub fn new(name: impl Into<String>, server: impl Into<String>, tool: Arc<Tool>) -> Entry {
        Entry {
            name: name.into(),
            server: server.into(),
            tool,
        }
    }
}

/// What to search for.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The task, in words (or a tool's exact name).
    pub text: &'a str,
    /// How many results at most: 1 to [`MAX_LIMIT`].
    pub limit: usize,
    /// Only tools of these servers (by prefix), when given.
    pub servers: Option<&'a [String]>,
}

impl<'a> Query<'a> {
    /// `text`, with [`DEFAULT_LIMIT`] results from every server.
    pub fn new(text: &'a str) -> Query<'a> {
        Query {
            text,
            limit: DEFAULT_LIMIT,
            servers: None,
        }
    }

    /// The query's text, trimmed, when a search can be made as asked (what every search
    /// checks first): before an embedding of it is asked for, say.
    pub fn check(&self) -> Result<&'a str, SearchError> {
        checked(self)
    }
}

/// What a search found.
#[derive(Debug)]
pub struct Found<'a> {
    /// The best tools first, at most the query's limit.
    pub hits: Vec<Hit<'a>>,
    /// How many tools the caller may use matched at all.
    pub total_matched: usize,
}

/// One tool found.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    /// The tool.
    pub entry: &'a Entry,
    /// Its score: higher is better; comparable within one search only.
    pub score: f32,
}

/// The tokenizer of every field and of queries: identifiers split into words, then the
/// [`bm25`] crate's English tokenizer (Unicode words, lower case, stop words, stemming).
struct ToolTokenizer(DefaultTokenizer);

impl Default for ToolTokenizer {
    fn default() -> ToolTokenizer {
        ToolTokenizer(
            DefaultTokenizer::builder()
                .language_mode(Language::English)
                .normalization(true)
                .stopwords(true)
                .stemming(true)
                .build(),
        )
    }
}

impl Tokenizer for ToolTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        self.0.tokenize(&split_identifiers(input_text))
    }
}

/// Text already tokenized by [`ToolTokenizer`], its tokens joined by spaces.
struct Tokenized;

impl Tokenizer for Tokenized {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        input_text
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// One field's postings over every entry (by position), and its weight: for each token, its
/// inverse document frequency and, for each entry whose field holds it, the token's BM25 term
/// weight there (term frequency saturated, length normalised: [`bm25::Embedder`]'s). An
/// entry's score for a query is the sum over the query's tokens of idf × term weight, which is
/// what [`bm25::Scorer`] computes, token by token rather than entry by entry (a test holds
/// the two equal).
struct FieldIndex {
    weight: f32,
    postings: HashMap<u32, Postings>,
}

/// One token's entries in one field.
struct Postings {
    idf: f32,
    /// (entry position, term weight), in position order.
    entries: Vec<(u32, f32)>,
}

impl FieldIndex {
    fn new(weight: f32, texts: &[&str]) -> FieldIndex {
        // Each text tokenized once (stemming is the cost), then fitted and embedded as tokens.
        let tokenizer = ToolTokenizer::default();
        let tokenized: Vec<String> = texts
            .iter()
            .map(|t| tokenizer.tokenize(t).join(" "))
            .collect();
        let tokenized: Vec<&str> = tokenized.iter().map(String::as_str).collect();
        let embedder = EmbedderBuilder::<u32, Tokenized>::with_tokenizer_and_fit_to_corpus(
            Tokenized, &tokenized,
        )
        .build();
        let mut postings: HashMap<u32, Postings> = HashMap::new();
        for (position, text) in (0u32..).zip(tokenized) {
            let mut seen = HashSet::new();
            for token in embedder.embed(text).0 {
                // A token's weight is the same at each of its occurrences: taken once.
                if seen.insert(token.index) {
                    postings
                        .entry(token.index)
                        .or_insert_with(|| Postings {
                            idf: 0.0,
                            entries: Vec::new(),
                        })
                        .entries
                        .push((position, token.value));
                }
            }
        }
        let n = texts.len() as f32;
        for token in postings.values_mut() {
            // The idf of bm25::Scorer.
            let df = token.entries.len() as f32;
            token.idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        }
        FieldIndex { weight, postings }
    }

    /// Adds this field's weighted score for the query's `tokens` to each entry's in `scores`.
    fn add_scores(&self, tokens: &[u32], scores: &mut [f32]) {
        for token in tokens {
            if let Some(postings) = self.postings.get(token) {
                let weight = self.weight * postings.idf;
                for &(position, value) in &postings.entries {
                    scores[position as usize] += weight * value;
                }
            }
        }
    }
}

/// Tool definitions, indexed for search. Made whole from a catalogue; a changed catalogue is
/// a new index.
pub struct ToolIndex {
    entries: Vec<Entry>,
    fields: Vec<FieldIndex>,
    /// Turns a query into its tokens, as every field's were made.
    queries: Embedder<u32, ToolTokenizer>,
    version: String,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("entries", &self.entries.len())
            .field("version", &self.version)
            .finish()
    }
}

impl ToolIndex {
    /// The index of `entries` (in name order, whatever order they come in), with the default
    /// [`Weights`].
    pub fn new(entries: Vec<Entry>) -> ToolIndex {
        ToolIndex::with_weights(entries, Weights::default())
    }

    /// The index of `entries`, each field's score weighed by `weights`.
    pub fn with_weights(mut entries: Vec<Entry>, weights: Weights) -> ToolIndex {
        entries.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.server.cmp(&b.server)));
        let fields: Vec<Fields> = entries
            .iter()
            .map(|entry| Fields::of(&entry.name, &entry.server, &entry.tool))
            .collect();
        let field = |weight: f32, text: fn(&Fields) -> &str| {
            // A field that weighs nothing is not indexed.
            let texts: Vec<&str> = match weight > 0.0 {
                true => fields.iter().map(text).collect(),
                false => Vec::new(),
            };
            FieldIndex::new(weight, &texts)
        };
        let indexes = vec![
            field(weights.name, |f| &f.name),
            field(weights.server, |f| &f.server),
            field(weights.title, |f| &f.title),
            field(weights.description, |f| &f.description),
            field(weights.parameters, |f| &f.parameters),
            field(weights.all, |f| &f.all),
        ];
        let version = version(&entries);
        ToolIndex {
            entries,
            fields: indexes,
            queries: EmbedderBuilder::<u32, ToolTokenizer>::with_avgdl(1.0).build(),
            version,
        }
    }

    /// Every entry, in name order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// A digest of every indexed definition (names, servers, definitions): the same
    /// catalogue, the same version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The tools best matching `query` among those `allowed` lets through, best first.
    pub fn search(
        &self,
        query: &Query<'_>,
        allowed: &dyn Fn(&Entry) -> bool,
    ) -> Result<Found<'_>, SearchError> {
        let text = checked(query)?;
        let scores = self.lexical_scores(text);
        let mut ranked: Vec<Ranked> = Vec::new();
        for (position, (entry, &score)) in self.entries.iter().zip(&scores).enumerate() {
            let exact = exactness(entry, text);
            if (score <= 0.0 && exact == 0) || !admitted(query, entry, allowed) {
                continue;
            }
            ranked.push(Ranked {
                exact,
                score,
                position,
            });
        }
        Ok(self.ranked(ranked, query.limit))
    }

    /// Every entry's lexical score for `text` (by position): the weighted sum of its fields'
    /// BM25 scores, 0 for an entry that shares no token with it.
    pub(crate) fn lexical_scores(&self, text: &str) -> Vec<f32> {
        let tokens: Vec<u32> = self.queries.embed(text).indices().copied().collect();
        let mut scores = vec![0f32; self.entries.len()];
        for field in &self.fields {
            field.add_scores(&tokens, &mut scores);
        }
        scores
    }

    /// The entries `ranked` found, best first, at most `limit`: exact names first, then by
    /// score; equal scores in name order (the entries' order), so the same index and query
    /// always give the same answer.
    pub(crate) fn ranked(&self, mut ranked: Vec<Ranked>, limit: usize) -> Found<'_> {
        let total_matched = ranked.len();
        ranked.sort_by(|a, b| {
            b.exact
                .cmp(&a.exact)
                .then_with(|| b.score.partial_cmp(&a.score).unwrap_or(Ordering::Equal))
                .then_with(|| a.position.cmp(&b.position))
        });
        let hits = ranked
            .into_iter()
            .take(limit)
            .map(|r| Hit {
                entry: &self.entries[r.position],
                score: r.score,
            })
            .collect();
        Found {
            hits,
            total_matched,
        }
    }
}

/// One entry a search matched, before ranking.
pub(crate) struct Ranked {
    /// How exactly the query names it ([`exactness`]).
    pub(crate) exact: u8,
    /// Its score.
    pub(crate) score: f32,
    /// Its position in the index's entries.
    pub(crate) position: usize,
}

/// The query's text, trimmed, when the query can be searched for as asked.
pub(crate) fn checked<'q>(query: &Query<'q>) -> Result<&'q str, SearchError> {
    let text = query.text.trim();
    if text.is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    let chars = text.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(SearchError::QueryTooLong {
            chars,
            most: MAX_QUERY_CHARS,
        });
    }
    if query.limit == 0 || query.limit > MAX_LIMIT {
        return Err(SearchError::Limit {
            limit: query.limit,
            most: MAX_LIMIT,
        });
    }
    Ok(text)
}

/// Whether `entry` may be in `query`'s answer: of one of its servers (when it names some),
/// and let through by the caller's check.
pub(crate) fn admitted(query: &Query<'_>, entry: &Entry, allowed: &dyn Fn(&Entry) -> bool) -> bool {
    query
        .servers
        .is_none_or(|servers| servers.contains(&entry.server))
        && allowed(entry)
}

/// How exactly `text` names `entry`: 2 for the name it is called by, 1 for the upstream's,
/// else 0 (ASCII case aside).
pub(crate) fn exactness(entry: &Entry, text: &str) -> u8 {
    if entry.name.eq_ignore_ascii_case(text) {
        2
    } else if entry.tool.name.eq_ignore_ascii_case(text) {
        1
    } else {
        0
    }
}

/// The digest of `entries`, as lower-case hex.
fn version(entries: &[Entry]) -> String {
    let mut hasher = Sha256::new();
    for entry in entries {
        hasher.update(entry.name.as_bytes());
        hasher.update([0]);
        hasher.update(entry.server.as_bytes());
        hasher.update([0]);
        // A definition that was parsed serializes; one that would not is hashed by name only.
        hasher.update(serde_json::to_vec(&*entry.tool).unwrap_or_default());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    toolwire_protocol::hex::encode(&digest[..16])
}

#[cfg(test)]
mod tests {
    use bm25::{EmbedderBuilder, Scorer};
    use proptest::prelude::*;

    use super::{FieldIndex, ToolTokenizer};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The postings give every entry the score bm25's own scorer gives it.
        #[test]
        fn postings_score_as_bm25s_scorer_does(
            texts in proptest::collection::vec("([a-f]{1,3}( |_)){0,12}", 1..30),
            query in "([a-f]{1,3} ){1,5}",
        ) {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let field = FieldIndex::new(1.0, &refs);
            let embedder = EmbedderBuilder::<u32, ToolTokenizer>::with_tokenizer_and_fit_to_corpus(
                ToolTokenizer::default(),
                &refs,
            )
            .build();
            let mut scorer = Scorer::<u32, u32>::new();
            for (position, text) in (0u32..).zip(&refs) {
                scorer.upsert(&position, embedder.embed(text));
            }
            let query = embedder.embed(&query);
            let tokens: Vec<u32> = query.indices().copied().collect();
            let mut ours = vec![0f32; refs.len()];
            field.add_scores(&tokens, &mut ours);
            for (position, score) in (0u32..).zip(&ours) {
                let theirs = scorer.score(&position, &query).unwrap_or(0.0);
                prop_assert!((score - theirs).abs() <= 1e-4 * theirs.abs().max(1.0),
                    "entry {}: {} against {}", position, score, theirs);
            }
        }
    }
}
