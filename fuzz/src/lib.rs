//! What the fuzz targets share: a server with a tool for every path a message can take (typed
//! and raw schemas, `x-mcp-header` parameters, a tool that asks for input and seals request
//! state, enough tools for several pages, a resource template), and a runtime to run it on.

use std::sync::OnceLock;

use serde_json::json;
use toolwire_server::{
    Elicited, InputRequired, RequestContext, Resource, ResourceTemplate, Server, Tool, ToolError,
    protocol::{CallToolResult, ContentBlock, ResourceContents},
};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Person {
    name: String,
    age: u8,
    tags: Option<Vec<String>>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

/// The fixture server, built once per process.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let mut builder = Server::builder("fuzz", "1")
            .page_size(4)
            .no_rate_limit("fuzzing calls every tool many times a second")
            .tool(
                Tool::new("person", |p: Person, _: RequestContext| async move {
                    format!("{} ({}) {:?}", p.name, p.age, p.tags)
                })
                .description("A typed schema"),
            )
            .tool(
                Tool::raw(
                    "headers",
                    json!({"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"},
                        "priority": {"type": "integer", "x-mcp-header": "Priority"},
                        "flag": {"type": "boolean", "x-mcp-header": "Flag"}
                    }}),
                    |args, _| async move {
                        CallToolResult::new(vec![ContentBlock::text(args.to_string())])
                    },
                )
                .description("Parameters mirrored into headers"),
            )
            .tool(
                Tool::new(
                    "ask",
                    |_: toolwire_server::NoArgs, ctx: RequestContext| async move {
                        let state: Option<String> = ctx.request_state()?;
                        match (ctx.elicited::<Name>("who")?, state) {
                            (Some(Elicited::Accepted(n)), Some(s)) => {
                                Ok::<_, ToolError>(format!("{} {s}", n.name))
                            }
                            _ => Err(InputRequired::new()
                                .elicit::<Name>("who", "Who?")
                                .state("asked")
                                .into()),
                        }
                    },
                )
                .description("Asks for input and seals request state"),
            )
            .resource(Resource::new(
                "notes://one",
                "one",
                |uri, _: RequestContext| async move {
                    Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "one"))
                },
            ))
            .resource_template(ResourceTemplate::new(
                "files://{dir}/{+name}",
                "files",
                |uri, _, _: RequestContext| async move {
                    Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "file"))
                },
            ));
        for i in 0..10 {
            builder = builder.tool(
                Tool::raw(
                    format!("filler_{i}"),
                    json!({"type": "object"}),
                    |_, _| async { "ok" },
                )
                .description("Fills pages"),
            );
        }
        builder.build().expect("the fixture server builds")
    })
}

/// A runtime on the fuzzing thread.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}
