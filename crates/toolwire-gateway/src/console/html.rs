//! The console's HTML (O-11): every untrusted piece escaped on the way in, one page frame with the
//! navigation and a small inline stylesheet, and the headers every answer carries (a strict
//! Content-Security-Policy, no framing, no caching).

use std::fmt::Write as _;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// No script of any origin, no images, fonts or connections; the inline stylesheet only; forms
/// post to the console itself; never framed.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The console's pages, in the order of the navigation: path and title.
const PAGES: [(&str, &str); 4] = [
    ("/console", "Upstreams"),
    ("/console/tools", "Tools"),
    ("/console/approvals", "Approvals"),
    ("/console/audit", "Audit log"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#222}\
header{background:#1d3557;color:#fff;padding:.6em 1em}header a{color:#fff;margin-right:1.2em}\
header a.here{font-weight:bold;text-decoration:none}main{padding:1em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.3em .6em;\
text-align:left;vertical-align:top}th{background:#f1f1f1}.bad{color:#b00020}.ok{color:#1b7f3b}\
.warn{color:#a05a00}pre{white-space:pre-wrap;word-break:break-all;margin:0}\
.was{background:#fde2e2}.now{background:#e2f5e2}.note{background:#eef4ff;padding:.5em}\
form.inline{display:inline}button{padding:.3em .9em}";

/// `text` with the five HTML metacharacters escaped: safe in an element's text and in a
/// quoted attribute value.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for a query string value (then escaped for the attribute by its
/// caller, though nothing in it needs it).
pub(crate) fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// A whole page: the frame with the navigation (`here` marked), the `body` (already HTML).
pub(crate) fn page(status: StatusCode, here: &str, title: &str, body: &str) -> Response {
    let mut nav = String::new();
    for (path, name) in PAGES {
        let class = if path == here { " class=\"here\"" } else { "" };
        let _ = write!(nav, "<a href=\"{path}\"{class}>{name}</a>");
    }
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title} — Toolwire gateway</title><style>{STYLE}</style></head>\
         <body><header><strong>Toolwire gateway</strong> &nbsp; {nav}</header>\
         <main><h1>{title}</h1>\n{body}\n</main></body></html>\n",
        title = escape(title),
    );
    html_response(status, html)
}

/// The login form, posting to `action` with the CSRF token `csrf`, with `error` above it when
/// the last try failed.
pub(crate) fn login_form(
    csrf: &str,
    action: &str,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    let error = error
        .map(|e| format!("<p class=\"bad\">{}</p>", escape(e)))
        .unwrap_or_default();
    let body = format!(
        "{error}<p>This console needs its token (the value of the environment variable named \
         by <code>--console-token-env</code>).</p>\
         <form method=\"post\" action=\"{action}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" autofocus>\
         </label> <button type=\"submit\">Sign in</button></form>",
        csrf = escape(csrf),
    );
    bare(status, "Sign in to the console", &body)
}

/// A bare page without the navigation: the login form and the refusals.
pub(crate) fn bare(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title} — Toolwire gateway</title><style>{STYLE}</style></head>\
         <body><main><h1>{title}</h1>\n{body}\n</main></body></html>\n",
        title = escape(title),
    );
    html_response(status, html)
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A redirect after a POST: the browser GETs `location` (a console path).
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// The headers every console answer carries, whatever its status.
pub(crate) fn harden(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` with a form's POST, and the
    // console could no longer tell its own forms from another site's. `same-origin` still
    // tells other sites nothing.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        for (text, escaped) in [
            ("plain", "plain"),
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
            ),
            ("a \"b\" 'c' & d", "a &quot;b&quot; &#39;c&#39; &amp; d"),
            ("", ""),
        ] {
            assert_eq!(escape(text), escaped, "{text:?}");
        }
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("w__shout"), "w__shout");
        assert_eq!(query_value("a b&c=\"d\""), "a%20b%26c%3D%22d%22");
    }
}
