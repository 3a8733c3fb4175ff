//! Signing a browser in with the console token: a form, and its POST that sets the session
//! cookie (see [`super::access`]).

use std::sync::Arc;

use axum::extract::FromRequest as _;

use axum::extract::State;
use axum::response::Response;
use axum::{Extension, Form};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::access::{self, Csrf};
use super::{Console, html};

/// The login form's fields.
#[derive(serde::Deserialize)]
pub(crate) struct Login {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// The login form (its CSRF token `csrf`), with `error` above it when the last try failed.
pub(crate) fn form(csrf: &Csrf, status: StatusCode, error: Option<&str>) -> Response {
    html::login_form(&csrf.0, super::LOGIN_PATH, status, error)
}

/// `GET /console/login`.
pub(crate) async fn show(Extension(csrf): Extension<Csrf>) -> Response {
    form(&csrf, StatusCode::OK, None)
}

/// `POST /console/login`: the right token starts a session (its cookie) and goes to the
/// console; wrong ones are throttled per address.
pub(crate) async fn submit(
    State(console): State<Arc<Console>>,
    Extension(csrf): Extension<Csrf>,
    request: axum::extract::Request,
) -> Response {
    let access = &console.access;
    let peer = access::peer(request.extensions());
    let headers = request.headers().clone();
    let Ok(Form(login)) = Form::<Login>::from_request(request, &()).await else {
        return form(
            &csrf,
            StatusCode::BAD_REQUEST,
            Some("That was not the sign-in form."),
        );
    };
    if !csrf.matches(&login.csrf) {
        return form(
            &csrf,
            StatusCode::FORBIDDEN,
            Some("The form has expired (the gateway restarted?): sign in again."),
        );
    }
    if let Some(wait) = access.wait_for(peer) {
        let mut response = form(
            &csrf,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many wrong tokens from this address: try again in {} s.",
                wait.as_secs().max(1)
            )),
        );
        if let Ok(after) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, after);
        }
        return response;
    }
    if !access.token_matches(&login.token) {
        if access.tried_wrong(peer) {
            tracing::warn!(address = ?peer, "console: a sign-in with a wrong token");
        }
        return form(
            &csrf,
            StatusCode::FORBIDDEN,
            Some("That is not the console token."),
        );
    }
    let mut response = html::see_other(super::HOME_PATH);
    if let Ok(cookie) = HeaderValue::from_str(&access.sign_in(access::over_tls(&headers))) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// `POST /console/logout`: ends this browser's session.
pub(crate) async fn sign_out(
    State(console): State<Arc<Console>>,
    Extension(csrf): Extension<Csrf>,
    headers: HeaderMap,
    Form(logout): Form<Login>,
) -> Response {
    if !csrf.matches(&logout.csrf) {
        return form(
            &csrf,
            StatusCode::FORBIDDEN,
            Some("The form has expired: nothing was done."),
        );
    }
    let mut response = html::see_other(super::LOGIN_PATH);
    if let Ok(cookie) = HeaderValue::from_str(&console.access.sign_out(&headers)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}
