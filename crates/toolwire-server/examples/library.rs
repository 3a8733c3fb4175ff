//! The README's other examples in one server: a tool that asks for confirmation (MRTR), a
//! prompt with completion, a resource and a resource template. Serves stdio.
//!
//! `cargo run -p toolwire-server --example library`

use toolwire_server::protocol::ResourceContents;
use toolwire_server::{
    Elicited, InputRequired, NoArgs, Prompt, RequestContext, Resource, ResourceTemplate, Server,
    Tool, ToolError, stdio,
};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    ok: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tool = Tool::new("delete_all", |_: NoArgs, ctx: RequestContext| async move {
        match ctx.elicited::<Confirm>("confirm")? {
            Some(Elicited::Accepted(c)) if c.ok => Ok("Deleted.".to_owned()),
            Some(_) => Ok("Kept everything.".to_owned()),
            None => Err(ToolError::from(
                InputRequired::new()
                    .elicit::<Confirm>("confirm", "Really delete everything?")
                    .state("step-1"),
            )),
        }
    })
    .description("Deletes everything after the user confirms");

    let server = Server::builder("docs", "1.0.0")
        .tool(tool)
        .prompt(
            Prompt::new("summarize", |args, _: RequestContext| async move {
                Ok::<_, ToolError>(format!("Summarize {} in three sentences.", args["topic"]))
            })
            .description("Summarize a topic")
            .argument("topic", "What to summarize", true)
            .complete("topic", |typed, _| vec![format!("{typed}…")]),
        )
        .resource(Resource::new(
            "docs://readme",
            "readme",
            |uri, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/markdown", "# Hello"))
            },
        ))
        .resource_template(ResourceTemplate::new(
            "docs://pages/{id}",
            "page",
            |uri, vars, _: RequestContext| async move {
                Ok::<_, ToolError>(ResourceContents::text(
                    uri,
                    "text/plain",
                    format!("page {}", vars["id"]),
                ))
            },
        ))
        .build()?;
    server.notify_resource_updated("docs://readme");
    stdio::serve(server).await?;
    Ok(())
}
