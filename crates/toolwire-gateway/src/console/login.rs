//! Signing a browser in with the console token: a form, and its POST that sets the session
//! cookie (see [`super::access`]).

use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::access::Access;
use super::{Console, html};

/// The login form's fields.
#[derive(serde::Deserialize)]
pub(crate) struct Login {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// The login form, with `error` above it when the last try failed.
pub(crate) fn form(access: &Access, status: StatusCode, error: Option<&str>) -> Response {
    let error = error
        .map(|e| format!("<p class=\"bad\">{}</p>", html::escape(e)))
        .unwrap_or_default();
    let body = format!(
        "{error}<p>This console needs its token (the value of the environment variable named \
         by <code>--console-token-env</code>).</p>\
         <form method=\"post\" action=\"{path}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" autofocus>\
         </label> <button type=\"submit\">Sign in</button></form>",
        path = super::LOGIN_PATH,
        csrf = html::escape(access.csrf()),
    );
    html::bare(status, "Sign in to the console", &body)
}

/// `GET /console/login`.
pub(crate) async fn show(State(console): State<Arc<Console>>) -> Response {
    form(&console.access, StatusCode::OK, None)
}

/// `POST /console/login`: the right token sets the session cookie and goes to the console.
pub(crate) async fn submit(
    State(console): State<Arc<Console>>,
    Form(login): Form<Login>,
) -> Response {
    let access = &console.access;
    if !access.csrf_matches(&login.csrf) {
        return form(
            access,
            StatusCode::FORBIDDEN,
            Some("The form has expired (the gateway restarted?): sign in again."),
        );
    }
    if !access.token_matches(&login.token) {
        tracing::warn!("console: a sign-in with a wrong token");
        return form(
            access,
            StatusCode::FORBIDDEN,
            Some("That is not the console token."),
        );
    }
    let mut response = html::see_other(super::HOME_PATH);
    if let Ok(cookie) = HeaderValue::from_str(&access.session_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}
