//! The tools of the last `tools/list`, with what calling each needs (its `x-mcp-header`
//! parameters, its compiled `outputSchema`) and how long the list stays fresh (`ttlMs`, K-05).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use tokio::time::Instant;
use toolwire_protocol::Tool;
use toolwire_protocol::headers::HeaderParam;
use toolwire_protocol::schema::{CompiledSchema, FormatMode, SchemaError, SchemaLimits};

use crate::error::{Error, Result};

/// A listed tool with what calling it needs.
#[derive(Debug)]
pub(crate) struct CachedTool {
    pub(crate) definition: Tool,
    pub(crate) headers: Vec<HeaderParam>,
    /// How the `outputSchema`'s `format` keywords are treated.
    pub(crate) formats: FormatMode,
    /// The compiled `outputSchema` (`None`: the tool has none), on first use.
    pub(crate) output: OnceLock<Result<Option<CompiledSchema>, SchemaError>>,
}

impl CachedTool {
    /// The compiled `outputSchema`, if the tool has one; one that cannot be used is an error,
    /// never a reason to accept output unchecked (J-03, J-07).
    pub(crate) fn output_schema(&self) -> Result<Option<&CompiledSchema>> {
        let compiled = self.output.get_or_init(|| {
            self.definition
                .output_schema
                .as_ref()
                .map(|schema| {
                    CompiledSchema::compile_with_formats(
                        schema,
                        SchemaLimits::default(),
                        self.formats,
                    )
                })
                .transpose()
        });
        compiled
            .as_ref()
            .map(Option::as_ref)
            .map_err(|reason| Error::UnusableOutputSchema {
                tool: self.definition.name.clone(),
                reason: reason.clone(),
            })
    }
}

/// The tools of the last `tools/list`, with their freshness.
#[derive(Debug)]
pub(crate) struct ToolCache {
    pub(crate) order: Vec<Arc<CachedTool>>,
    pub(crate) by_name: HashMap<String, Arc<CachedTool>>,
    /// Tools dropped for invalid header declarations, with the reason.
    pub(crate) dropped: HashMap<String, String>,
    pub(crate) fresh_until: Instant,
    /// The list's `ttlMs`, as the server gave it (or the default).
    pub(crate) ttl: std::time::Duration,
}
