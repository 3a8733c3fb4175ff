//! The guides' multi round-trip example: a tool that asks the user to confirm before it acts,
//! served on stdio.
//!
//! `cargo run -p toolwire-server --example confirm`

use toolwire_server::{
    Elicited, InputRequired, NoArgs, RequestContext, Server, Tool, ToolError, stdio,
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

    let server = Server::builder("files", "1.0.0").tool(tool).build()?;
    stdio::serve(server).await?;
    Ok(())
}
