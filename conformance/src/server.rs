//! `conformance-server`: the fixture server for the official MCP conformance suite, built only
//! on Toolwire's public API, as any server author would.
//!
//! `conformance-server --listen 127.0.0.1:PORT` serves Streamable HTTP at `/mcp`;
//! `conformance-server --stdio` serves stdio.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use serde_json::{Value, json};
use toolwire_server::protocol::{CallToolResult, ContentBlock, LoggingLevel, ResourceContents};
use toolwire_server::{NoArgs, Prompt, RequestContext, Server, Tool, ToolError, http, stdio};

mod fixtures;

use fixtures::PNG;
/// A tiny WAV.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[derive(Parser)]
#[command(about = "Fixture server for the MCP conformance suite")]
struct Args {
    /// Serve Streamable HTTP at http://ADDR/mcp.
    #[arg(long, conflicts_with = "stdio")]
    listen: Option<SocketAddr>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    stdio: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let server = build()?;
    match (args.listen, args.stdio) {
        (Some(addr), _) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            // Tests and scripts read the address from this line (the port may have been 0).
            eprintln!(
                "conformance-server: listening on http://{}/mcp",
                listener.local_addr()?
            );
            server.shutdown_on_signal();
            http::serve(server, listener, http::HttpConfig::default()).await?;
        }
        (None, true) => {
            tracing::info!("serving stdio");
            server.shutdown_on_signal();
            stdio::serve(server).await?;
            // Tokio's stdin reader may still be blocked in a read; do not wait for it.
            std::process::exit(0);
        }
        (None, false) => anyhow::bail!("pass --listen ADDR or --stdio"),
    }
    Ok(())
}

fn build() -> anyhow::Result<Server> {
    let server = Server::builder("toolwire-conformance-server", env!("CARGO_PKG_VERSION"))
        .instructions("Fixture server for the MCP conformance suite.")
        .logging(true)
        .tools(content_tools())
        .tools(diagnostic_tools())
        .tools(schema_tools())
        .tools(fixtures::mrtr::tools())
        .tools(fixtures::legacy::tools())
        .tools(fixtures::tasks::tools())
        .prompts(fixtures::prompts::prompts())
        .resources(fixtures::prompts::resources())
        .resource_template(fixtures::prompts::templates().remove(0))
        .build()?;
    // The trigger tools change the server's own tool set, so they are added once it exists.
    let this: Arc<OnceLock<Server>> = Arc::new(OnceLock::new());
    let _ = this.set(server.clone());

    server.add_tools(trigger_tools(this))?;
    Ok(server)
}

fn content_tools() -> Vec<Tool> {
    vec![
        Tool::new("test_simple_text", |_: NoArgs, _: RequestContext| async {
            "This is a simple text response for testing."
        })
        .description("Returns a simple text response"),
        Tool::new("test_image_content", |_: NoArgs, _: RequestContext| async {
            ContentBlock::image(PNG, "image/png")
        })
        .description("Returns a PNG image"),
        Tool::new("test_audio_content", |_: NoArgs, _: RequestContext| async {
            ContentBlock::audio(WAV, "audio/wav")
        })
        .description("Returns a WAV audio clip"),
        Tool::new(
            "test_embedded_resource",
            |_: NoArgs, _: RequestContext| async {
                ContentBlock::resource(ResourceContents::text(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ))
            },
        )
        .description("Returns an embedded text resource"),
        Tool::new(
            "test_multiple_content_types",
            |_: NoArgs, _: RequestContext| async {
                vec![
                    ContentBlock::text("Multiple content types test:"),
                    ContentBlock::image(PNG, "image/png"),
                    ContentBlock::resource(ResourceContents::text(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    )),
                ]
            },
        )
        .description("Returns text, an image and an embedded resource"),
        Tool::new(
            "test_error_handling",
            |_: NoArgs, _: RequestContext| async {
                Err::<String, _>(ToolError::failed(
                    "This tool intentionally returns an error for testing",
                ))
            },
        )
        .description("Always fails with a tool execution error"),
        Tool::new(
            "test_tool_with_progress",
            |_: NoArgs, ctx: RequestContext| async move {
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    ctx.progress(step, Some(100.0), Some(&format!("step {}", i + 1)))
                        .await;
                }
                "Progress test completed"
            },
        )
        .description("Reports progress 0, 50 and 100 of 100, then answers"),
    ]
}

fn diagnostic_tools() -> Vec<Tool> {
    vec![
        Tool::new("test_missing_capability", |_: NoArgs, ctx: RequestContext| async move {
            ctx.require_sampling()?;
            Ok::<_, ToolError>("The client declared sampling.")
        })
        .description("Needs the sampling client capability; fails with -32021 without it"),
        Tool::new("test_streaming_elicitation", |_: NoArgs, _: RequestContext| async {
            "Elicitation travels in an input_required result, never as a request on the response stream."
        })
        .description("Checks that no request is sent on a response stream"),
        Tool::new("test_logging_tool", |_: NoArgs, ctx: RequestContext| async move {
            ctx.log(LoggingLevel::Info, Some("conformance"), json!("logging tool started")).await;
            ctx.log(LoggingLevel::Warning, Some("conformance"), json!({"step": "done"})).await;
            "Logged at info and warning when the request asked for logs."
        })
        .description("Sends log messages only when the request sets a log level"),
    ]
}

fn schema_tools() -> Vec<Tool> {
    let schema_2020_12 = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    });
    let header_schema = json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "Deployment region", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "description": "Priority", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "description": "Verbose output", "x-mcp-header": "Verbose"}
        },
        "required": ["region"]
    });
    vec![
        Tool::raw(
            "json_schema_2020_12_tool",
            schema_2020_12,
            |args: Value, _| async move { format!("Received: {args}") },
        )
        .description("Takes arguments described with JSON Schema 2020-12 features"),
        Tool::raw(
            "test_header_params",
            header_schema,
            |args: Value, _| async move { format!("Routed with region {}", args["region"]) },
        )
        .description("Mirrors region, priority and verbose into Mcp-Param headers"),
    ]
}

fn trigger_tools(server: Arc<OnceLock<Server>>) -> Vec<Tool> {
    let toggling = Arc::new(tokio::sync::Mutex::new(()));
    let (prompts_server, prompt_toggling) = (server.clone(), toggling.clone());
    vec![
        Tool::new(
            "test_trigger_tool_change",
            move |_: NoArgs, _: RequestContext| {
                let (server, toggling) = (server.clone(), toggling.clone());
                async move {
                    // One toggle at a time, so concurrent triggers each see a consistent set.
                    let _one_at_a_time = toggling.lock().await;
                    let server = server
                        .get()
                        .ok_or_else(|| ToolError::internal("server not ready"))?;
                    const DYNAMIC: &str = "test_dynamic_tool";
                    if server.tool_names().iter().any(|n| n == DYNAMIC) {
                        server.remove_tool(DYNAMIC).map_err(ToolError::internal)?;
                        Ok::<_, ToolError>(CallToolResult::text(
                            "Removed test_dynamic_tool; the tool list changed.",
                        ))
                    } else {
                        let tool =
                            Tool::new(DYNAMIC, |_: NoArgs, _: RequestContext| async { "dynamic" })
                                .description("Added and removed by test_trigger_tool_change");
                        server.add_tool(tool).map_err(ToolError::internal)?;
                        Ok(CallToolResult::text(
                            "Added test_dynamic_tool; the tool list changed.",
                        ))
                    }
                }
            },
        )
        .description("Adds or removes test_dynamic_tool, so listen streams see tools/list_changed"),
        Tool::new(
            "test_trigger_prompt_change",
            move |_: NoArgs, _: RequestContext| {
                let (server, toggling) = (prompts_server.clone(), prompt_toggling.clone());
                async move {
                    let _one_at_a_time = toggling.lock().await;
                    let server = server
                        .get()
                        .ok_or_else(|| ToolError::internal("server not ready"))?;
                    const DYNAMIC: &str = "test_dynamic_prompt";
                    if server.prompt_names().iter().any(|n| n == DYNAMIC) {
                        server.remove_prompt(DYNAMIC).map_err(ToolError::internal)?;
                        Ok::<_, ToolError>("Removed test_dynamic_prompt; the prompt list changed.")
                    } else {
                        let prompt = Prompt::new(DYNAMIC, |_, _: RequestContext| async {
                            Ok::<_, ToolError>("dynamic".to_owned())
                        })
                        .description("Added and removed by test_trigger_prompt_change");
                        server.add_prompt(prompt).map_err(ToolError::internal)?;
                        Ok("Added test_dynamic_prompt; the prompt list changed.")
                    }
                }
            },
        )
        .description(
            "Adds or removes test_dynamic_prompt, so listen streams see prompts/list_changed",
        ),
    ]
}
