//! The guides' handles example: notes kept by handle, served on stdio. Pass a file to keep
//! them across restarts; without one they live in memory until the server stops.
//!
//! `cargo run -p toolwire-server --example notes [-- NOTES.sqlite3]`

use std::sync::Arc;

use toolwire_server::handles::SqliteHandles;
use toolwire_server::{HandleStore, RequestContext, Server, Tool, ToolError, stdio};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Create {
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Read {
    note: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::args().nth(1).unwrap_or_else(|| ":memory:".into());
    let notes: HandleStore<Vec<String>> =
        HandleStore::new("note", Arc::new(SqliteHandles::open(file)?))?
            .recovery("Call note_create to start a new note.");
    let (store, read_store) = (notes.clone(), notes.clone());
    let create = Tool::new("note_create", move |c: Create, ctx: RequestContext| {
        let notes = store.clone();
        async move { Ok::<_, ToolError>(notes.create(&ctx, &vec![c.text]).await?) }
    })
    .description("Starts a note and returns its handle")
    .creates_handles(&notes); // appends "Note handles stay valid for 30 minutes after their last use…"
    let read = Tool::new("note_read", move |r: Read, ctx: RequestContext| {
        let notes = read_store.clone();
        async move { Ok::<_, ToolError>(notes.get(&ctx, &r.note).await?.join("\n")) }
    })
    .description("The note's lines");

    let server = Server::builder("notes", "1.0.0")
        .tool(create)
        .tool(read)
        .build()?;
    stdio::serve(server).await?;
    Ok(())
}
