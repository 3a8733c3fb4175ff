//! A request's body written straight from its parts: the params as given, with the `_meta`
//! made of the client's own keys and this request's (its version, the capabilities it
//! declares, its progress token, its trace context). Nothing is copied into a JSON tree first:
//! every request the client sends is written here.

use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::Value;
use toolwire_protocol::{JsonObject, META_FIELD};

/// A JSON-RPC request.
#[derive(serde::Serialize)]
pub(crate) struct Envelope<'a> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) id: i64,
    pub(crate) method: &'a str,
    pub(crate) params: Params<'a>,
}

/// A request's params: the members given, with `meta` as their `_meta` when it has any key
/// (it replaces a `_meta` given); otherwise the members as given.
pub(crate) struct Params<'a> {
    pub(crate) members: &'a JsonObject,
    pub(crate) meta: Meta<'a>,
}

/// A `_meta`: the client's own keys (`base`), with this request's keys (`own`) in place of
/// any of the same name.
pub(crate) struct Meta<'a> {
    pub(crate) base: &'a JsonObject,
    pub(crate) own: &'a [(&'a str, Value)],
}

impl Meta<'_> {
    fn is_empty(&self) -> bool {
        self.base.is_empty() && self.own.is_empty()
    }
}

impl Serialize for Params<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let with_meta = !self.meta.is_empty();
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.members {
            if !(with_meta && key == META_FIELD) {
                map.serialize_entry(key, value)?;
            }
        }
        if with_meta {
            map.serialize_entry(META_FIELD, &self.meta)?;
        }
        map.end()
    }
}

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.base {
            if !self.own.iter().any(|(own, _)| own == key) {
                map.serialize_entry(key, value)?;
            }
        }
        for (key, value) in self.own {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn the_request_keys_replace_the_clients_own_and_a_given_meta() {
        let members = object(json!({"name": "echo", "arguments": {"a": 1}, "_meta": {"x": 1}}));
        let base = object(json!({"clientInfo": {"name": "c"}, "version": "old"}));
        let own = [("version", json!("new")), ("progressToken", json!(7))];
        let envelope = Envelope {
            jsonrpc: "2.0",
            id: 3,
            method: "tools/call",
            params: Params {
                members: &members,
                meta: Meta {
                    base: &base,
                    own: &own,
                },
            },
        };
        let written: Value =
            serde_json::from_str(&serde_json::to_string(&envelope).unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"a": 1},
                "_meta": {"clientInfo": {"name": "c"}, "version": "new", "progressToken": 7},
            }})
        );
    }

    #[test]
    fn without_meta_keys_the_params_go_as_given() {
        let members = object(json!({"name": "echo", "_meta": {"x": 1}}));
        let empty = JsonObject::new();
        let params = Params {
            members: &members,
            meta: Meta {
                base: &empty,
                own: &[],
            },
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            json!({"name": "echo", "_meta": {"x": 1}})
        );
    }
}
