//! The optional semantic stage: each tool's short text embedded by a model the caller runs
//! (this crate makes no request), and a search that weighs the query's cosine with each tool
//! against the lexical score.
//!
//! The caller embeds [`embedding_text`] of every entry, in [`ToolIndex::entries`] order, and
//! checks the vectors into [`Vectors`]; a search embeds the query and passes its vector to
//! [`ToolIndex::search_hybrid`]. Lexical search needs none of it.

use crate::index::{Ranked, admitted, checked, exactness};
use crate::words::split_identifiers;
use crate::{Entry, Found, Query, SearchError, ToolIndex};

/// The weight of the dense (cosine) score in a hybrid score; the lexical score has the rest.
///
/// Measured by `bench/search/embed/eval` with all-MiniLM-L6-v2 over `bench/search` (807 real
/// tools, 412 queries), both scores min–max normalised: α = 0.8, chosen by MRR on the even half
/// of the queries, gave recall@5 0.680 on the odd half (0.697 over all), against 0.665 for the
/// embedding alone and 0.49 for BM25 alone; reciprocal rank fusion (k = 60) was worse than the
/// embedding alone (0.64), giving the much weaker lexical ranking an equal say.
pub const ALPHA: f32 = 0.8;

/// The cosine at which a tool counts as matched by meaning alone (in a hybrid search's
/// `total_matched`, and to be returned at all) when it shares no word with the query. For
/// all-MiniLM-L6-v2, unrelated sentences sit near 0.1 and paraphrases above 0.5; over
/// `bench/search`, the right tool's cosine is below 0.2 for few queries (that the lexical score
/// does not rescue either).
pub const COSINE_FLOOR: f32 = 0.2;

/// At most this many words of a description's opening are embedded.
const MOST_DESCRIPTION_WORDS: usize = 40;

/// A description's opening sentences are taken until they hold at least this many words.
const LEAST_DESCRIPTION_WORDS: usize = 12;

/// The text of `entry` to embed: its server and its upstream name (without a leading
/// `server__`) split into lower-case words,
/// then the first sentence(s) of its description (at least 12 words when there are, at most
/// 40): one focused statement of what it does (the `short` layout of
/// `bench/search/embed/eval`, which embedded better than the whole definition).
///
/// ```
/// use std::sync::Arc;
/// use toolwire_search::{Entry, embedding_text};
///
/// let tool = serde_json::from_value(serde_json::json!({
///     "name": "getFileContents", "inputSchema": {"type": "object"},
///     "description": "Read a file. Returns its text. Large files are cut at 1 MB, and binary files are refused."
/// })).unwrap();
/// let entry = Entry::new("github__getFileContents", "github", Arc::new(tool));
/// assert_eq!(
///     embedding_text(&entry),
///     "github get file contents: Read a file. Returns its text. Large files are cut at 1 MB, and binary files are refused."
/// );
/// ```
pub fn embedding_text(entry: &Entry) -> String {
    let words = |text: &str| {
        split_identifiers(text)
            .split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let description = entry.tool.description.as_deref().unwrap_or("");
    // A definition served under its qualified name (a gateway's `server__tool`) is named once:
    // the server is already said.
    let name = entry.tool.name.as_str();
    let name = name
        .strip_prefix(entry.server.as_str())
        .and_then(|rest| rest.strip_prefix("__"))
        .unwrap_or(name);
    format!(
        "{} {}: {}",
        words(&entry.server),
        words(name),
        first_sentences(description)
    )
}

/// The opening of `description`, whitespace collapsed: whole sentences until they hold
/// [`LEAST_DESCRIPTION_WORDS`], cut at [`MOST_DESCRIPTION_WORDS`].
fn first_sentences(description: &str) -> String {
    let mut taken = Vec::new();
    for word in description.split_whitespace() {
        taken.push(word);
        let sentence_ends = word.ends_with(['.', '!', '?']);
        if taken.len() >= MOST_DESCRIPTION_WORDS
            || (sentence_ends && taken.len() >= LEAST_DESCRIPTION_WORDS)
        {
            break;
        }
    }
    taken.join(" ")
}

/// Why vectors cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// Not one vector per entry of the index.
    #[error("{given} vectors for an index of {entries} tools: give one per tool, in its order")]
    Count {
        /// How many were given.
        given: usize,
        /// How many entries the index has.
        entries: usize,
    },
    /// A vector's length is not the others'.
    #[error("the vector of {of} has {found} dimensions; the others have {expected}")]
    Dimension {
        /// Whose vector: an entry's name, or the query.
        of: String,
        /// The others' dimension.
        expected: usize,
        /// Its dimension.
        found: usize,
    },
    /// A vector holds NaN or an infinity.
    #[error("the vector of {of} holds a value that is not a finite number")]
    NotFinite {
        /// Whose vector.
        of: String,
    },
    /// A vector has no direction (all zeros, or no dimensions).
    #[error("the vector of {of} is zero, so it has no direction")]
    Zero {
        /// Whose vector.
        of: String,
    },
    /// The vectors were made for another index (another catalogue).
    #[error("the vectors were made for the index of version {vectors}, not {index}")]
    OtherIndex {
        /// The version of the index they were made for.
        vectors: String,
        /// The version of the index searched.
        index: String,
    },
}

/// One L2-normalised vector per entry of a [`ToolIndex`], in [`ToolIndex::entries`] order,
/// every one of the same dimension, finite and non-zero.
#[derive(Debug, Clone)]
pub struct Vectors {
    /// Every vector's dimension (0 when there are none).
    dimensions: usize,
    /// The vectors, one after the other.
    values: Vec<f32>,
    /// The version of the index they belong to.
    version: String,
}

impl Vectors {
    /// `vectors`, the embeddings of [`embedding_text`] of each of `index`'s entries in order,
    /// checked and normalised.
    pub fn new(index: &ToolIndex, vectors: Vec<Vec<f32>>) -> Result<Vectors, VectorError> {
        let entries = index.entries();
        if vectors.len() != entries.len() {
            return Err(VectorError::Count {
                given: vectors.len(),
                entries: entries.len(),
            });
        }
        let dimensions = vectors.first().map_or(0, Vec::len);
        let mut values = Vec::with_capacity(dimensions * vectors.len());
        for (vector, entry) in vectors.iter().zip(entries) {
            values.extend(normalised(vector, dimensions, || entry.name.clone())?);
        }
        Ok(Vectors {
            dimensions,
            values,
            version: index.version().to_owned(),
        })
    }

    /// Every vector's dimension (0 when there are none).
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The version of the index they belong to ([`ToolIndex::version`]).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The vector of the entry at `position`, normalised.
    pub fn get(&self, position: usize) -> Option<&[f32]> {
        let start = position.checked_mul(self.dimensions)?;
        self.values.get(start..start + self.dimensions)
    }
}

/// `vector` scaled to length 1, when it has `dimensions` finite values and is not zero; `of`
/// names it in an error.
fn normalised(
    vector: &[f32],
    dimensions: usize,
    of: impl Fn() -> String,
) -> Result<Vec<f32>, VectorError> {
    if vector.len() != dimensions {
        return Err(VectorError::Dimension {
            of: of(),
            expected: dimensions,
            found: vector.len(),
        });
    }
    if vector.iter().any(|v| !v.is_finite()) {
        return Err(VectorError::NotFinite { of: of() });
    }
    // In f64, so that large finite values do not overflow the sum.
    let length = vector
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        .sqrt();
    if length == 0.0 || !length.is_finite() {
        return Err(VectorError::Zero { of: of() });
    }
    Ok(vector
        .iter()
        .map(|&v| (f64::from(v) / length) as f32)
        .collect())
}

impl ToolIndex {
    /// The tools best matching `query` among those `allowed` lets through, best first, by
    /// meaning and words together: `query_vector` is the query's embedding (by the model that
    /// made `vectors`, which must be this index's).
    ///
    /// Among the tools the query may return (its servers, the caller's check), each tool's
    /// cosine with the query and its lexical score are min–max normalised, then weighed:
    /// [`ALPHA`] × dense + (1 − [`ALPHA`]) × lexical. A tool is matched when it shares a word
    /// with the query or its cosine reaches [`COSINE_FLOOR`]; only matched tools are returned
    /// and counted in `total_matched`. An exact name still ranks first; ties go in name order.
    pub fn search_hybrid(
        &self,
        query: &Query<'_>,
        vectors: &Vectors,
        query_vector: &[f32],
        allowed: &dyn Fn(&Entry) -> bool,
    ) -> Result<Found<'_>, SearchError> {
        let text = checked(query)?;
        if vectors.version != self.version() {
            return Err(VectorError::OtherIndex {
                vectors: vectors.version.clone(),
                index: self.version().to_owned(),
            }
            .into());
        }
        let lexical = self.lexical_scores(text);
        let candidates: Vec<usize> = (0..self.entries().len())
            .filter(|&position| admitted(query, &self.entries()[position], allowed))
            .collect();
        if candidates.is_empty() {
            return Ok(self.ranked(Vec::new(), query.limit));
        }
        let query_vector = normalised(query_vector, vectors.dimensions, || "the query".into())?;
        let cosine = |position: usize| -> f32 {
            let vector = vectors.get(position).unwrap_or_default();
            vector.iter().zip(&query_vector).map(|(a, b)| a * b).sum()
        };
        let dense: Vec<f32> = candidates.iter().map(|&p| cosine(p)).collect();
        let words: Vec<f32> = candidates.iter().map(|&p| lexical[p]).collect();
        let (dense_scaled, words_scaled) = (min_max(&dense), min_max(&words));
        let mut ranked = Vec::new();
        for (i, &position) in candidates.iter().enumerate() {
            let exact = exactness(&self.entries()[position], text);
            if words[i] <= 0.0 && dense[i] < COSINE_FLOOR && exact == 0 {
                continue;
            }
            ranked.push(Ranked {
                exact,
                score: ALPHA * dense_scaled[i] + (1.0 - ALPHA) * words_scaled[i],
                position,
            });
        }
        Ok(self.ranked(ranked, query.limit))
    }
}

/// `scores` mapped onto 0 to 1 (lowest to highest); all 0 when they are all equal.
fn min_max(scores: &[f32]) -> Vec<f32> {
    let low = scores.iter().copied().fold(f32::INFINITY, f32::min);
    let high = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if high <= low {
        return vec![0.0; scores.len()];
    }
    scores.iter().map(|s| (s - low) / (high - low)).collect()
}

#[cfg(test)]
mod tests {
    use super::first_sentences;

    #[test]
    fn the_opening_sentences_are_taken_to_twelve_words_and_cut_at_forty() {
        let forty_five = vec!["word"; 45].join(" ");
        let cases = [
            ("", ""),
            ("Read  a\nfile.", "Read a file."),
            (
                "Read a file. Returns its text, whole, unless it is too long for one answer. More.",
                "Read a file. Returns its text, whole, unless it is too long for one answer.",
            ),
            (
                "One two three four five six seven eight nine ten eleven twelve. Next.",
                "One two three four five six seven eight nine ten eleven twelve.",
            ),
            (&forty_five, &forty_five[..40 * 5 - 1]),
        ];
        for (description, want) in cases {
            assert_eq!(first_sentences(description), want, "{description}");
        }
    }
}
