//! What changed between two definitions, path by path, for a person to read.

use serde_json::Value;

/// One difference: at `path` (`description`, `inputSchema.properties.path.type`,
/// `annotations.destructiveHint`), the value `before` (absent when added) became `after`
/// (absent when removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Where, as dotted keys and `[index]`es.
    pub path: String,
    /// The pinned value.
    pub before: Option<Value>,
    /// The listed value.
    pub after: Option<Value>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "(the definition)"
        } else {
            &self.path
        };
        match (&self.before, &self.after) {
            (None, Some(after)) => write!(f, "+ {path}: {after}"),
            (Some(before), None) => write!(f, "- {path}: {before}"),
            (Some(before), Some(after)) => {
                write!(f, "~ {path}:\n    was: {before}\n    now: {after}")
            }
            (None, None) => write!(f, "  {path}"),
        }
    }
}

/// The differences from `before` to `after`, in path order.
pub fn diff(before: &Value, after: &Value) -> Vec<Change> {
    let mut changes = Vec::new();
    walk(String::new(), before, after, &mut changes);
    changes
}

fn walk(path: String, before: &Value, after: &Value, out: &mut Vec<Change>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = join(key);
                match (b.get(key), a.get(key)) {
                    (Some(x), Some(y)) => walk(at, x, y, out),
                    (x, y) => out.push(Change {
                        path: at,
                        before: x.cloned(),
                        after: y.cloned(),
                    }),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (x, y)) in b.iter().zip(a).enumerate() {
                walk(format!("{path}[{i}]"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(Change {
            path,
            before: Some(x.clone()),
            after: Some(y.clone()),
        }),
        _ => {}
    }
}
