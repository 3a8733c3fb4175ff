//! 2025-11-25 callers: each connection opens a session the way an initialize-era host does
//! (`initialize`, then `notifications/initialized`), then sends its calls with that revision's
//! headers and the session's id, and ends the session with a DELETE when its round is over.
//! The gateway rows set a 2025-11-25 caller's hop beside a 2026-07-28 caller's.

use anyhow::{Context as _, ensure};

use crate::http::Endpoint;
use crate::protocol::{self, Template};
use crate::wire::{self, Wire};

/// The protocol revision these callers speak.
pub(crate) const VERSION: &str = "2025-11-25";

/// Opens a session over `wire`: `initialize` (the reply must choose [`VERSION`]), then
/// `notifications/initialized` (answered 202). Returns the session id the server gave, if any
/// (a stateless server gives none).
pub(crate) async fn open_session(wire: &mut Wire, ep: &Endpoint) -> anyhow::Result<Option<String>> {
    let params = serde_json::json!({
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "mcp-load", "version": "1"}
    });
    let initialize = Template::bare("initialize", params).render(0);
    let head = wire
        .exchange(&wire::legacy_request(ep, "POST", None, &initialize))
        .await
        .context("initialize")?;
    ensure!(head.status == 200, "initialize: HTTP {}", head.status);
    let reply = protocol::reply_message(head.sse, wire.body())
        .context("initialize: the reply is not a JSON-RPC message")?;
    let chosen = reply
        .pointer("/result/protocolVersion")
        .and_then(|v| v.as_str());
    ensure!(
        chosen == Some(VERSION),
        "initialize: the server answered {reply}, not protocol version {VERSION}"
    );
    let session = wire.session().map(str::to_owned);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let head = wire
        .exchange(&wire::legacy_request(
            ep,
            "POST",
            session.as_deref(),
            initialized,
        ))
        .await
        .context("notifications/initialized")?;
    ensure!(
        head.status == 202,
        "notifications/initialized: HTTP {}, not 202",
        head.status
    );
    Ok(session)
}

/// Ends `session` with a DELETE, as a host does when it is done; a server that does not let
/// clients end sessions answers 405 (2025-11-25, Session Management), which is fine too.
pub(crate) async fn close_session(
    wire: &mut Wire,
    ep: &Endpoint,
    session: &str,
) -> anyhow::Result<()> {
    let head = wire
        .exchange(&wire::legacy_request(ep, "DELETE", Some(session), ""))
        .await
        .context("ending the session")?;
    ensure!(
        (200..300).contains(&head.status) || head.status == 405,
        "ending the session: HTTP {}",
        head.status
    );
    Ok(())
}
