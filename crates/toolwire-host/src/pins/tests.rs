use std::sync::Arc;

use serde_json::json;

use super::*;

fn tool(description: &str) -> Value {
    json!({
        "name": "read_file",
        "description": description,
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": {"readOnlyHint": true},
    })
}

fn each_store(check: impl Fn(&dyn Fn() -> Arc<dyn PinStore>)) {
    let memory: Arc<dyn PinStore> = Arc::new(MemoryPins::new());
    check(&|| memory.clone());
    let scratch = tempfile::tempdir().unwrap();
    let d = scratch.path().join("state");
    // Every call opens the directory afresh: what one store wrote, the next reads.
    check(&move || Arc::new(FilePins::new(&d)));
}

#[test]
fn every_store_keeps_the_contract() {
    each_store(|open| contract::all(open));
}

#[test]
fn the_hash_covers_what_the_model_reads_and_not_the_servers_bookkeeping() {
    let base = tool("Reads a file.");
    let h = definition_hash(&base);
    let mut with_meta = base.clone();
    with_meta["_meta"] = json!({"example.com/build": 42});
    assert_eq!(
        definition_hash(&with_meta),
        h,
        "foreign _meta is not pinned"
    );
    with_meta["_meta"]["dev.toolwire/timeoutMs"] = json!(1000);
    assert_ne!(
        definition_hash(&with_meta),
        h,
        "what the policy reads is pinned"
    );
    let mut schema = base.clone();
    schema["inputSchema"]["properties"]["path"]["type"] = json!("number");
    assert_ne!(definition_hash(&schema), h);
    let mut hint = base.clone();
    hint["annotations"]["readOnlyHint"] = json!(false);
    assert_ne!(definition_hash(&hint), h);
    let changes = diff(&base, &hint);
    assert_eq!(changes[0].path, "annotations.readOnlyHint");
    // Key order does not matter.
    let reordered: Value = serde_json::from_str(
        r#"{"annotations": {"readOnlyHint": true}, "inputSchema": {"properties": {"path": {"type": "string"}}, "type": "object"}, "description": "Reads a file.", "name": "read_file"}"#,
    )
    .unwrap();
    assert_eq!(definition_hash(&reordered), h);
}

#[test]
fn diffs_name_added_removed_and_nested_paths() {
    let before = json!({"a": 1, "list": [1, 2], "obj": {"x": "y"}});
    let after = json!({"b": 2, "list": [1, 3], "obj": {"x": "z"}});
    let shown: Vec<String> = diff(&before, &after)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "- a: 1",
            "+ b: 2",
            "~ list[1]:\n    was: 2\n    now: 3",
            "~ obj.x:\n    was: \"y\"\n    now: \"z\""
        ]
    );
}

#[test]
fn a_damaged_pin_file_is_an_error_naming_the_server() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let store = FilePins::new(dir);
    std::fs::create_dir_all(dir.join("pins")).unwrap();
    std::fs::write(store.file("fs"), "{").unwrap();
    let e = Pins::new(store).check("fs", &BTreeMap::new()).unwrap_err();
    assert!(
        e.to_string().contains("pins of server \"fs\"") && e.to_string().contains("not JSON"),
        "{e}"
    );
}

/// The pins directory and every pins file are readable by their owner only; a pins directory
/// or file others could read (an older version's) is made private when it is next used.
#[cfg(unix)]
#[test]
fn pins_files_are_private() {
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("state");
    let store = FilePins::new(&state);
    let definition = tool("Reads a file");
    let pin = Pin::new(definition_hash(&definition), &definition);
    store.save("fs", "read_file", &pin).unwrap();
    store.save("web", "fetch", &pin).unwrap();
    store.remove("web", "fetch").unwrap();
    assert_eq!(crate::private::not_private(&state), []);

    crate::private::set_mode(&state.join("pins"), 0o755);
    crate::private::set_mode(&store.file("fs"), 0o644);
    assert_eq!(FilePins::new(&state).load("fs").unwrap().len(), 1);
    assert_eq!(crate::private::not_private(&state), []);
}

#[test]
fn holding_new_names_pins_a_first_list_and_holds_what_comes_after() {
    let pins = Pins::new(MemoryPins::new());
    let first = BTreeMap::from([("read_file".to_owned(), tool("Reads a file."))]);
    // A server's first list is pinned as it is, held or not.
    let report = pins.check_holding("fs", &first, true).unwrap();
    assert_eq!(report.new, ["read_file"]);
    assert!(report.changed.is_empty());
    // Then a new name is held: reported changed from nothing, not pinned.
    let mut second = first.clone();
    second.insert("Delete_file".to_owned(), tool("Deletes a file."));
    for _ in 0..2 {
        let report = pins.check_holding("fs", &second, true).unwrap();
        assert!(report.new.is_empty(), "{report:?}");
        assert_eq!(report.changed.len(), 1);
        let held = &report.changed[0];
        assert_eq!(
            (held.tool.as_str(), held.pinned.as_str()),
            ("Delete_file", "")
        );
        assert_eq!(held.listed, definition_hash(&second["Delete_file"]));
    }
    // Approved, it is pinned; without holding, a new name is pinned on sight.
    pins.approve("fs", "Delete_file", &second["Delete_file"])
        .unwrap();
    assert!(
        pins.check_holding("fs", &second, true)
            .unwrap()
            .changed
            .is_empty()
    );
    let mut third = second.clone();
    third.insert("write_file".to_owned(), tool("Writes a file."));
    assert_eq!(pins.check("fs", &third).unwrap().new, ["write_file"]);
}
