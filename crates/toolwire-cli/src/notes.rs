//! The notes tools of `toolwire serve`: a small toolset over handles (T-21). A note is a list of
//! lines kept by handle, in the data directory's SQLite file by default, so notes survive a
//! restart (or in the shared store with `--store`, so every instance reads them); each belongs
//! to the caller that created it and lives a bounded time.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwire_server::handles::{HandleBackend, MemoryHandles, SqliteHandles};
use toolwire_server::protocol::ToolAnnotations;
use toolwire_server::{HandleStore, RequestContext, Store, Structured, Tool, ToolError};

/// A note: its lines.
pub(crate) type Notes = HandleStore<Vec<String>>;

/// The file notes live in, inside the data directory.
pub(crate) const NOTES_FILE: &str = "handles.sqlite3";

/// The longest note, in lines, and the longest line, in characters.
const MAX_LINES: usize = 1000;
const MAX_LINE: usize = 4000;

/// Where notes are kept.
pub(crate) enum Kept<'a> {
    /// In the data directory's SQLite file (created with the directory if missing).
    Dir(&'a Path),
    /// In this process's memory.
    Memory,
    /// In the shared store (`--store`), seen by every instance using it.
    Store(&'a Store),
}

/// The notes store, kept where `kept` says.
pub(crate) fn store(
    kept: Kept<'_>,
    (idle, max_age): (Duration, Duration),
) -> anyhow::Result<Notes> {
    let backend: Arc<dyn HandleBackend> =
        match kept {
            Kept::Dir(dir) => {
                crate::private::dir(dir, crate::private::Chosen::ByPerson).with_context(|| {
                    format!(
                        "--data-dir: cannot create {} (pass another directory)",
                        dir.display()
                    )
                })?;
                let file = dir.join(NOTES_FILE);
                Arc::new(SqliteHandles::open(&file).map_err(|e| {
                    anyhow::anyhow!("--data-dir: cannot open {}: {e}", file.display())
                })?)
            }
            Kept::Memory => Arc::new(MemoryHandles::default()),
            Kept::Store(store) => store.handle_backend(),
        };
    Ok(HandleStore::new("note", backend)?
        .lifetimes(idle, max_age)
        .recovery("Call note_create to start a new note."))
}

#[derive(Deserialize, JsonSchema)]
struct Create {
    /// The note's first line.
    #[schemars(length(max = 4000))]
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Append {
    /// The note's handle, as note_create returned it.
    note: String,
    /// The line to add.
    #[schemars(length(max = 4000))]
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Read {
    /// The note's handle, as note_create returned it.
    note: String,
}

#[derive(Serialize, JsonSchema)]
struct Created {
    /// The handle to pass to note_append and note_read.
    note: String,
}

#[derive(Serialize, JsonSchema)]
struct Lines {
    /// How many lines the note has now.
    lines: usize,
}

/// note_create, note_append and note_read over `notes`.
pub(crate) fn tools(notes: &Notes) -> Vec<Tool> {
    let (create, append, read) = (notes.clone(), notes.clone(), notes.clone());
    vec![
        Tool::new("note_create", move |c: Create, ctx: RequestContext| {
            let notes = create.clone();
            async move {
                let note = notes.create(&ctx, &vec![c.text]).await?;
                Ok::<_, ToolError>(Structured(Created { note }))
            }
        })
        .description("Starts a note with a first line and returns its handle")
        .creates_handles(notes)
        .annotations(writes()),
        Tool::new("note_append", move |a: Append, ctx: RequestContext| {
            let notes = append.clone();
            async move {
                if a.text.chars().count() > MAX_LINE {
                    return Err(ToolError::failed(format!(
                        "A line holds at most {MAX_LINE} characters."
                    )));
                }
                let lines = notes
                    .update(&ctx, &a.note, |lines| {
                        if lines.len() >= MAX_LINES {
                            return None;
                        }
                        lines.push(a.text.clone());
                        Some(lines.len())
                    })
                    .await?
                    .ok_or_else(|| {
                        ToolError::failed(format!(
                            "The note is full ({MAX_LINES} lines); start another with note_create."
                        ))
                    })?;
                Ok(Structured(Lines { lines }))
            }
        })
        .description("Adds a line to the end of a note")
        .annotations(writes()),
        Tool::new("note_read", move |r: Read, ctx: RequestContext| {
            let notes = read.clone();
            async move { Ok::<_, ToolError>(notes.get(&ctx, &r.note).await?.join("\n")) }
        })
        .description("Returns a note's lines")
        .annotations(ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        }),
    ]
}

fn writes() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        idempotent_hint: Some(false),
        open_world_hint: Some(false),
        ..Default::default()
    }
}
