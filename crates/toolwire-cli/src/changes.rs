//! What changed in a server's tool list between two listings, in words: the names added and
//! removed, and those whose definition changed (its description, schemas, annotations…).

use std::collections::BTreeMap;

use serde_json::Value;

/// A listing: each tool's name and its definition as JSON.
pub(crate) type Listing = BTreeMap<String, Value>;

/// A [`Listing`] of `(name, definition)` pairs.
pub(crate) fn listing<'a, T: serde::Serialize + 'a>(
    tools: impl IntoIterator<Item = (String, &'a T)>,
) -> Listing {
    tools
        .into_iter()
        .map(|(name, tool)| (name, serde_json::to_value(tool).unwrap_or_default()))
        .collect()
}

/// `added: a, b; removed: c; changed: d`, or `no tool added, removed or changed`.
pub(crate) fn described(before: &Listing, after: &Listing) -> String {
    let added: Vec<&str> = after
        .keys()
        .filter(|name| !before.contains_key(*name))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = before
        .keys()
        .filter(|name| !after.contains_key(*name))
        .map(String::as_str)
        .collect();
    let changed: Vec<&str> = after
        .iter()
        .filter(|(name, definition)| before.get(*name).is_some_and(|was| was != *definition))
        .map(|(name, _)| name.as_str())
        .collect();
    let said: Vec<String> = [("added", added), ("removed", removed), ("changed", changed)]
        .into_iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(what, names)| format!("{what}: {}", names.join(", ")))
        .collect();
    if said.is_empty() {
        return "no tool added, removed or changed".to_owned();
    }
    said.join("; ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_change_is_said_as_names_added_removed_and_changed() {
        let before: Listing = [
            (
                "echo".to_owned(),
                json!({"name": "echo", "description": "Echoes"}),
            ),
            ("add".to_owned(), json!({"name": "add"})),
        ]
        .into();
        let after: Listing = [
            (
                "echo".to_owned(),
                json!({"name": "echo", "description": "ECHOES"}),
            ),
            ("shout".to_owned(), json!({"name": "shout"})),
        ]
        .into();
        assert_eq!(
            described(&before, &after),
            "added: shout; removed: add; changed: echo"
        );
        assert_eq!(
            described(&before, &before),
            "no tool added, removed or changed"
        );
    }
}
