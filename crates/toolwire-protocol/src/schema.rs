//! JSON Schema handling shared by servers and clients (feature `schema`): dialect detection
//! (J-01…J-03), refusal of references outside the document (J-05, J-07), bounds on schema size
//! and nesting (J-08), and compilation into a validator once. Nothing is ever fetched.

use std::sync::Arc;

use jsonschema::{Draft, Retrieve, Uri, Validator};
use serde_json::Value;

use crate::JsonObject;

/// Why a schema was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// `$schema` names a dialect that is not supported (J-03).
    UnsupportedDialect(String),
    /// A reference leaves the document; it is never fetched (J-05, J-07).
    ExternalReference(String),
    /// Not a valid schema in its dialect (J-04).
    Invalid(String),
    /// Over the size or nesting bounds (J-08).
    TooComplex(String),
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // J-03
            SchemaError::UnsupportedDialect(d) => write!(f, "unsupported dialect {d:?}"),
            SchemaError::ExternalReference(r) => {
                // J-05, J-07
                write!(f, "external reference {r:?} is never fetched")
            }
            // J-04
            SchemaError::Invalid(m) => write!(f, "invalid schema: {m}"),
            // J-08
            SchemaError::TooComplex(m) => write!(f, "too complex: {m}"),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Bounds on the schemas a server accepts (J-08).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Deepest nesting of subschemas.
    pub max_depth: usize,
    /// Most schema objects in one schema.
    pub max_nodes: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_depth: 32,
            max_nodes: 10_000,
        }
    }
}

/// How a schema's `format` keywords are treated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FormatMode {
    /// Annotations only, as JSON Schema 2020-12 says by default: `format: email` accepts any
    /// string.
    #[default]
    Annotate,
    /// Asserted: a value must match each format the validator knows (`email`, `date-time`,
    /// `date`, `time`, `duration`, `uri`, `uri-reference`, `iri`, `uuid`, `ipv4`, `ipv6`,
    /// `hostname`, `regex`, `json-pointer`, …). Unknown formats stay annotations.
    Assert,
}

/// A schema compiled for validation, shared by every call. Cheap to clone.
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Arc<Validator>,
}

/// One violation of a schema, with the JSON pointer of the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the validated value (`""` is the value itself).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// How many violations servers and clients report by default (the rest are counted).
pub const REPORTED_VIOLATIONS: usize = 10;

/// The largest value (in JSON nodes) whose violations are all counted.
pub const FULLY_CHECKED_NODES: usize = 10_000;

/// The violations of one value: the first few in full, and how many more there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations {
    /// The first violations, in the validator's order.
    pub first: Vec<Violation>,
    /// How many more there are; `None` when the value was too large to look for them all.
    pub more: Option<usize>,
}

impl Violations {
    /// No violation: the value conforms.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

/// One violation a line (`- /path: message`), then how many more.
impl std::fmt::Display for Violations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, v) in self.first.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "- {v}")?;
        }
        match self.more {
            Some(0) => Ok(()),
            Some(n) => write!(f, "\n- and {n} more"),
            None => write!(f, "\n- (the value is too large to list every violation)"),
        }
    }
}

fn violation(e: &jsonschema::ValidationError<'_>) -> Violation {
    Violation {
        path: e.instance_path().as_str().to_owned(),
        message: e.to_string(),
    }
}

/// Whether `value` has more than `limit` nodes; stops counting at the limit.
fn node_count_exceeds(value: &Value, limit: usize) -> bool {
    // Children are counted when their parent is opened, so a huge array stops the walk before
    // anything is pushed for it.
    let mut seen = 1usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        let children = match v {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            _ => continue,
        };
        seen += children;
        if seen > limit {
            return true;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    seen > limit
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Checks and compiles `schema`, with `format` as an annotation ([`FormatMode::Annotate`]).
    pub fn compile(
        schema: &JsonObject,
        limits: SchemaLimits,
    ) -> Result<CompiledSchema, SchemaError> {
        Self::compile_with_formats(schema, limits, FormatMode::Annotate)
    }

    /// Checks and compiles `schema`, treating `format` as `formats` says.
    pub fn compile_with_formats(
        schema: &JsonObject,
        limits: SchemaLimits,
        formats: FormatMode,
    ) -> Result<CompiledSchema, SchemaError> {
        let draft = dialect(schema)?;
        check_shape(schema, limits)?;
        let value = Value::Object(schema.clone());
        let validator = jsonschema::options()
            .with_draft(draft)
            .should_validate_formats(formats == FormatMode::Assert)
            .with_retriever(NoNetwork)
            .build(&value)
            .map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(CompiledSchema {
            validator: Arc::new(validator),
        })
    }

    /// The first `max` violations of the schema by `instance`, and how many more there are.
    ///
    /// The validator collects every error of a value before it yields the first, so a large
    /// value that is wrong everywhere (a 4 MiB array of the wrong type) would cost hundreds of
    /// MB of errors. A value of more than [`FULLY_CHECKED_NODES`] nodes is therefore reported
    /// by its first violation only, and the rest are not counted.
    pub fn violations(&self, instance: &Value, max: usize) -> Violations {
        if node_count_exceeds(instance, FULLY_CHECKED_NODES) {
            let first = match self.validator.validate(instance) {
                Ok(()) => return Violations::default(),
                Err(e) => violation(&e),
            };
            return Violations {
                first: vec![first].into_iter().take(max).collect(),
                more: None,
            };
        }
        let mut errors = self.validator.iter_errors(instance);
        let first = errors.by_ref().take(max).map(|e| violation(&e)).collect();
        Violations {
            first,
            more: Some(errors.count()),
        }
    }

    /// Whether `instance` conforms.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }
}

/// The dialect a schema declares with `$schema`; none means 2020-12 (J-01).
fn dialect(schema: &JsonObject) -> Result<Draft, SchemaError> {
    match schema.get("$schema") {
        None => Ok(Draft::Draft202012),
        Some(Value::String(uri)) => match Draft::from_schema_uri(uri) {
            Draft::Unknown => Err(SchemaError::UnsupportedDialect(uri.clone())),
            draft => Ok(draft),
        },
        Some(other) => Err(SchemaError::UnsupportedDialect(other.to_string())),
    }
}

/// Enforces the size bounds and refuses references that leave the document.
fn check_shape(schema: &JsonObject, limits: SchemaLimits) -> Result<(), SchemaError> {
    let mut ids = Vec::new();
    collect_ids(schema, &mut ids);
    let mut nodes = 0;
    visit(schema, 1, &mut |node, depth| {
        nodes += 1;
        if depth > limits.max_depth {
            return Err(SchemaError::TooComplex(format!(
                "subschemas nest deeper than {}",
                limits.max_depth
            )));
        }
        if nodes > limits.max_nodes {
            return Err(SchemaError::TooComplex(format!(
                "more than {} subschemas",
                limits.max_nodes
            )));
        }
        for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = node.get(key) {
                let document = reference.split('#').next().unwrap_or_default();
                if !document.is_empty() && !ids.iter().any(|id| id == document) {
                    return Err(SchemaError::ExternalReference(reference.clone()));
                }
            }
        }
        Ok(())
    })
}

/// Keywords whose value is data, never a subschema.
const DATA_KEYWORDS: &[&str] = &["enum", "const", "default", "examples", "required"];
/// Keywords whose value maps names to subschemas.
const MAP_KEYWORDS: &[&str] = &[
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];

/// Calls `f` on every schema object, with its nesting depth (the root is 1).
fn visit<E>(
    node: &JsonObject,
    depth: usize,
    f: &mut impl FnMut(&JsonObject, usize) -> Result<(), E>,
) -> Result<(), E> {
    f(node, depth)?;
    for (key, value) in node {
        if DATA_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        if let (true, Value::Object(map)) = (MAP_KEYWORDS.contains(&key.as_str()), value) {
            for child in map.values() {
                if let Value::Object(child) = child {
                    visit(child, depth + 1, f)?;
                }
            }
            continue;
        }
        match value {
            Value::Object(child) => visit(child, depth + 1, f)?,
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(child) = item {
                        visit(child, depth + 1, f)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The `$id`s of embedded resources, which references may name without leaving the document.
fn collect_ids(node: &JsonObject, ids: &mut Vec<String>) {
    let _ = visit(node, 1, &mut |n, _| {
        if let Some(Value::String(id)) = n.get("$id") {
            ids.push(id.split('#').next().unwrap_or_default().to_owned());
        }
        Ok::<(), ()>(())
    });
}

/// A retriever that refuses everything: nothing is ever fetched (J-05, J-06).
struct NoNetwork;

impl Retrieve for NoNetwork {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("external schema {uri} is never fetched").into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(v: Value) -> Result<CompiledSchema, SchemaError> {
        CompiledSchema::compile(v.as_object().unwrap(), SchemaLimits::default())
    }

    #[test]
    fn accepts_known_dialects_and_local_refs() {
        for schema in [
            json!({"type": "object"}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
            json!({"type": "object", "$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
            json!({"type": "object", "$defs": {"a": {"$id": "urn:a", "type": "string"}}, "properties": {"x": {"$ref": "urn:a"}}}),
            json!({"type": "object", "properties": {"enum": {"enum": [{"$ref": "http://not.a/ref"}]}}}),
        ] {
            assert!(compile(schema.clone()).is_ok(), "{schema}");
        }
    }

    #[test]
    fn rejects_bad_schemas_with_the_rule() {
        type Check = fn(&SchemaError) -> bool;
        let cases: [(Value, Check); 6] = [
            (
                json!({"$schema": "http://example.com/my-dialect", "type": "object"}),
                |r| matches!(r, SchemaError::UnsupportedDialect(_)),
            ),
            (json!({"$schema": 7, "type": "object"}), |r| {
                matches!(r, SchemaError::UnsupportedDialect(_))
            }),
            (
                json!({"type": "object", "properties": {"p": {"$ref": "http://localhost:1/x.json"}}}),
                |r| matches!(r, SchemaError::ExternalReference(_)),
            ),
            (
                json!({"type": "object", "$defs": {"u": {"$ref": "other.json#/a"}}}),
                |r| matches!(r, SchemaError::ExternalReference(_)),
            ),
            (json!({"type": 5}), |r| matches!(r, SchemaError::Invalid(_))),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
                |r| matches!(r, SchemaError::Invalid(_)),
            ),
        ];
        for (schema, want) in cases {
            let got = compile(schema.clone()).expect_err("rejected");
            assert!(want(&got), "{schema}: {got}");
        }
    }

    #[test]
    fn bounds_nesting_and_size() {
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"anyOf": [deep]});
        }
        let schema = json!({"type": "object", "properties": {"d": deep}});
        assert!(matches!(compile(schema), Err(SchemaError::TooComplex(_))));
        let wide: serde_json::Map<String, Value> = (0..10_001)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let schema = json!({"type": "object", "properties": wide});
        assert!(matches!(compile(schema), Err(SchemaError::TooComplex(_))));
    }

    #[test]
    fn reports_every_violation_with_its_path() {
        let schema = compile(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "address": {"type": "object", "properties": {"city": {"type": "string"}}}},
            "required": ["name"]
        }))
        .unwrap();
        let mut got = schema
            .violations(&json!({"address": {"city": 5}}), 10)
            .first;
        got.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].path, "");
        assert!(got[0].message.contains("name"));
        assert_eq!(got[1].path, "/address/city");
        assert!(schema.is_valid(&json!({"name": "x"})));
    }

    /// A 4 MiB array against `items: {type: string}` once produced millions of violations,
    /// hundreds of MB of text: the report keeps the first few and says how
    /// many more there are, or that the rest were not counted.
    #[test]
    fn reports_a_bounded_number_of_violations() {
        let schema = compile(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let small = schema.violations(&json!([1, 2, 3, "ok", 5]), 2);
        assert_eq!(small.first.len(), 2);
        assert_eq!(small.more, Some(2), "small values are counted exactly");
        assert!(small.to_string().contains("and 2 more"), "{small}");
        let huge = Value::Array(vec![json!(1); 2_000_000]);
        let report = schema.violations(&huge, 10);
        assert!(!report.first.is_empty() && report.first.len() <= 10);
        assert_eq!(report.more, None, "too large to walk: not counted");
        assert!(report.to_string().len() < 2_000, "{report}");
        assert!(schema.violations(&json!(["a"]), 10).is_empty());
    }

    /// `format` is an annotation unless assertion is asked for (JSON Schema 2020-12 makes format
    /// assertion opt-in).
    #[test]
    fn formats_are_asserted_only_when_asked() {
        let schema = json!({"type": "object", "properties": {
            "to": {"type": "string", "format": "email"},
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "site": {"type": "string", "format": "uri"},
            "odd": {"type": "string", "format": "x-unknown"},
        }});
        let schema = schema.as_object().unwrap();
        let annotate = CompiledSchema::compile(schema, SchemaLimits::default()).unwrap();
        let assert = CompiledSchema::compile_with_formats(
            schema,
            SchemaLimits::default(),
            FormatMode::Assert,
        )
        .unwrap();
        let bad =
            json!({"to": "nobody", "at": "yesterday", "id": "42", "site": "not a uri", "odd": "x"});
        let good = json!({"to": "ada@example.com", "at": "2026-12-02T17:00:00Z",
            "id": "6f1c2b1e-3d4a-4b5c-8d9e-0a1b2c3d4e5f", "site": "https://example.com/a", "odd": "x"});
        assert!(annotate.is_valid(&bad), "2020-12 default: annotations only");
        let found = assert.violations(&bad, 10);
        let mut paths: Vec<&str> = found.first.iter().map(|v| v.path.as_str()).collect();
        paths.sort();
        assert_eq!(paths, ["/at", "/id", "/site", "/to"], "{found}");
        assert!(assert.is_valid(&good), "{}", assert.violations(&good, 10));
    }
}
