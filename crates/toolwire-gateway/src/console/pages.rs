//! The read-only pages: the upstreams and their state, and the tools as served.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use toolwire_client::ServerEra;
use toolwire_host::{PinState, SandboxStatus, ServerState, ServerStatus};

use super::access::Csrf;
use super::{Console, html};
use crate::Unserved;

/// `GET /console`: each upstream, its state (connected, starting, failed and why), how many
/// tools it serves, its protocol and its tools waiting for approval or hidden.
pub(crate) async fn upstreams(
    State(console): State<Arc<Console>>,
    Extension(csrf): Extension<Csrf>,
) -> Response {
    let starting = console.gateway.starting();
    let unserved = console.gateway.unserved();
    let mut rows = String::new();
    for status in console.gateway.host().servers() {
        let theirs: Vec<&Unserved> = unserved
            .iter()
            .filter(|u| u.upstream == status.name)
            .collect();
        let _ = write!(
            rows,
            "{}",
            upstream_row(&status, starting.contains(&status.name), &theirs)
        );
    }
    let mut body = if rows.is_empty() {
        "<p>No upstream is configured.</p>".to_owned()
    } else {
        format!(
            "<table><tr><th>Upstream</th><th>State</th><th>Tools</th><th>Protocol</th>\
             <th>Sandbox</th><th>Waiting for approval</th><th>Hidden or not served</th></tr>\
             {rows}</table>"
        )
    };
    if console.access.has_token() {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"{}\" class=\"inline\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Sign out</button></form>",
            super::LOGOUT_PATH,
            html::escape(&csrf.0)
        );
    }
    html::page(StatusCode::OK, super::HOME_PATH, "Upstreams", &body)
}

/// One upstream's row; `unserved`: the tools it lists that the gateway does not serve.
fn upstream_row(status: &ServerStatus, starting: bool, unserved: &[&Unserved]) -> String {
    let (state, tools) = match (&status.state, starting) {
        (_, true) => (
            "<span class=\"warn\">starting</span>".to_owned(),
            "–".to_owned(),
        ),
        (ServerState::Connected { tools }, false) => (
            "<span class=\"ok\">connected</span>".to_owned(),
            tools.to_string(),
        ),
        (ServerState::Failed { error }, false) => {
            let kept = if status.listed_at.is_some() {
                " (its last list is still served)"
            } else {
                ""
            };
            (
                format!(
                    "<span class=\"bad\">failed</span>: {}{kept}",
                    html::escape(error)
                ),
                "–".to_owned(),
            )
        }
    };
    let era = match &status.era {
        Some(ServerEra::Modern { version }) => html::escape(version),
        Some(ServerEra::Legacy { version }) => {
            format!("{} (legacy session)", html::escape(version))
        }
        _ => "–".to_owned(),
    };
    let changed = status
        .pins
        .changed
        .iter()
        .map(|c| html::escape(&c.tool))
        .collect::<Vec<_>>()
        .join(", ");
    let hidden = status
        .hidden
        .iter()
        .map(|h| format!("{}: {}", html::escape(&h.tool), html::escape(&h.reason)))
        .chain(unserved.iter().map(|u| {
            format!(
                "{}: not served: {}",
                html::escape(&u.tool),
                html::escape(&u.why)
            )
        }))
        .collect::<Vec<_>>()
        .join("<br>");
    // A local upstream running with the gateway's full rights is marked as a warning.
    let sandbox = match &status.sandbox {
        SandboxStatus::Remote => "–".to_owned(),
        SandboxStatus::Enforced => "<span class=\"ok\">sandboxed</span>".to_owned(),
        other => format!(
            "<span class=\"warn\">{}</span>",
            html::escape(&other.to_string())
        ),
    };
    format!(
        "<tr><td>{name}</td><td>{state}</td><td>{tools}</td><td>{era}</td><td>{sandbox}</td>\
         <td>{changed}</td><td>{hidden}</td></tr>",
        name = html::escape(&status.name),
    )
}

/// `GET /console/tools`: every tool the upstreams list, under its served name, its
/// upstream, its description, and whether it is withheld (a changed definition not yet
/// approved).
pub(crate) async fn tools(State(console): State<Arc<Console>>) -> Response {
    let tools = console.gateway.host().tools();
    let mut rows = String::new();
    for tool in tools.iter() {
        let served = match tools.pin_state(&tool.qualified) {
            Some(PinState::Changed { .. }) => format!(
                "<span class=\"bad\">withheld</span>: its definition changed \
                 (<a href=\"{}\">review it</a>)",
                super::approvals::PATH
            ),
            _ => "<span class=\"ok\">served</span>".to_owned(),
        };
        let _ = write!(
            rows,
            "<tr><td><code>{name}</code></td><td>{server}</td><td>{served}</td>\
             <td><pre>{description}</pre></td></tr>",
            name = html::escape(&tool.qualified),
            server = html::escape(&tool.server),
            description = html::escape(tool.definition.description.as_deref().unwrap_or("")),
        );
    }
    let body = if rows.is_empty() {
        "<p>No upstream lists a tool.</p>".to_owned()
    } else {
        format!(
            "<p>The tools as the gateway serves them (each caller sees those its rules let \
             through).</p><table><tr><th>Name</th><th>Upstream</th><th>Served</th>\
             <th>Description</th></tr>{rows}</table>"
        )
    };
    html::page(StatusCode::OK, "/console/tools", "Tools", &body)
}
