//! What a rule may read: the caller, the tool and the call's arguments, as plain structs the
//! gateway fills in, and their conversion to CEL values (`caller`, `tool`, `args`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cel_interpreter::Value;
use cel_interpreter::objects::{Key, Map};
use serde_json::Value as Json;

/// Who is calling, as the gateway's authentication established it. A rule reads it as
/// `caller`: `caller.principal` (a string, or null for an anonymous caller), `caller.scopes`
/// (a list of strings), `caller.claims` (the access token's claims as a map; empty without a
/// token) and `caller.client` (`name` and `version` from the client's `clientInfo`, or null).
/// `caller.client` is what the client says of itself, which any caller can say: it may tailor
/// what a caller sees, never grant access; what a token proves (`principal`, `scopes`, a claim
/// such as `azp` or `client_id`) can.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Caller {
    /// The token's subject, or `None` for an anonymous caller.
    pub principal: Option<String>,
    /// The scopes the token grants.
    pub scopes: Vec<String>,
    /// The token's claims.
    pub claims: serde_json::Map<String, Json>,
    /// The client software, when it said (`clientInfo`): self-declared, never proof.
    pub client: Option<ClientFacts>,
}

/// The client software a caller uses, from its `clientInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientFacts {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    pub version: String,
}

/// What kind of offer a rule is deciding: `tool.kind` is `"tool"`, `"prompt"`, `"resource"` or
/// `"template"` (a resource template, read through a URI it matches).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A tool, listed and called.
    #[default]
    Tool,
    /// A prompt, listed and got, its arguments completed.
    Prompt,
    /// A resource, listed and read.
    Resource,
    /// A resource template, listed, read through the URIs it matches, its variables completed.
    Template,
}

impl Kind {
    /// `tool.kind` as a rule reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Template => "template",
        }
    }
}

/// The tool, prompt, resource or resource template being listed or used. A rule reads it as
/// `tool`: `tool.kind` (`"tool"`, `"prompt"`, `"resource"` or `"template"`), `tool.name` (what
/// the caller names it by: a tool's or prompt's qualified name, e.g. `fs__write_file`, a
/// resource's served URI, a template's served URI template), `tool.upstream` (the upstream
/// server's name), `tool.title` and `tool.description` (strings or null) and
/// `tool.annotations` (a map, empty when there are none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolFacts {
    /// What kind of offer it is.
    pub kind: Kind,
    /// The name the caller sees.
    pub name: String,
    /// The upstream server's name in the gateway's configuration.
    pub upstream: String,
    /// The tool's title.
    pub title: Option<String>,
    /// The tool's description.
    pub description: Option<String>,
    /// The tool's annotations (`readOnlyHint`, `destructiveHint`, …). They come from the upstream:
    /// unless the upstream is trusted they are its claims, not facts.
    pub annotations: serde_json::Map<String, Json>,
}

/// How much of a variable the rules need: none, some top-level members (the only ones a rule can
/// reach when every use is `args.x`, `args["x"]` or `has(args.x)`), or all of it. Only the
/// members a rule can read are converted, so a large argument no rule looks at (a file's
/// content) costs nothing, and neither do a caller's claims when rules read only its scopes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Use {
    #[default]
    Nothing,
    Members(BTreeSet<String>),
    Whole,
}

impl Use {
    /// The union of two uses.
    pub(crate) fn merge(&mut self, other: Use) {
        match (&mut *self, other) {
            (Use::Whole, _) | (_, Use::Nothing) => {}
            (_, Use::Whole) => *self = Use::Whole,
            (Use::Nothing, members) => *self = members,
            (Use::Members(mine), Use::Members(theirs)) => mine.extend(theirs),
        }
    }

    /// Adds one member.
    pub(crate) fn member(&mut self, name: &str) {
        self.merge(Use::Members(BTreeSet::from([name.to_owned()])));
    }

    /// Whether the member `name` is needed.
    fn wants(&self, name: &str) -> bool {
        match self {
            Use::Nothing => false,
            Use::Members(names) => names.contains(name),
            Use::Whole => true,
        }
    }
}

/// `caller` as a CEL map, with the members `used` names.
pub(crate) fn caller_value(caller: &Caller, used: &Use) -> Value {
    let mut members = Members::new(used);
    members.put("principal", || optional(caller.principal.as_deref()));
    members.put("scopes", || {
        Value::List(Arc::new(caller.scopes.iter().map(|s| string(s)).collect()))
    });
    members.put("claims", || object(&caller.claims));
    members.put("client", || match &caller.client {
        Some(client) => {
            let mut both = Members::new(&Use::Whole);
            both.put("name", || string(&client.name));
            both.put("version", || string(&client.version));
            both.into_value()
        }
        None => Value::Null,
    });
    members.into_value()
}

/// `tool` as a CEL map, with the members `used` names.
pub(crate) fn tool_value(tool: &ToolFacts, used: &Use) -> Value {
    let mut members = Members::new(used);
    members.put("kind", || string(tool.kind.as_str()));
    members.put("name", || string(&tool.name));
    members.put("upstream", || string(&tool.upstream));
    members.put("title", || optional(tool.title.as_deref()));
    members.put("description", || optional(tool.description.as_deref()));
    members.put("annotations", || object(&tool.annotations));
    members.into_value()
}

/// A CEL map built member by member, each converted only if it is used.
struct Members<'u> {
    used: &'u Use,
    map: HashMap<Key, Value>,
}

impl<'u> Members<'u> {
    fn new(used: &'u Use) -> Self {
        Members {
            used,
            map: HashMap::new(),
        }
    }

    fn put(&mut self, name: &str, value: impl FnOnce() -> Value) {
        if self.used.wants(name) {
            self.map.insert(Key::from(name), value());
        }
    }

    fn into_value(self) -> Value {
        Value::Map(Map {
            map: Arc::new(self.map),
        })
    }
}

/// `args` as a CEL map, with only the members `used` names when that is all the rules can
/// read. Absent arguments (`null`) are an empty map, as MCP reads a call without `arguments`.
pub(crate) fn args_value(args: &Json, used: &Use) -> Value {
    match (args, used) {
        (Json::Null, _) => Value::Map(Map {
            map: Arc::new(HashMap::new()),
        }),
        (Json::Object(members), Use::Members(names)) => {
            let picked = names
                .iter()
                .filter_map(|name| Some((Key::from(name.as_str()), json(members.get(name)?))));
            Value::Map(Map {
                map: Arc::new(picked.collect()),
            })
        }
        (other, _) => json(other),
    }
}

/// A JSON value as CEL: integers as `int` (as `uint` above `i64::MAX`), other numbers as
/// `double`, objects as maps with string keys, `null` as `null`.
pub(crate) fn json(value: &Json) -> Value {
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                // Without serde_json's arbitrary precision every other number is an f64.
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => string(s),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(json).collect())),
        Json::Object(members) => object(members),
    }
}

fn object(members: &serde_json::Map<String, Json>) -> Value {
    Value::Map(Map {
        map: Arc::new(
            members
                .iter()
                .map(|(k, v)| (Key::from(k.as_str()), json(v)))
                .collect(),
        ),
    })
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn optional(s: Option<&str>) -> Value {
    s.map_or(Value::Null, string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_numbers_keep_their_kind() {
        let cases = [
            (json!(7), Value::Int(7)),
            (json!(-7), Value::Int(-7)),
            (json!(i64::MAX), Value::Int(i64::MAX)),
            (json!(u64::MAX), Value::UInt(u64::MAX)),
            (json!(1.5), Value::Float(1.5)),
            (json!(null), Value::Null),
            (json!(true), Value::Bool(true)),
        ];
        for (input, want) in cases {
            let got = json(&input);
            // `Value`'s equality compares numbers across kinds; the kind itself is the point.
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{input}");
        }
    }

    #[test]
    fn args_keep_only_the_members_rules_read() {
        let args = json!({"path": "/srv/a", "content": "x".repeat(1000)});
        let used = Use::Members(BTreeSet::from(["path".to_owned(), "mode".to_owned()]));
        let Value::Map(picked) = args_value(&args, &used) else {
            panic!("args are a map");
        };
        let keys: Vec<String> = picked.map.keys().map(ToString::to_string).collect();
        assert_eq!(keys, ["path"]);
        let Value::Map(whole) = args_value(&args, &Use::Whole) else {
            panic!("args are a map");
        };
        assert_eq!(whole.map.len(), 2);
        let Value::Map(none) = args_value(&Json::Null, &Use::Whole) else {
            panic!("absent args are a map");
        };
        assert!(none.map.is_empty());
    }

    #[test]
    fn uses_merge() {
        let mut used = Use::Nothing;
        used.member("a");
        used.member("b");
        assert_eq!(
            used,
            Use::Members(BTreeSet::from(["a".to_owned(), "b".to_owned()]))
        );
        used.merge(Use::Whole);
        used.member("c");
        assert_eq!(used, Use::Whole);
    }
}
