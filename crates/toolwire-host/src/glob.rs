//! Glob patterns over tool names: `*` matches any run of characters, `?` one, `[abc]` a class,
//! `{a,b}` alternatives; a backslash escapes.

/// Why patterns do not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GlobError {
    /// One pattern is not a valid glob.
    #[error("{pattern:?} is not a valid pattern: {reason}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Each pattern compiles, but not the whole set (it grew too large).
    #[error("{reason}")]
    Set {
        /// What went wrong.
        reason: String,
    },
}

/// A compiled list of patterns: does a name match any of them?
#[derive(Debug, Clone)]
pub struct Globs {
    set: globset::GlobSet,
    patterns: Vec<String>,
}

/// One compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Glob(globset::Glob);

impl Glob {
    /// Compiles `pattern`; the error says what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<Glob, GlobError> {
        globset::GlobBuilder::new(pattern)
            .literal_separator(false)
            .backslash_escape(true)
            .empty_alternates(true)
            .build()
            .map(Glob)
            .map_err(|e| GlobError::Pattern {
                pattern: pattern.to_owned(),
                reason: e.kind().to_string(),
            })
    }
}

impl Globs {
    /// Compiles every pattern.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Globs, GlobError> {
        let mut set = globset::GlobSetBuilder::new();
        for pattern in patterns {
            set.add(Glob::new(pattern.as_ref())?.0);
        }
        Ok(Globs {
            set: set.build().map_err(|e| GlobError::Set {
                reason: e.to_string(),
            })?,
            patterns: patterns.iter().map(|p| p.as_ref().to_owned()).collect(),
        })
    }

    /// Whether `name` matches one of the patterns.
    pub fn matches(&self, name: &str) -> bool {
        // An empty list answers without a look at `name`: globset makes a candidate path of it
        // first (about 340 instructions), and a policy checks up to six lists a call, most of
        // them empty.
        !self.is_empty() && self.set.is_match(name)
    }

    /// The first pattern (in the order given) that `name` matches, to say which rule applied.
    pub fn first_match(&self, name: &str) -> Option<&str> {
        if self.is_empty() {
            return None;
        }
        self.set
            .matches(name)
            .into_iter()
            .min()
            .map(|i| self.patterns[i].as_str())
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_cross_everything_and_classes_work() {
        let g = Globs::new(&["fs__*", "git__status", "*__delete_?", "time__{get,set}_*"]).unwrap();
        assert!(g.matches("fs__read_file"));
        assert!(g.matches("fs__a/b"));
        assert!(!g.matches("fsx__read"));
        assert!(g.matches("git__status"));
        assert!(!g.matches("git__status2"));
        assert!(g.matches("db__delete_x"));
        assert!(!g.matches("db__delete_xy"));
        assert!(g.matches("time__get_zone"));
        assert_eq!(g.first_match("fs__x"), Some("fs__*"));
        assert_eq!(g.first_match("nope"), None);
        assert!(
            Globs::new(&["a[b"])
                .unwrap_err()
                .to_string()
                .contains("not a valid pattern")
        );
        let none = Globs::new::<&str>(&[]).unwrap();
        assert!(none.is_empty());
        for name in ["", "fs__x", "*"] {
            assert!(!none.matches(name));
            assert_eq!(none.first_match(name), None);
        }
        // The first pattern in the order given, not the most specific.
        let both = Globs::new(&["*__x", "fs__x"]).unwrap();
        assert_eq!(both.first_match("fs__x"), Some("*__x"));
    }
}
