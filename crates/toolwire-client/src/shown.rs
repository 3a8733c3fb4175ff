//! URLs as errors and logs show them: without the user info, query and fragment, where a
//! credential may sit (`https://user:pw@…`, `?token=…`). Below the transports and the OAuth
//! client, which both describe failed requests with it.

/// `url` as errors and logs show it: without user info, query or fragment, which may hold a
/// credential (`?token=…`, `?api_key=…`) that must not reach a caller, a health check or an
/// audit log.
pub(crate) fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_fragment(None);
    if shown.query().is_some() {
        shown.set_query(None);
        return format!("{shown}?…");
    }
    shown.to_string()
}

/// A URL-ish text that did not parse, as errors show it: up to its query or fragment, and
/// without anything before an `@` in its authority.
pub(crate) fn shown_text(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let mut shown = url[..end].to_owned();
    if let Some(scheme_end) = shown.find("://") {
        let authority_end = shown[scheme_end + 3..]
            .find('/')
            .map_or(shown.len(), |at| scheme_end + 3 + at);
        if let Some(at) = shown[scheme_end + 3..authority_end].rfind('@') {
            shown.replace_range(scheme_end + 3..scheme_end + 4 + at, "");
        }
    }
    if end < url.len() {
        shown.push_str("?…");
    }
    shown
}

/// A reqwest error as text, its URL shown by [`shown_url`].
pub(crate) fn shown_error(error: &reqwest::Error) -> String {
    let text = error.to_string();
    match error.url() {
        Some(url) => text.replace(url.as_str(), &shown_url(url)),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_credentials_query_or_fragment() {
        let url = reqwest::Url::parse("https://ann:pw@mcp.example/mcp?token=s3cret#x").unwrap();
        assert_eq!(shown_url(&url), "https://mcp.example/mcp?…");
        let plain = reqwest::Url::parse("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!(shown_url(&plain), "http://127.0.0.1:8080/mcp");
        assert_eq!(
            shown_text("http://ann:pw@host:bad/mcp?token=s3cret"),
            "http://host:bad/mcp?…"
        );
        assert_eq!(shown_text("not a url"), "not a url");
    }
}
