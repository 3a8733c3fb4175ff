//! The two search tools: `search_tools`, which finds the tools for a task among those the
//! caller may use, and `call_tool`, which calls one by name through the path a direct call of
//! it takes. Their definitions are static (never a word of the catalogue), so a list that holds
//! them does not change as upstreams do, and a client's prompt cache stays valid (D-05).

use std::sync::{Arc, Weak};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolwire_protocol::{CallToolResult, ErrorObject};
use toolwire_search::{DEFAULT_LIMIT, Entry, Hit, MAX_LIMIT, MAX_QUERY_CHARS, Query};
use toolwire_server::{RequestContext, TaskSupport, Tool, ToolError, Viewer};

use super::semantic::Fallback;
use super::{CALL_TOOL, Downstream, SEARCH_TOOLS, Search, is_search_tool};

const SEARCH_DESCRIPTION: &str = "Finds the tools for a task among the many this server \
    offers. Describe the task in a few words, or give a tool's exact name; the best matching \
    tools come first, each with its name, server, description and inputSchema. Then call one \
    with call_tool (or directly, by its name). `servers` narrows the search to some servers, \
    by the prefix their tools' names start with; `limit` is how many tools to return.";

const CALL_DESCRIPTION: &str = "Calls a tool found with search_tools, by its exact name, with \
    its arguments as its inputSchema describes them, and returns the tool's own result. If the \
    arguments are wrong the result says what to fix: fix them and call again (no need to \
    search again). A name that is not a tool you can use gets an error: search again.";

/// The most characters of a name repeated back in an error.
const NAME_SHOWN: usize = 128;

/// `search_tools` over `search`'s index, for each caller among the tools it may use: those its
/// rules let it see and its scopes permit.
pub(super) fn search_tools(search: Arc<Search>) -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "The task, in a few words (or a tool's exact name)"
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "How many tools to return at most"
            },
            "servers": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only tools of these servers (the prefix of their tools' names)"
            }
        },
        "required": ["query"],
        "additionalProperties": false
    });
    Tool::raw(
        SEARCH_TOOLS,
        input,
        move |arguments: Value, ctx: RequestContext| {
            let search = search.clone();
            async move { searched(&search, arguments, &ctx).await }
        },
    )
    .title("Search tools")
    .description(SEARCH_DESCRIPTION)
    .annotations(annotations(json!({
        "title": "Search tools",
        "readOnlyHint": true,
        "idempotentHint": true,
        "openWorldHint": false
    })))
    .output_schema(found_schema())
}

/// `search_tools`' arguments, as its input schema has checked them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    limit: Option<usize>,
    servers: Option<Vec<String>>,
}

/// One search by the caller of `ctx`: hybrid when the semantic stage has the catalogue's
/// vectors and the query's, else lexical; the result says which answered.
async fn searched(
    search: &Search,
    arguments: Value,
    ctx: &RequestContext,
) -> Result<CallToolResult, ToolError> {
    let args: SearchArgs = serde_json::from_value(arguments)
        .map_err(|e| ToolError::Protocol(ErrorObject::invalid_params(e.to_string())))?;
    let catalogue = search.catalogue();
    let index = catalogue.index.clone();
    let query = Query {
        text: &args.query,
        limit: args.limit.unwrap_or(DEFAULT_LIMIT),
        servers: args.servers.as_deref(),
    };
    let text = match query.check() {
        Ok(text) => text,
        Err(error) => return Ok(CallToolResult::error(format!("search_tools: {error}"))),
    };
    // The query's vector, when the semantic stage has the catalogue's: asked for before the
    // caller's check is made (which is not held across a wait).
    let semantic = match search.semantic() {
        None => None,
        Some(semantic) => match semantic.ready_for(&index) {
            None => {
                search.count_fallback(Fallback::NotReady);
                None
            }
            Some(vectors) => match semantic.query(text).await {
                None => {
                    search.count_fallback(Fallback::Failed);
                    None
                }
                Some(vector) => Some((vectors, vector)),
            },
        },
    };
    let usable = search.allowed(&catalogue, Viewer::of(ctx));
    let allowed = |entry: &Entry| usable(&entry.name);
    let hybrid = semantic.and_then(|(vectors, vector)| {
        index
            .search_hybrid(&query, &vectors, &vector, &allowed)
            .inspect_err(|error| {
                // The endpoint's query vector does not fit its tools' (another model behind
                // the URL, say).
                tracing::warn!(%error, "a query's embedding does not fit the tools': answered lexically");
                search.count_fallback(Fallback::Failed);
            })
            .ok()
    });
    let found = match hybrid {
        Some(found) => (found, HYBRID),
        None => match index.search(&query, &allowed) {
            Ok(found) => (found, LEXICAL),
            Err(error) => return Ok(CallToolResult::error(format!("search_tools: {error}"))),
        },
    };
    let (found, ranking) = found;
    let tools: Vec<Value> = found.hits.iter().map(described).collect();
    Ok(toolwire_server::structured_result(json!({
        "tools": tools,
        "total_matched": found.total_matched,
        "catalog_version": index.version(),
        "ranking": ranking,
    })))
}

/// The `ranking` of an answer by words and meaning together.
const HYBRID: &str = "hybrid";
/// The `ranking` of an answer by words alone.
const LEXICAL: &str = "lexical";

/// A tool found, as a caller reads it.
fn described(hit: &Hit<'_>) -> Value {
    let tool = &hit.entry.tool;
    let mut described = Map::new();
    described.insert("name".into(), json!(hit.entry.name));
    described.insert("server".into(), json!(hit.entry.server));
    if let Some(title) = &tool.title {
        described.insert("title".into(), json!(title));
    }
    if let Some(description) = &tool.description {
        described.insert("description".into(), json!(description));
    }
    described.insert(
        "inputSchema".into(),
        Value::Object(tool.input_schema.clone()),
    );
    if let Some(annotations) = &tool.annotations {
        described.insert("annotations".into(), json!(annotations));
    }
    // Three decimals: enough to order by, and no noise in the tokens a model reads.
    let score = (f64::from(hit.score) * 1000.0).round() / 1000.0;
    described.insert("score".into(), json!(score));
    Value::Object(described)
}

/// The output schema of `search_tools`.
fn found_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "server": {"type": "string"},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "inputSchema": {"type": "object"},
                        "annotations": {"type": "object"},
                        "score": {"type": "number"}
                    },
                    "required": ["name", "server", "inputSchema", "score"]
                }
            },
            "total_matched": {"type": "integer", "minimum": 0},
            "catalog_version": {"type": "string"},
            "ranking": {
                "type": "string",
                "enum": [HYBRID, LEXICAL],
                "description": "hybrid: by words and meaning (an embeddings endpoint); lexical: by words"
            }
        },
        "required": ["tools", "total_matched", "catalog_version"]
    })
}

/// `call_tool`: the tool named, called through the downstream server's own path for it
/// ([`Server::call_within`](toolwire_server::Server::call_within)). It may become the caller's
/// task exactly when the tool called would (a deferred task). The tool called runs under its
/// own deadline and quota; `call_tool` has a deadline of a day and the server's default quota
/// besides (a caller's calls by name, all tools together).
pub(super) fn call_tool(downstream: Weak<dyn Downstream>) -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "description": "The tool's exact name, as search_tools gave it"
            },
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, as its inputSchema describes them"
            }
        },
        "required": ["name"],
        "additionalProperties": false
    });
    Tool::raw(
        CALL_TOOL,
        input,
        move |arguments: Value, ctx: RequestContext| {
            let downstream = downstream.clone();
            async move { called(downstream, arguments, ctx).await }
        },
    )
    .title("Call a tool")
    .description(CALL_DESCRIPTION)
    .annotations(annotations(json!({"title": "Call a tool"})))
    .task_support(TaskSupport::Optional)
    .deferred_task()
    .timeout(LONGEST_CALL)
}

/// `call_tool`'s own deadline: the tool it calls has its own, within it (a day, so that a tool
/// given a longer deadline than the server's default keeps it when called by name).
const LONGEST_CALL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// `call_tool`'s arguments, as its input schema has checked them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallArgs {
    name: String,
    arguments: Option<Value>,
}

/// One call by name. A tool the caller may not use — none by that name, denied by the rules,
/// out of its scopes, or one of the search tools — gets one answer, so that a caller cannot
/// tell which (D-03).
async fn called(
    downstream: Weak<dyn Downstream>,
    arguments: Value,
    ctx: RequestContext,
) -> Result<CallToolResult, ToolError> {
    let args: CallArgs = serde_json::from_value(arguments)
        .map_err(|e| ToolError::Protocol(ErrorObject::invalid_params(e.to_string())))?;
    let unknown = || Ok(CallToolResult::error(unknown_tool(&args.name)));
    if is_search_tool(&args.name) {
        return unknown();
    }
    let Some(downstream) = downstream.upgrade() else {
        return Err(ToolError::Failed("The gateway is closing".into()));
    };
    let server = downstream.downstream().clone();
    drop(downstream);
    let arguments = args.arguments.clone().unwrap_or_else(|| json!({}));
    match server.call_within(&args.name, arguments, ctx).await {
        Some(outcome) => outcome,
        None => unknown(),
    }
}

/// What a caller is told of a name it cannot call.
fn unknown_tool(name: &str) -> String {
    let shown: String = name.chars().take(NAME_SHOWN).collect();
    format!(
        "No tool named {shown:?} is available to you: find the tool for the task with \
         search_tools, and call it by the exact name it gives"
    )
}

fn annotations(value: Value) -> toolwire_protocol::ToolAnnotations {
    serde_json::from_value(value).unwrap_or_default()
}
