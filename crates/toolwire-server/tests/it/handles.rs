//! Handles end to end: a tool family that creates, appends to and reads notes by handle, over
//! HTTP with two principals and over stdio. A handle is bound to its creator (another caller's
//! reads as unknown), expires on time with an `isError` that says how to recover, and the
//! retention is in the description of the tool that creates them.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwire_server::handles::{HANDLES_META_KEY, MemoryHandles};
use toolwire_server::http::HttpConfig;
use toolwire_server::{HandleStore, ManualClock, RequestContext, Server, Tool, ToolError};

use crate::support::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Create {
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Append {
    note: String,
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Read {
    note: String,
}

fn server(clock: &Arc<ManualClock>) -> Server {
    let notes: HandleStore<Vec<String>> =
        HandleStore::new("note", Arc::new(MemoryHandles::default()))
            .unwrap()
            .lifetimes(
                std::time::Duration::from_secs(60),
                std::time::Duration::from_secs(3600),
            )
            .recovery("Call create_note to start a new note.")
            .clock(clock.clone());
    let (a, r, described) = (notes.clone(), notes.clone(), notes.clone());
    Server::builder("notes", "1")
        .tool(
            Tool::new("create_note", move |c: Create, ctx: RequestContext| {
                let notes = notes.clone();
                async move { Ok::<_, ToolError>(notes.create(&ctx, &vec![c.text]).await?) }
            })
            .description("Starts a note and returns its handle")
            .creates_handles(&described),
        )
        .tool(
            Tool::new("append", move |c: Append, ctx: RequestContext| {
                let notes = a.clone();
                async move {
                    let lines = notes
                        .update(&ctx, &c.note, |n| {
                            n.push(c.text.clone());
                            n.len()
                        })
                        .await?;
                    Ok::<_, ToolError>(format!("{lines} lines"))
                }
            })
            .description("Appends a line"),
        )
        .tool(
            Tool::new("read", move |c: Read, ctx: RequestContext| {
                let notes = r.clone();
                async move { Ok::<_, ToolError>(notes.get(&ctx, &c.note).await?.join("\n")) }
            })
            .description("Reads a note"),
        )
        .build()
        .unwrap()
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn notes_by_handle_over_http_are_their_creators_and_expire_on_time() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let s = TestServer::start_with(
        server(&clock),
        HttpConfig::default().principal(|h| {
            h.get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        }),
    )
    .await;
    let as_user = |user: &'static str| {
        move |h: &mut Vec<(String, String)>| set_header(h, "x-user", Some(user))
    };

    let listed = post(&s.url, &request(1, "tools/list", json!({}))).await;
    let create = &listed.last()["result"]["tools"][0];
    assert_eq!(
        create["description"],
        "Starts a note and returns its handle. Note handles stay valid for 1 minute after their last use and for 1 hour at most; after that, or for another caller, they are unknown."
    );
    assert_eq!(
        create["_meta"][HANDLES_META_KEY],
        json!([{"kind": "note", "idleMs": 60_000, "maxAgeMs": 3_600_000}])
    );

    let created = post_with(
        &s.url,
        &call(2, "create_note", json!({"text": "one"})),
        as_user("alice"),
    )
    .await;
    let note = text(created.last()).to_owned();
    assert!(
        note.starts_with("note_") && note.len() == 27,
        "{}",
        created.body
    );
    let appended = post_with(
        &s.url,
        &call(3, "append", json!({"note": note, "text": "two"})),
        as_user("alice"),
    )
    .await;
    assert_eq!(text(appended.last()), "2 lines");
    let read = post_with(
        &s.url,
        &call(4, "read", json!({"note": note})),
        as_user("alice"),
    )
    .await;
    assert_eq!(text(read.last()), "one\ntwo");

    // Bob learns nothing about Alice's note: it is unknown to him, as a made-up one is.
    let foreign = post_with(
        &s.url,
        &call(5, "read", json!({"note": note})),
        as_user("bob"),
    )
    .await;
    let made_up = post_with(
        &s.url,
        &call(6, "read", json!({"note": "note_AAAAAAAAAAAAAAAAAAAAAA"})),
        as_user("bob"),
    )
    .await;
    for reply in [foreign.last(), made_up.last()] {
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        assert!(text(reply).contains("is unknown"), "{reply}");
        assert!(
            text(reply).contains("Call create_note to start a new note."),
            "{reply}"
        );
    }

    // A minute without use, and it is gone: the model is told what to do.
    clock.advance(60_001);
    let expired = post_with(
        &s.url,
        &call(7, "read", json!({"note": note})),
        as_user("alice"),
    )
    .await;
    assert_eq!(expired.last()["result"]["isError"], true);
    assert!(
        text(expired.last()).contains("has expired"),
        "{}",
        expired.body
    );
    assert!(
        text(expired.last()).contains("Call create_note"),
        "{}",
        expired.body
    );
    s.stop().await;
}

#[tokio::test]
async fn notes_by_handle_over_stdio() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let mut session = StdioSession::start(server(&clock));
    session
        .send(&call(1, "create_note", json!({"text": "hello"})))
        .await;
    let note = text(&session.recv().await).to_owned();
    assert!(note.starts_with("note_"), "{note}");
    session
        .send(&call(2, "append", json!({"note": note, "text": "world"})))
        .await;
    assert_eq!(text(&session.recv().await), "2 lines");
    session.send(&call(3, "read", json!({"note": note}))).await;
    assert_eq!(text(&session.recv().await), "hello\nworld");
    clock.advance(3_600_000);
    session.send(&call(4, "read", json!({"note": note}))).await;
    let expired = session.recv().await;
    assert_eq!(expired["result"]["isError"], true, "{expired}");
    assert!(text(&expired).contains("has expired"), "{expired}");
}
