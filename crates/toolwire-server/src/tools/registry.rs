//! The tool registry: checked definitions, compiled validators, registration order, and a
//! lock-free snapshot for readers. Writers (add/remove at runtime) build a new snapshot and
//! swap it in; every request reads whatever snapshot is current without taking a lock.

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use toolwire_protocol::Tool as ToolDefinition;
use toolwire_protocol::headers::{self, HeaderParam};

use crate::error::{Error, SchemaRole, ToolRule};
use crate::safety::limits::{Limiter, RATE_LIMIT_META_KEY, RateLimit, ToolLimit};
use crate::safety::output::{CompiledGuard, OutputGuard};
use crate::state::handles::{HANDLES_META_KEY, HandleRetention};
use crate::tools::catalog::{Catalog, Entry, Snapshot};
use crate::tools::tool::{Handler, Limit, TIMEOUT_META_KEY, TaskSupport, Timeout, Tool};
use toolwire_protocol::schema::{CompiledSchema, FormatMode, SchemaError, SchemaLimits};

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
    pub(crate) task_support: Option<TaskSupport>,
    /// Whether a call becomes a task only when its handler says so.
    pub(crate) deferred_task: bool,
    /// OAuth scopes needed to see and call it.
    pub(crate) scopes: Vec<String>,
    /// The output guard its results go through: its own, else the server's when it was
    /// registered (a reconfiguration registers every tool again).
    pub(crate) guard: Arc<crate::safety::output::CompiledGuard>,
    /// How long its handler may run per call (or per task step).
    pub(crate) timeout: Option<Duration>,
    /// SHA-256 (hex) of `listed`, for audit events.
    pub(crate) definition_sha256: String,
    /// How often each caller may call it; `None` for no limit. Shared with the tool
    /// registered again by a reconfiguration that left its limit as it was, so that callers'
    /// quotas carry over.
    pub(crate) limit: Option<Arc<ToolLimit>>,
    /// The tool as given, to register it again under new defaults.
    source: Tool,
    /// Its operation series, resolved on first use (O-03).
    pub(crate) series: crate::observe::metrics::ToolSeries,
}

/// A registered tool's name, held by the tool itself: what a handler's step logs a panic or a
/// timeout under, without a copy of the name per call.
pub(crate) struct ToolName(pub(crate) Arc<RegisteredTool>);

impl AsRef<str> for ToolName {
    fn as_ref(&self) -> &str {
        &self.0.name
    }
}

impl Entry for RegisteredTool {
    fn key(&self) -> &str {
        &self.name
    }

    fn listed(&self) -> &RawValue {
        &self.listed
    }

    fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

/// The tools: a [`Catalog`] of checked, compiled definitions.
pub(crate) struct ToolRegistry {
    catalog: Catalog<RegisteredTool>,
    limits: SchemaLimits,
    formats: FormatMode,
    /// The time and rate limits and the output guard of tools that set none; replaced by
    /// [`ToolRegistry::reconfigure`].
    defaults: std::sync::RwLock<ToolDefaults>,
    /// Held by each writer from the snapshot it reads to the one it stores, so that a
    /// reconfiguration never stores a tool another writer replaced meanwhile.
    writing: std::sync::Mutex<()>,
}

/// What a tool gets when it does not say otherwise.
#[derive(Debug, Clone)]
pub(crate) struct ToolDefaults {
    pub(crate) timeout: Option<Duration>,
    pub(crate) rate_limit: Option<RateLimit>,
    pub(crate) output_guard: Arc<CompiledGuard>,
}

impl ToolRegistry {
    pub(crate) fn new(limits: SchemaLimits, formats: FormatMode, defaults: ToolDefaults) -> Self {
        ToolRegistry {
            catalog: Catalog::default(),
            limits,
            formats,
            defaults: std::sync::RwLock::new(defaults),
            writing: std::sync::Mutex::new(()),
        }
    }

    /// The writers' lock.
    fn writing(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The defaults of the moment.
    fn defaults(&self) -> ToolDefaults {
        self.defaults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Registers every tool again under `defaults`, each from `replacements` when one there
    /// has its name, else as it was given: all checked first, then swapped in at once (a call
    /// in flight ends with the tool it found). A tool whose rate limit stays as it was keeps
    /// its callers' quotas. Refused, changing nothing, when a tool is refused or a
    /// replacement names no registered tool. Whether any listed definition changed.
    pub(crate) fn reconfigure(
        &self,
        defaults: ToolDefaults,
        replacements: Vec<Tool>,
    ) -> Result<bool, Error> {
        let _writing = self.writing();
        let (current, prepared, changed) = self.prepared(&defaults, replacements)?;
        let names = current.items.iter().map(|t| t.name.as_str()).collect();
        let mut kept_defaults = self.defaults.write().unwrap_or_else(|e| e.into_inner());
        self.catalog
            .replace_all(&names, prepared)
            .map_err(|tool| Error::InvalidTool {
                tool,
                rule: ToolRule::DuplicateName,
            })?;
        *kept_defaults = defaults;
        Ok(changed)
    }

    /// Every registered tool prepared again under `defaults` (a replacement of the same name
    /// in its place), nothing changed: the snapshot it was made from, the tools, and whether a
    /// listed definition changed.
    #[allow(clippy::type_complexity)]
    pub(crate) fn prepared(
        &self,
        defaults: &ToolDefaults,
        replacements: Vec<Tool>,
    ) -> Result<
        (
            Arc<Snapshot<RegisteredTool>>,
            Vec<Arc<RegisteredTool>>,
            bool,
        ),
        Error,
    > {
        let mut replacing: std::collections::HashMap<String, Tool> = replacements
            .into_iter()
            .map(|t| (t.definition.name.clone(), t))
            .collect();
        let current = self.snapshot();
        let mut prepared = Vec::with_capacity(current.items.len());
        let mut changed = false;
        for old in &current.items {
            let source = replacing
                .remove(&old.name)
                .unwrap_or_else(|| old.source.clone());
            let mut new = prepare(source, self.limits, self.formats, defaults.clone())?;
            if let (Some(kept), Some(made)) = (&old.limit, &new.limit) {
                if kept.limiter.limit() == made.limiter.limit() && kept.cost == made.cost {
                    new.limit = Some(kept.clone());
                }
            }
            changed |= new.listed.get() != old.listed.get();
            prepared.push(Arc::new(new));
        }
        if let Some(name) = replacing.into_keys().next() {
            return Err(Error::UnknownTool(name));
        }
        Ok((current, prepared, changed))
    }

    /// Whether each of `tools` would be taken under `defaults`, none registered.
    pub(crate) fn check_alone(
        &self,
        defaults: &ToolDefaults,
        tools: Vec<Tool>,
    ) -> Result<(), Error> {
        for tool in tools {
            prepare(tool, self.limits, self.formats, defaults.clone())?;
        }
        Ok(())
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot<RegisteredTool>> {
        self.catalog.snapshot()
    }

    /// Adds tools atomically: all are checked first, and none is added if one is refused.
    pub(crate) fn add_all(&self, tools: Vec<Tool>) -> Result<(), Error> {
        self.replace_all(&std::collections::HashSet::new(), tools)
            .map(|_| ())
    }

    /// Removes the named tools and registers `tools` in one step (see
    /// [`Catalog::replace_all`]): all or nothing; how many were removed.
    pub(crate) fn replace_all(
        &self,
        names: &std::collections::HashSet<&str>,
        tools: Vec<Tool>,
    ) -> Result<usize, Error> {
        let _writing = self.writing();
        let defaults = self.defaults();
        let mut prepared = Vec::with_capacity(tools.len());
        for tool in tools {
            prepared.push(Arc::new(prepare(
                tool,
                self.limits,
                self.formats,
                defaults.clone(),
            )?));
        }
        self.catalog
            .replace_all(names, prepared)
            .map_err(|tool| Error::InvalidTool {
                tool,
                rule: ToolRule::DuplicateName,
            })
    }

    /// Removes the named tools at once; how many were registered.
    pub(crate) fn remove_all(&self, names: &std::collections::HashSet<&str>) -> usize {
        let _writing = self.writing();
        self.catalog.remove_all(names)
    }

    pub(crate) fn remove(&self, name: &str) -> Result<(), Error> {
        let _writing = self.writing();
        if self.catalog.remove(name) {
            Ok(())
        } else {
            Err(Error::UnknownTool(name.to_owned()))
        }
    }
}

/// The rule a refused schema breaks.
fn schema_rule(role: SchemaRole, error: SchemaError) -> ToolRule {
    match error {
        SchemaError::UnsupportedDialect(dialect) => ToolRule::UnsupportedDialect { role, dialect },
        SchemaError::ExternalReference(reference) => {
            ToolRule::ExternalReference { role, reference }
        }
        SchemaError::TooComplex(message) => ToolRule::SchemaTooComplex { role, message },
        SchemaError::Invalid(message) => ToolRule::InvalidSchema { role, message },
        other => ToolRule::InvalidSchema {
            role,
            message: other.to_string(),
        },
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

/// Checks a definition and compiles its schemas. The checks run in a fixed order, so that a
/// definition that breaks several rules is refused for the first one.
fn prepare(
    tool: Tool,
    limits: SchemaLimits,
    formats: FormatMode,
    defaults: ToolDefaults,
) -> Result<RegisteredTool, Error> {
    let source = tool.clone();
    let mut definition = tool.definition;
    let name = definition.name.clone();
    let reject = |rule| Error::InvalidTool {
        tool: name.clone(),
        rule,
    };
    check_shape(&definition).map_err(reject)?;
    let (input, output) = compile_schemas(&definition, limits, formats).map_err(reject)?;
    let guard = compile_guard(&name, tool.output_guard.as_ref())
        .map_err(reject)?
        .unwrap_or(defaults.output_guard);
    let header_params = read_header_params(&name, &definition).map_err(reject)?;
    let timeout = time_limit(&name, tool.timeout, defaults.timeout);
    advertise_time_limit(&mut definition, timeout);
    describe_handles(&mut definition, &tool.handles);
    let limit =
        rate_limit(&name, tool.rate_limit, tool.cost, defaults.rate_limit).map_err(reject)?;
    advertise_rate_limit(&mut definition, limit.as_ref());
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
    let definition_sha256 = {
        use sha2::Digest as _;
        toolwire_protocol::hex::encode(&sha2::Sha256::digest(listed.get().as_bytes()))
    };
    Ok(RegisteredTool {
        series: crate::observe::metrics::ToolSeries::new(&name),
        name,
        listed,
        input,
        output,
        header_params,
        handler: tool.handler,
        task_support: tool.task_support,
        deferred_task: tool.deferred_task,
        scopes: tool.scopes,
        guard,
        limit: limit.map(Arc::new),
        timeout,
        definition_sha256,
        source,
    })
}

/// A valid name (T-08) and an input schema whose root is an object.
fn check_shape(definition: &ToolDefinition) -> Result<(), ToolRule> {
    if !is_valid_name(&definition.name) {
        return Err(ToolRule::InvalidName);
    }
    if definition.input_schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(ToolRule::InputSchemaNotObject);
    }
    Ok(())
}

/// The input schema and the output schema, if any, compiled once for every call.
fn compile_schemas(
    definition: &ToolDefinition,
    limits: SchemaLimits,
    formats: FormatMode,
) -> Result<(CompiledSchema, Option<CompiledSchema>), ToolRule> {
    let input = CompiledSchema::compile_with_formats(&definition.input_schema, limits, formats)
        .map_err(|e| schema_rule(SchemaRole::Input, e))?;
    let output = match &definition.output_schema {
        Some(schema) => Some(
            CompiledSchema::compile_with_formats(schema, limits, formats)
                .map_err(|e| schema_rule(SchemaRole::Output, e))?,
        ),
        None => None,
    };
    Ok((input, output))
}

/// The tool's own output guard, compiled; turning it off is logged with its reason.
fn compile_guard(
    name: &str,
    guard: Option<&OutputGuard>,
) -> Result<Option<Arc<CompiledGuard>>, ToolRule> {
    let Some(guard) = guard else {
        return Ok(None);
    };
    if let Some(reason) = guard.off_reason() {
        tracing::warn!(target: "toolwire::output", tool = %name, %reason, "output sanitization is off for this tool");
    }
    guard
        .compile()
        .map(Some)
        .map_err(ToolRule::InvalidOutputGuard)
}

/// The `x-mcp-header` parameters the input schema declares; one that looks like a secret is
/// logged, since header values are visible to intermediaries (T-19).
fn read_header_params(
    name: &str,
    definition: &ToolDefinition,
) -> Result<Vec<HeaderParam>, ToolRule> {
    let header_params = headers::header_params(&definition.input_schema)
        .map_err(|e| ToolRule::InvalidHeaderDeclaration(e.to_string()))?;
    for param in &header_params {
        let lower = format!("{} {}", param.name, param.path.join(".")).to_ascii_lowercase();
        if SECRET_HINTS.iter().any(|hint| lower.contains(hint)) {
            tracing::warn!(
                tool = %name,
                header = %param.name,
                // T-19
                "x-mcp-header parameter looks like a secret; header values are visible to intermediaries"
            );
        }
    }
    Ok(header_params)
}

/// How long the handler may run: the tool's own limit, else the server's default; none at all
/// is logged with its reason.
fn time_limit(name: &str, own: Option<Timeout>, default: Option<Duration>) -> Option<Duration> {
    match own {
        None => default,
        Some(Timeout::After(limit)) => Some(limit),
        Some(Timeout::Never(reason)) => {
            tracing::warn!(tool = %name, %reason, "this tool has no time limit");
            None
        }
    }
}

/// The limit is advertised, so that a client can wait as long as the server will.
fn advertise_time_limit(definition: &mut ToolDefinition, timeout: Option<Duration>) {
    if let Some(limit) = timeout {
        definition.meta.get_or_insert_with(Default::default).insert(
            TIMEOUT_META_KEY.to_owned(),
            (limit.as_millis() as u64).into(),
        );
    }
}

/// The model reads how long the handles this tool creates stay valid (T-21): a sentence each
/// in the description, and the list in `_meta`.
fn describe_handles(definition: &mut ToolDefinition, handles: &[HandleRetention]) {
    if handles.is_empty() {
        return;
    }
    let mut description = definition.description.take().unwrap_or_default();
    for retention in handles {
        if !description.is_empty() && !description.ends_with([' ', '\n']) {
            description.push_str(if description.ends_with('.') {
                " "
            } else {
                ". "
            });
        }
        description.push_str(&retention.sentence);
    }
    definition.description = Some(description);
    let listed: Vec<_> = handles.iter().map(|r| r.meta.clone()).collect();
    definition
        .meta
        .get_or_insert_with(Default::default)
        .insert(HANDLES_META_KEY.to_owned(), listed.into());
}

/// How often each caller may call the tool: its own limit, else the server's default; none at
/// all is logged with its reason.
fn rate_limit(
    name: &str,
    own: Option<Limit>,
    cost: u32,
    default: Option<RateLimit>,
) -> Result<Option<ToolLimit>, ToolRule> {
    let limit = match own {
        None => default,
        Some(Limit::To(limit)) => Some(limit),
        Some(Limit::Unlimited(reason)) => {
            tracing::warn!(tool = %name, %reason, "this tool has no rate limit");
            None
        }
    };
    let Some(limit) = limit else {
        return Ok(None);
    };
    Ok(Some(ToolLimit {
        limiter: Limiter::new(limit, cost).map_err(ToolRule::InvalidRateLimit)?,
        cost,
    }))
}

/// Advertised too, so a client can pace itself rather than run into the limit.
fn advertise_rate_limit(definition: &mut ToolDefinition, limit: Option<&ToolLimit>) {
    if let Some(limit) = limit {
        let quota = limit.limiter.limit();
        definition.meta.get_or_insert_with(Default::default).insert(
            RATE_LIMIT_META_KEY.to_owned(),
            serde_json::json!({
                "calls": quota.calls(),
                "periodMs": quota.period().as_millis() as u64,
                "burst": quota.burst_size(),
                "cost": limit.cost,
            }),
        );
    }
}

impl AsRef<crate::observe::metrics::ToolSeries> for RegisteredTool {
    fn as_ref(&self) -> &crate::observe::metrics::ToolSeries {
        &self.series
    }
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
        let registry = ToolRegistry::new(
            SchemaLimits::default(),
            FormatMode::Annotate,
            ToolDefaults {
                timeout: None,
                rate_limit: None,
                output_guard: OutputGuard::default().compile().unwrap(),
            },
        );
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
        let registry = ToolRegistry::new(
            SchemaLimits::default(),
            FormatMode::Annotate,
            ToolDefaults {
                timeout: None,
                rate_limit: None,
                output_guard: OutputGuard::default().compile().unwrap(),
            },
        );
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
            .items
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(names, ["c", "b", "a"]);
        assert!(matches!(registry.remove("zz"), Err(Error::UnknownTool(_))));
        assert_eq!(registry.snapshot().position("a"), Some(2));
    }
}
