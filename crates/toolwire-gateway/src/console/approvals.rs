//! The definitions waiting for approval: each pinned tool whose listed definition changed,
//! what changed path by path (the diff the host records in its audit log), and an Approve
//! button that takes the same path as `toolwire pins approve` ([`Gateway::approve_reviewed`]:
//! the new definition is pinned, the approval audited, the tool served again; O-12).
//!
//! [`Gateway::approve_reviewed`]: crate::Gateway::approve_reviewed

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use axum::{Extension, Form};
use http::StatusCode;
use serde_json::Value;
use toolwire_host::pins::Changed;
use toolwire_host::{Change, OfferKind, PinState};

use super::access::Csrf;
use super::{Console, html};

/// The page's path; its form posts there too.
pub(crate) const PATH: &str = "/console/approvals";

/// The page's query: the tool just approved, to say so.
#[derive(serde::Deserialize)]
pub(crate) struct Shown {
    approved: Option<String>,
}

/// The Approve form's fields: the CSRF token, the served name, and the hash of the
/// definition the operator reviewed (a definition that changed again since is not approved).
#[derive(serde::Deserialize)]
pub(crate) struct Approve {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    listed: String,
    /// For a prompt, resource or template: its kind (`prompt`, `resource`, `template`) and
    /// its upstream; `tool` is then its name, URI or URI template as the upstream lists it.
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    server: Option<String>,
}

/// What is waiting: a served tool, or an upstream's prompt, resource or template.
enum Waiting<'a> {
    Tool(&'a str),
    Offer(OfferKind, &'a str),
}

/// `GET /console/approvals`.
pub(crate) async fn show(
    State(console): State<Arc<Console>>,
    Extension(csrf): Extension<Csrf>,
    Query(shown): Query<Shown>,
) -> Response {
    let host = console.gateway.host();
    let mut body = String::new();
    if let Some(approved) = shown.approved {
        if matches!(host.pin_state(&approved), Some(PinState::Pinned(_))) {
            let _ = write!(
                body,
                "<p class=\"note\">Approved the new definition of <code>{}</code>: it is served \
                 again.</p>",
                html::escape(&approved)
            );
        }
    }
    let tools = host.tools();
    let mut waiting = 0;
    for status in host.servers() {
        for changed in &status.pins.changed {
            let qualified = tools
                .iter()
                .find(|t| t.server == status.name && t.definition.name == changed.tool)
                .map(|t| t.qualified.clone());
            // A change whose tool is no longer listed has nothing to approve.
            let Some(qualified) = qualified else { continue };
            if !matches!(tools.pin_state(&qualified), Some(PinState::Changed { .. })) {
                continue;
            }
            waiting += 1;
            body.push_str(&waiting_tool(
                &csrf,
                &status.name,
                Waiting::Tool(&qualified),
                changed,
            ));
        }
        for kind in OfferKind::ALL {
            for changed in &status.offer_pins.of(kind).changed {
                waiting += 1;
                body.push_str(&waiting_tool(
                    &csrf,
                    &status.name,
                    Waiting::Offer(kind, &changed.tool),
                    changed,
                ));
            }
        }
    }
    if waiting == 0 {
        body.push_str("<p>No definition is waiting for approval.</p>");
    }
    html::page(StatusCode::OK, PATH, "Approvals", &body)
}

/// One changed tool: its names, its hashes, what changed, and the Approve form.
fn waiting_tool(csrf: &Csrf, server: &str, waiting: Waiting<'_>, changed: &Changed) -> String {
    let mut rows = String::new();
    let mut hidden = 0;
    for change in &changed.changes {
        rows.push_str(&change_row(change));
        hidden += change.after.as_ref().map_or(0, hidden_in);
    }
    let warning = match hidden {
        0 => String::new(),
        n => format!(
            "<p class=\"warn\"><strong>Warning:</strong> the new definition holds {n} \
             invisible or control character{s} (shown as <code>⟦U+…⟧</code>), which a person \
             reading it does not see and a model does: they may spell an instruction. The \
             gateway removes them before it serves the definition; approve only what you \
             would approve with them spelled out.</p>",
            s = if n == 1 { "" } else { "s" }
        ),
    };
    let (heading, fields) = match waiting {
        Waiting::Tool(qualified) => (
            format!(
                "<code>{}</code> from {}",
                html::escape(qualified),
                html::escape(server)
            ),
            format!(
                "<input type=\"hidden\" name=\"tool\" value=\"{}\">",
                html::escape(qualified)
            ),
        ),
        Waiting::Offer(kind, name) => (
            format!(
                "The {} <code>{}</code> of {}",
                kind.as_str(),
                html::escape(name),
                html::escape(server)
            ),
            format!(
                "<input type=\"hidden\" name=\"kind\" value=\"{}\">\
                 <input type=\"hidden\" name=\"server\" value=\"{}\">\
                 <input type=\"hidden\" name=\"tool\" value=\"{}\">",
                kind.as_str(),
                html::escape(server),
                html::escape(name)
            ),
        ),
    };
    format!(
        "<section class=\"waiting\"><h2>{heading}</h2>\
         <p>{why}<br>\
         Pinned: {pinned}<br>Listed now: <code>{listed}</code></p>{warning}\
         <table><tr><th>Where</th><th>Was</th><th>Is now</th></tr>{rows}</table>\
         <form method=\"post\" action=\"{PATH}\" class=\"approve\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         {fields}\
         <input type=\"hidden\" name=\"listed\" value=\"{listed}\">\
         <button type=\"submit\" name=\"approve\">Approve the new definition</button>\
         </form></section>",
        why = match changed.pinned.is_empty() {
            true =>
                "It is new to an upstream whose definitions are pinned; it is held until \
                     approved.",
            false => "Its definition changed since it was pinned; it is withheld until approved.",
        },
        pinned = match changed.pinned.is_empty() {
            true => "<em>nothing: a new name</em>".to_owned(),
            false => format!("<code>{}</code>", html::escape(&changed.pinned)),
        },
        listed = html::escape(&changed.listed),
        csrf = html::escape(&csrf.0),
    )
}

fn change_row(change: &Change) -> String {
    let path = if change.path.is_empty() {
        "(the definition)"
    } else {
        &change.path
    };
    format!(
        "<tr><td><code>{}</code></td><td class=\"was\"><pre>{}</pre></td>\
         <td class=\"now\"><pre>{}</pre></td></tr>",
        html::escape(path),
        shown(change.before.as_ref()),
        shown(change.after.as_ref()),
    )
}

/// A value of a definition, readable: strings as they are, anything else as JSON; every
/// invisible or control character (tag characters, bidi controls, zero-width ones, escapes)
/// shown as `⟦U+XXXX⟧`, so that what an upstream hid is seen.
fn shown(value: Option<&Value>) -> String {
    let text = match value {
        None => return "<em>(absent)</em>".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            // The pretty JSON's own layout.
            '\n' | '\t' => out.push(c),
            c if is_hidden(c) => out.push_str(&format!(
                "<mark class=\"hidden\">⟦U+{:04X}⟧</mark>",
                c as u32
            )),
            c => out.push_str(&html::escape(c.encode_utf8(&mut [0; 4]))),
        }
    }
    out
}

/// Whether a person does not see `c` where a model reads it.
fn is_hidden(c: char) -> bool {
    c.is_control() || toolwire_sanitize::text::is_hidden_format(c)
}

/// How many hidden characters the strings of `value` hold.
fn hidden_in(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().filter(|c| *c != '\n' && is_hidden(*c)).count(),
        Value::Array(items) => items.iter().map(hidden_in).sum(),
        Value::Object(map) => map.values().map(hidden_in).sum(),
        _ => 0,
    }
}

/// `POST /console/approvals`: approves the reviewed definition, then shows the page again.
pub(crate) async fn approve(
    State(console): State<Arc<Console>>,
    Extension(csrf): Extension<Csrf>,
    Form(form): Form<Approve>,
) -> Response {
    if !csrf.matches(&form.csrf) {
        return refused(
            StatusCode::FORBIDDEN,
            "This form has expired (the gateway restarted?) or did not come from the console: \
             nothing was approved. Reload the page and review the change again.",
        );
    }
    let gateway = &console.gateway;
    if let Some(kind) = form.kind.as_deref() {
        return approve_offer(&console, kind, &form).await;
    }
    match gateway.host().pin_state(&form.tool) {
        Some(PinState::Changed { listed, .. }) if listed == form.listed => {}
        _ => {
            return refused(
                StatusCode::CONFLICT,
                "Nothing was approved: this definition is no longer the one waiting (it was \
                 approved already, or changed again since the page was shown). Review the \
                 page again.",
            );
        }
    }
    // The reviewed hash again, compared where the pin is made: a definition that changed
    // between the check above and now is not approved.
    match gateway.approve_reviewed(&form.tool, &form.listed) {
        Ok(true) => {
            tracing::info!(tool = %form.tool, "console: a changed definition approved");
            html::see_other(&format!(
                "{PATH}?approved={}",
                html::query_value(&form.tool)
            ))
        }
        Ok(false) => refused(
            StatusCode::CONFLICT,
            "Nothing was approved: the tool is no longer listed, or its definition changed \
             again since the page was shown. Review the page again.",
        ),
        Err(error) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("The approval could not be saved: {error}"),
        ),
    }
}

/// Approves a waiting prompt, resource or template (`kind`) of the form's upstream.
async fn approve_offer(console: &Console, kind: &str, form: &Approve) -> Response {
    let Some(kind) = OfferKind::ALL.into_iter().find(|k| k.as_str() == kind) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "Nothing was approved: no such kind.",
        );
    };
    let server = form.server.as_deref().unwrap_or_default();
    let approved = console
        .gateway
        .approve_offer_reviewed(server, kind, &form.tool, &form.listed)
        .await;
    match approved {
        Ok(true) => {
            tracing::info!(%server, kind = kind.as_str(), name = %form.tool, "console: a changed definition approved");
            html::see_other(&format!(
                "{PATH}?approved={}",
                html::query_value(&format!("{} {}", kind.as_str(), form.tool))
            ))
        }
        Ok(false) => refused(
            StatusCode::CONFLICT,
            "Nothing was approved: this definition is no longer the one waiting (approved \
             already, or changed again since the page was shown). Review the page again.",
        ),
        Err(error) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("The approval could not be saved: {error}"),
        ),
    }
}

fn refused(status: StatusCode, why: &str) -> Response {
    let body = format!(
        "<p class=\"bad\">{}</p><p><a href=\"{PATH}\">Back to the approvals</a></p>",
        html::escape(why)
    );
    html::page(status, PATH, "Approvals", &body)
}
