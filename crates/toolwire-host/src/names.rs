//! Qualified tool names: `prefix__tool`, within a length budget, never colliding, mapped back
//! to the server and the tool without ambiguity.
//!
//! Model APIs accept tool names of `[A-Za-z0-9_-]` up to 64 characters (some up to 128), and MCP
//! servers may use `.` and `/` and longer names. A name that would not fit, or that had to be
//! changed, gets a short stable hash of the server's prefix and the tool's real name instead of
//! its tail, so two tools never share a qualified name. A prefix holds no `"__"` and does not end
//! with `_` (the configuration checks that), so the first `"__"` of a qualified name always ends
//! its prefix: tools of two servers can never collide.
//!
//! One exception, for a gateway or host in front of a single server: an empty prefix serves
//! that server's tools under their own names (still made safe and fitted to the budget). It is
//! allowed only when that server is the only one: with another server beside it, a name could
//! stand for either, so [`Names::build`] and [`check_prefixes`] refuse it.

use std::collections::HashMap;

/// The default length budget of a qualified name: the limit several model APIs impose.
pub const DEFAULT_NAME_BUDGET: usize = 64;
/// The largest budget accepted.
pub const MAX_NAME_BUDGET: usize = 128;
/// The smallest budget accepted: a 32-character prefix, `__`, and room for a hashed name.
pub const MIN_NAME_BUDGET: usize = 48;

/// Hex digits of the hash added to a changed or shortened name.
const SHORT_HASH: usize = 8;
/// Hex digits used when two names still met after the short hash.
const LONG_HASH: usize = 16;

/// A tool of one server, as that server names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolRef {
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's name as the server lists it.
    pub tool: String,
}

/// The qualified names of a set of tools, both ways.
#[derive(Debug, Clone, Default)]
pub struct Names {
    forward: HashMap<ToolRef, String>,
    back: HashMap<String, ToolRef>,
}

/// Why names could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The budget is outside 48 to 128.
    #[error("a name budget of {0} is outside {MIN_NAME_BUDGET} to {MAX_NAME_BUDGET}")]
    Budget(usize),
    /// Two tools ended with one name even after hashing (a SHA-256 collision).
    #[error("tools {0:?} and {1:?} cannot be told apart")]
    Collision(ToolRef, ToolRef),
    /// A server has an empty prefix beside another server: a name without a prefix could
    /// stand for a tool of either.
    #[error(
        "server {unprefixed:?} has an empty prefix, which only the only server may have: \
         with server {other:?} beside it, its tools' names could be taken for the other's; \
         give it a prefix"
    )]
    Unprefixed {
        /// The server with the empty prefix.
        unprefixed: String,
        /// Another server configured beside it.
        other: String,
    },
}

/// Checks that an empty prefix belongs to the only server of `servers` (`(name, prefix)`
/// pairs): see [`NameError::Unprefixed`].
pub fn check_prefixes<'a>(
    servers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), NameError> {
    let mut unprefixed: Option<&str> = None;
    let mut other: Option<&str> = None;
    for (server, prefix) in servers {
        if prefix.is_empty() && unprefixed.is_none() {
            unprefixed = Some(server);
        } else if other.is_none() {
            other = Some(server);
        }
    }
    match (unprefixed, other) {
        (Some(unprefixed), Some(other)) if unprefixed != other => Err(NameError::Unprefixed {
            unprefixed: unprefixed.to_owned(),
            other: other.to_owned(),
        }),
        _ => Ok(()),
    }
}

impl Names {
    /// Names every `(server, prefix, tool)` within `budget` characters.
    pub fn build<'a>(
        budget: usize,
        tools: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<Names, NameError> {
        if !(MIN_NAME_BUDGET..=MAX_NAME_BUDGET).contains(&budget) {
            return Err(NameError::Budget(budget));
        }
        let tools: Vec<(&str, &str, &str)> = tools.into_iter().collect();
        let mut servers: Vec<(&str, &str)> = tools.iter().map(|(s, p, _)| (*s, *p)).collect();
        servers.sort_unstable();
        servers.dedup();
        check_prefixes(servers)?;
        let mut named: Vec<(ToolRef, &str, String)> = tools
            .into_iter()
            .map(|(server, prefix, tool)| {
                let r = ToolRef {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                };
                (r, prefix, qualify(prefix, tool, budget, Tail::WhenNeeded))
            })
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named.dedup_by(|a, b| a.0 == b.0);
        // Names that met: each gets a longer hash, whatever it was. Which ones met does not
        // depend on the order the tools came in, so the names are stable.
        let mut count: HashMap<&str, usize> = HashMap::new();
        for (_, _, name) in &named {
            *count.entry(name.as_str()).or_default() += 1;
        }
        let clashing: Vec<bool> = named
            .iter()
            .map(|(_, _, n)| count[n.as_str()] > 1)
            .collect();
        for ((r, prefix, name), clash) in named.iter_mut().zip(clashing) {
            if clash {
                *name = qualify(prefix, &r.tool, budget, Tail::Clashed);
            }
        }
        let mut names = Names::default();
        for (r, _, name) in named {
            if let Some(other) = names.back.insert(name.clone(), r.clone()) {
                return Err(NameError::Collision(other, r));
            }
            names.forward.insert(r, name);
        }
        Ok(names)
    }

    /// The qualified name of `tool` of `server`.
    pub fn qualified(&self, server: &str, tool: &str) -> Option<&str> {
        self.forward
            .get(&ToolRef {
                server: server.to_owned(),
                tool: tool.to_owned(),
            })
            .map(String::as_str)
    }

    /// The server and tool a qualified name stands for.
    pub fn resolve(&self, qualified: &str) -> Option<&ToolRef> {
        self.back.get(qualified)
    }

    /// How many tools are named.
    pub fn len(&self) -> usize {
        self.back.len()
    }

    /// Whether no tool is named.
    pub fn is_empty(&self) -> bool {
        self.back.is_empty()
    }
}

/// When a qualified name ends in a hash of the real one, and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Only when the plain name will not do: [`SHORT_HASH`] digits.
    WhenNeeded,
    /// Always, [`LONG_HASH`] digits: the name met another.
    Clashed,
}

/// `prefix__tool` (just `tool` when the prefix is empty), with the characters a model API
/// refuses made `_`; when that changed the name, when it is over `budget`, or when it
/// [`Tail::Clashed`], the tail becomes `_` and hex digits of SHA-256 over the prefix and the
/// real name.
fn qualify(prefix: &str, tool: &str, budget: usize, tail: Tail) -> String {
    let (hash, force) = match tail {
        Tail::WhenNeeded => (SHORT_HASH, false),
        Tail::Clashed => (LONG_HASH, true),
    };
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let start = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}__")
    };
    let plain = format!("{start}{clean}");
    if !force && clean == tool && !tool.is_empty() && plain.len() <= budget {
        return plain;
    }
    let digest = crate::util::sha256_hex(format!("{prefix}\0{tool}").as_bytes());
    let digest = &digest[..hash];
    // `clean` is ASCII, so any byte index is a character boundary.
    let room = budget.saturating_sub(start.len() + 1 + hash);
    let head = &clean[..clean.len().min(room)];
    format!("{start}{head}_{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(budget: usize, tools: &[(&str, &str, &str)]) -> Names {
        Names::build(budget, tools.iter().copied()).unwrap()
    }

    #[test]
    fn plain_names_stay_readable_and_map_back() {
        let n = names(
            64,
            &[("fs", "fs", "read_file"), ("git", "git", "git-status")],
        );
        assert_eq!(n.qualified("fs", "read_file"), Some("fs__read_file"));
        assert_eq!(n.qualified("git", "git-status"), Some("git__git-status"));
        let r = n.resolve("fs__read_file").unwrap();
        assert_eq!((r.server.as_str(), r.tool.as_str()), ("fs", "read_file"));
        assert_eq!(n.resolve("fs__nope"), None);
    }

    #[test]
    fn long_names_fit_the_budget_and_never_collide() {
        let long_a = format!("{}_alpha", "x".repeat(80));
        let long_b = format!("{}_beta", "x".repeat(80));
        let exact = "y".repeat(64 - "srv__".len());
        let n = names(
            64,
            &[
                ("s", "srv", &long_a),
                ("s", "srv", &long_b),
                ("s", "srv", &exact),
            ],
        );
        let a = n.qualified("s", &long_a).unwrap();
        let b = n.qualified("s", &long_b).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(b.len(), 64);
        assert_ne!(a, b);
        assert!(a.starts_with("srv__xxxx"));
        // Exactly at the budget: unchanged.
        assert_eq!(n.qualified("s", &exact).unwrap(), format!("srv__{exact}"));
        assert_eq!(n.resolve(a).unwrap().tool, long_a);
        // The same tools named again, in another order: the same names.
        let again = names(
            64,
            &[
                ("s", "srv", &exact),
                ("s", "srv", &long_b),
                ("s", "srv", &long_a),
            ],
        );
        assert_eq!(again.qualified("s", &long_a), Some(a));
        // A larger budget keeps more of the name.
        let wide = names(128, &[("s", "srv", &long_a)]);
        assert_eq!(
            wide.qualified("s", &long_a).unwrap(),
            format!("srv__{long_a}")
        );
    }

    #[test]
    fn characters_models_refuse_are_replaced_without_collisions() {
        let n = names(
            64,
            &[
                ("a", "a", "files.read"),
                ("a", "a", "files_read"),
                ("a", "a", "x/y"),
            ],
        );
        let dotted = n.qualified("a", "files.read").unwrap();
        assert_eq!(n.qualified("a", "files_read"), Some("a__files_read"));
        assert!(dotted.starts_with("a__files_read_") && dotted.len() == "a__files_read_".len() + 8);
        assert!(n.qualified("a", "x/y").unwrap().starts_with("a__x_y_"));
        for name in [dotted, n.qualified("a", "x/y").unwrap()] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
    }

    #[test]
    fn a_name_that_looks_hashed_cannot_take_another_tools_name() {
        // A server lists a tool literally named like another tool's hashed form.
        let n1 = names(64, &[("a", "a", "files.read")]);
        let hashed = n1.qualified("a", "files.read").unwrap().to_owned();
        let literal = hashed.strip_prefix("a__").unwrap().to_owned();
        let n = names(64, &[("a", "a", "files.read"), ("a", "a", &literal)]);
        let x = n.qualified("a", "files.read").unwrap();
        let y = n.qualified("a", &literal).unwrap();
        assert_ne!(x, y);
        assert_eq!(n.resolve(x).unwrap().tool, "files.read");
        assert_eq!(n.resolve(y).unwrap().tool, literal);
        assert_eq!(n.len(), 2);
    }

    #[test]
    fn the_only_server_may_serve_its_tools_unprefixed() {
        let long = "z".repeat(80);
        let n = names(
            64,
            &[
                ("up", "", "test_simple_text"),
                ("up", "", "a.b"),
                ("up", "", &long),
            ],
        );
        assert_eq!(
            n.qualified("up", "test_simple_text"),
            Some("test_simple_text")
        );
        let r = n.resolve("test_simple_text").unwrap();
        assert_eq!(
            (r.server.as_str(), r.tool.as_str()),
            ("up", "test_simple_text")
        );
        // Made safe and fitted to the budget as with a prefix.
        let dotted = n.qualified("up", "a.b").unwrap();
        assert!(dotted.starts_with("a_b_") && dotted.len() == "a_b_".len() + 8);
        assert_eq!(n.qualified("up", &long).unwrap().len(), 64);
        assert_eq!(n.resolve(dotted).unwrap().tool, "a.b");
    }

    #[test]
    fn an_empty_prefix_beside_another_server_is_refused() {
        let err = Names::build(64, [("up", "", "echo"), ("other", "other", "echo")]).unwrap_err();
        assert_eq!(
            err,
            NameError::Unprefixed {
                unprefixed: "up".into(),
                other: "other".into()
            }
        );
        assert!(err.to_string().contains("give it a prefix"), "{err}");
        // Whatever the order, and with no tool listed yet.
        assert!(check_prefixes([("other", "other"), ("up", "")]).is_err());
        assert!(check_prefixes([("a", ""), ("b", "")]).is_err());
        assert!(check_prefixes([("up", "")]).is_ok());
        assert!(check_prefixes([("a", "a"), ("b", "b")]).is_ok());
    }

    #[test]
    fn budgets_outside_the_range_are_refused() {
        assert_eq!(
            Names::build(20, std::iter::empty()).unwrap_err(),
            NameError::Budget(20)
        );
        assert!(Names::build(129, std::iter::empty()).is_err());
        assert!(Names::build(128, std::iter::empty()).unwrap().is_empty());
    }
}
