//! The tool registry: checked definitions, compiled validators, registration order, and a
//! lock-free snapshot for readers. Writers (add/remove at runtime) build a new snapshot and
//! swap it in; every request reads whatever snapshot is current without taking a lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde_json::value::RawValue;
use toolwire_protocol::headers::{self, HeaderParam};

use crate::error::{Error, SchemaRole, ToolRule};
use crate::schema::{CompiledSchema, SchemaLimits};
use crate::tool::{Handler, Tool};

/// A tool ready to serve: its definition as listed, validators compiled once, header params.
pub(crate) struct RegisteredTool {
    pub(crate) name: String,
    /// The definition serialized once, for `tools/list` pages.
    pub(crate) listed: Box<RawValue>,
    pub(crate) input: CompiledSchema,
    pub(crate) output: Option<CompiledSchema>,
    /// `x-mcp-header` parameters with their lowercase header names, `mcp-param-{name}`.
    pub(crate) header_params: Vec<(String, HeaderParam)>,
    pub(crate) handler: Handler,
}

/// One consistent view of the tools: registration order plus a name index.
#[derive(Default)]
pub(crate) struct ToolSet {
    pub(crate) tools: Vec<Arc<RegisteredTool>>,
    index: HashMap<String, usize>,
}

impl ToolSet {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    fn from_tools(tools: Vec<Arc<RegisteredTool>>) -> Self {
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        ToolSet { tools, index }
    }
}

/// The registry. Reads are a pointer load; writes are serialized by a mutex.
pub(crate) struct ToolRegistry {
    current: ArcSwap<ToolSet>,
    write: Mutex<()>,
    limits: SchemaLimits,
}

impl ToolRegistry {
    pub(crate) fn new(limits: SchemaLimits) -> Self {
        ToolRegistry {
            current: ArcSwap::from_pointee(ToolSet::default()),
            write: Mutex::new(()),
            limits,
        }
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Arc<ToolSet> {
        self.current.load_full()
    }

    /// Adds tools atomically: all are checked first, and none is added if one is refused.
    pub(crate) fn add_all(&self, tools: Vec<Tool>) -> Result<(), Error> {
        let mut prepared = Vec::with_capacity(tools.len());
        for tool in tools {
            prepared.push(Arc::new(prepare(tool, self.limits)?));
        }
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load();
        let mut names = std::collections::HashSet::new();
        for tool in &prepared {
            if current.get(&tool.name).is_some() || !names.insert(tool.name.as_str()) {
                return Err(Error::InvalidTool {
                    tool: tool.name.clone(),
                    rule: ToolRule::DuplicateName,
                });
            }
        }
        let mut tools = current.tools.clone();
        tools.extend(prepared);
        self.current.store(Arc::new(ToolSet::from_tools(tools)));
        Ok(())
    }

    /// Removes a tool by name.
    pub(crate) fn remove(&self, name: &str) -> Result<(), Error> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load();
        let Some(at) = current.position(name) else {
            return Err(Error::UnknownTool(name.to_owned()));
        };
        let mut tools = current.tools.clone();
        tools.remove(at);
        self.current.store(Arc::new(ToolSet::from_tools(tools)));
        Ok(())
    }
}

/// Whether a tool name is 1–128 characters of `[A-Za-z0-9_.-]` (T-08).
pub(crate) fn is_valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Names that suggest a secret; such values should not travel in headers (T-19).
const SECRET_HINTS: &[&str] = &[
    "password",
    "passwd",
    "token",
    "secret",
    "key",
    "auth",
    "credential",
];

/// Checks a definition and compiles its schemas.
fn prepare(tool: Tool, limits: SchemaLimits) -> Result<RegisteredTool, Error> {
    let definition = tool.definition;
    let name = definition.name.clone();
    let reject = |rule| Error::InvalidTool {
        tool: name.clone(),
        rule,
    };
    if !is_valid_name(&name) {
        return Err(reject(ToolRule::InvalidName));
    }
    if definition.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(reject(ToolRule::InputSchemaNotObject));
    }
    let input = CompiledSchema::compile(&definition.input_schema, SchemaRole::Input, limits)
        .map_err(reject)?;
    let output = match &definition.output_schema {
        Some(schema) => {
            Some(CompiledSchema::compile(schema, SchemaRole::Output, limits).map_err(reject)?)
        }
        None => None,
    };
    let header_params = headers::header_params(&definition.input_schema)
        .map_err(|e| reject(ToolRule::InvalidHeaderDeclaration(e.to_string())))?;
    for param in &header_params {
        let lower = format!("{} {}", param.name, param.path.join(".")).to_ascii_lowercase();
        if SECRET_HINTS.iter().any(|hint| lower.contains(hint)) {
            tracing::warn!(
                tool = %name,
                header = %param.name,
                "x-mcp-header parameter looks like a secret; header values are visible to intermediaries (T-19)"
            );
        }
    }
    let listed = serde_json::value::to_raw_value(&definition).map_err(|e| {
        reject(ToolRule::InvalidSchema {
            role: SchemaRole::Input,
            message: e.to_string(),
        })
    })?;
    let header_params = header_params
        .into_iter()
        .map(|p| {
            (
                format!("{}{}", headers::PARAM_PREFIX, p.name.to_ascii_lowercase()),
                p,
            )
        })
        .collect();
    Ok(RegisteredTool {
        name,
        listed,
        input,
        output,
        header_params,
        handler: tool.handler,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(name: &str, schema: serde_json::Value) -> Tool {
        Tool::raw(name, schema, |_, _| async { "ok" })
    }

    fn rule_of(result: Result<(), Error>) -> ToolRule {
        match result {
            Err(Error::InvalidTool { rule, .. }) => rule,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "get_weather", "ns.tool-1", &"x".repeat(128)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "has space", "a,b", "a/b", "é", &"x".repeat(129)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn refuses_with_the_rule() {
        let registry = ToolRegistry::new(SchemaLimits::default());
        let object = json!({"type": "object"});
        assert_eq!(
            rule_of(registry.add_all(vec![raw("bad name", object.clone())])),
            ToolRule::InvalidName
        );
        assert_eq!(
            rule_of(registry.add_all(vec![raw("s", json!({"type": "string"}))])),
            ToolRule::InputSchemaNotObject
        );
        assert_eq!(
            rule_of(registry.add_all(vec![raw("n", json!(null))])),
            ToolRule::InputSchemaNotObject
        );
        assert!(matches!(
            rule_of(registry.add_all(vec![raw("h", json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}))])),
            ToolRule::InvalidHeaderDeclaration(_)
        ));
        let bad_output =
            raw("o", object.clone()).output_schema(json!({"$ref": "https://example.com/s.json"}));
        assert!(matches!(
            rule_of(registry.add_all(vec![bad_output])),
            ToolRule::ExternalReference {
                role: SchemaRole::Output,
                ..
            }
        ));
        registry.add_all(vec![raw("a", object.clone())]).unwrap();
        assert_eq!(
            rule_of(registry.add_all(vec![raw("a", object.clone())])),
            ToolRule::DuplicateName
        );
        assert_eq!(
            rule_of(registry.add_all(vec![raw("b", object.clone()), raw("b", object.clone())])),
            ToolRule::DuplicateName
        );
        assert!(
            registry.snapshot().get("b").is_none(),
            "a refused batch adds nothing"
        );
    }

    #[test]
    fn keeps_registration_order_through_changes() {
        let registry = ToolRegistry::new(SchemaLimits::default());
        let object = json!({"type": "object"});
        registry
            .add_all(
                ["c", "a", "b"]
                    .iter()
                    .map(|n| raw(n, object.clone()))
                    .collect(),
            )
            .unwrap();
        registry.remove("a").unwrap();
        registry.add_all(vec![raw("a", object)]).unwrap();
        let names: Vec<_> = registry
            .snapshot()
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(names, ["c", "b", "a"]);
        assert!(matches!(registry.remove("zz"), Err(Error::UnknownTool(_))));
        assert_eq!(registry.snapshot().position("a"), Some(2));
    }
}
