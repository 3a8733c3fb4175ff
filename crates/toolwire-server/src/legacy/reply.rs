//! A 2026-07-28 response read for a legacy client. A complete result loses the members only
//! 2026-07-28 clients use (`resultType`, `ttlMs`, `cacheScope`, the server's info in `_meta`);
//! the rest is passed on as the handler's result wrote it, member by member, without a tree of
//! values built and written again. An `input_required` result becomes the requests the server
//! puts to the client itself.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_protocol::{JsonObject, META_SERVER_INFO, ResultType};

/// A result's members, each as its text (sorted by name, as a [`JsonObject`] writes them).
pub(super) type Members<'a> = BTreeMap<Cow<'a, str>, Cow<'a, RawValue>>;

/// The members of a result that only 2026-07-28 clients use.
const MODERN_ONLY: [&str; 3] = ["resultType", "ttlMs", "cacheScope"];

/// A 2026-07-28 result, read for a legacy client.
#[derive(Debug)]
pub(super) enum Reply<'a> {
    /// The result, without the members only 2026-07-28 clients use.
    Complete(Members<'a>),
    /// The handler needs input first.
    InputRequired {
        requests: JsonObject,
        state: Option<Value>,
    },
}

/// Reads a serialized success response; `None` if it is not one.
pub(super) fn read_reply(json: &str) -> Option<Reply<'_>> {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: BTreeMap<Cow<'a, str>, &'a RawValue>,
    }
    let members = serde_json::from_str::<Response<'_>>(json).ok()?.result;
    let kind = members
        .get("resultType")
        .and_then(|kind| serde_json::from_str::<ResultType>(kind.get()).ok());
    if kind == Some(ResultType::InputRequired) {
        return read_input_required(json);
    }
    let mut result = Members::new();
    for (name, value) in members {
        if MODERN_ONLY.contains(&name.as_ref()) {
            continue;
        }
        let value = if name == "_meta" {
            match without_server_info(value) {
                Some(meta) => meta,
                None => continue,
            }
        } else {
            Cow::Borrowed(value)
        };
        result.insert(name, value);
    }
    Some(Reply::Complete(result))
}

/// A result's `_meta` without the server's info (legacy clients learned who the server is at
/// `initialize`); `None` when nothing is left. A `_meta` that is not an object stays as it is.
fn without_server_info(meta: &RawValue) -> Option<Cow<'_, RawValue>> {
    // Its members as their text too: the server's info is not read into a tree to be dropped.
    let Ok(mut members) = serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(meta.get())
    else {
        return Some(Cow::Borrowed(meta));
    };
    let removed = members.remove(META_SERVER_INFO).is_some();
    if members.is_empty() {
        None
    } else if !removed {
        Some(Cow::Borrowed(meta))
    } else {
        serde_json::value::to_raw_value(&members)
            .ok()
            .map(Cow::Owned)
    }
}

/// An `input_required` result's requests and its state.
fn read_input_required(json: &str) -> Option<Reply<'static>> {
    #[derive(serde::Deserialize)]
    struct Response {
        result: JsonObject,
    }
    let mut result = serde_json::from_str::<Response>(json).ok()?.result;
    let requests = match result.remove("inputRequests") {
        Some(Value::Object(requests)) => requests,
        _ => JsonObject::new(),
    };
    Some(Reply::InputRequired {
        requests,
        state: result.remove("requestState"),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A complete result as the legacy client gets it; `None` when it is not complete.
    fn complete(json: &Value) -> Option<Value> {
        match read_reply(&json.to_string())? {
            Reply::Complete(members) => Some(serde_json::to_value(&members).unwrap()),
            Reply::InputRequired { .. } => None,
        }
    }

    #[test]
    fn results_lose_the_members_only_modern_clients_use() {
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "tools": [], "ttlMs": 5, "cacheScope": "public",
            "_meta": {META_SERVER_INFO: {"name": "s", "version": "1"}}
        }});
        assert_eq!(complete(&json), Some(json!({"tools": []})));
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [], "_meta": {META_SERVER_INFO: {}, "x": 1}
        }});
        assert_eq!(
            complete(&json),
            Some(json!({"content": [], "_meta": {"x": 1}}))
        );
        // An empty `_meta` goes too; one without the server's info, or not an object, stays.
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "_meta": {}}});
        assert_eq!(complete(&json), Some(json!({"content": []})));
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {"_meta": {"y": [1, {"z": null}]}}});
        assert_eq!(
            complete(&json),
            Some(json!({"_meta": {"y": [1, {"z": null}]}}))
        );
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {"_meta": 7}});
        assert_eq!(complete(&json), Some(json!({"_meta": 7})));
    }

    #[test]
    fn a_complete_results_members_are_written_as_they_were_read() {
        // Numbers a tree would rewrite (a float's digits, an integer past u64), escapes and
        // member order inside values come out as the handler wrote them; the members themselves
        // in name order, as before.
        let json = r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"b":1.50,"a":123456789012345678901234},"content":[{"type":"text","text":"a\"b\u00e9"}],"resultType":"complete","isError":true}}"#;
        let Some(Reply::Complete(members)) = read_reply(json) else {
            panic!("not complete");
        };
        assert_eq!(
            serde_json::to_string(&members).unwrap(),
            r#"{"content":[{"type":"text","text":"a\"b\u00e9"}],"isError":true,"structuredContent":{"b":1.50,"a":123456789012345678901234}}"#
        );
        // A member named with an escape is still known by its name.
        let json =
            r#"{"jsonrpc":"2.0","id":1,"result":{"result\u0054ype":"complete","content":[]}}"#;
        let Some(Reply::Complete(members)) = read_reply(json) else {
            panic!("not complete");
        };
        assert_eq!(
            serde_json::to_string(&members).unwrap(),
            r#"{"content":[]}"#
        );
    }

    #[test]
    fn input_required_results_are_read_as_requests() {
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "input_required",
            "inputRequests": {"a": {"method": "roots/list", "params": {}}},
            "requestState": "sealed"
        }})
        .to_string();
        let Some(Reply::InputRequired { requests, state }) = read_reply(&json) else {
            panic!("not input_required");
        };
        assert_eq!(
            Value::Object(requests),
            json!({"a": {"method": "roots/list", "params": {}}})
        );
        assert_eq!(state, Some(json!("sealed")));
        assert!(read_reply(r#"{"jsonrpc":"2.0","id":1,"error":{}}"#).is_none());
        assert!(read_reply(r#"{"jsonrpc":"2.0","id":1,"result":[]}"#).is_none());
    }
}
