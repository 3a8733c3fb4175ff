//! The guides' prompts and resources example: a prompt with completion, a resource and a
//! resource template, served on stdio.
//!
//! `cargo run -p toolwire-server --example docs`

use toolwire_server::protocol::ResourceContents;
use toolwire_server::{
    Prompt, RequestContext, Resource, ResourceTemplate, Server, ToolError, stdio,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::builder("docs", "1.0.0")
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
    server.notify_resource_updated("docs://readme"); // listen streams subscribed to it are told
    stdio::serve(server).await?;
    Ok(())
}
