//! Why a search was not made, in words the caller (often a model) can act on.

/// A search that cannot be made as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The query has no text.
    #[error("the query is empty: describe the task in a few words")]
    EmptyQuery,
    /// The query is longer than a search takes.
    #[error(
        "the query is {chars} characters long; at most {most} are taken: describe the task in fewer words"
    )]
    QueryTooLong {
        /// Its length, in characters.
        chars: usize,
        /// The most taken.
        most: usize,
    },
    /// The limit is outside 1 to [`MAX_LIMIT`](crate::MAX_LIMIT).
    #[error("the limit is {limit}; it must be between 1 and {most}")]
    Limit {
        /// The limit asked for.
        limit: usize,
        /// The most results one search returns.
        most: usize,
    },
    /// The vectors of a hybrid search do not fit the index or the query's vector.
    #[error(transparent)]
    Vectors(#[from] crate::VectorError),
}
