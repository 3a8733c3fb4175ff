//! The gateway's console as an operator starts it and an intruder meets it: a console token
//! that is missing, too short or easy to guess stops the gateway saying why, never showing the
//! token; each sign-in is a session of its own with a CSRF token of its own, ended by Sign
//! out; wrong tokens are throttled. The console in a real browser is in
//! tests/system_parts/console.rs.

use serde_json::json;

#[path = "support/gateway.rs"]
mod support;

use support::toolwire;

/// What `toolwire gateway` with `--admin` and `--console-token-env NAME` says on stderr when
/// it stops at once, the variable set to `token` (or unset).
fn refused_start(token: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.json");
    std::fs::write(&config, json!({"mcpServers": {}}).to_string()).unwrap();
    let mut command = toolwire(&dir);
    command
        .args(["gateway", "--admin", "127.0.0.1:0", "--console-token-env"])
        .arg("TOOLWIRE_TEST_CONSOLE_TOKEN")
        .arg("--config")
        .arg(&config)
        .env_remove("TOOLWIRE_TEST_CONSOLE_TOKEN")
        .stdin(std::process::Stdio::null());
    if let Some(token) = token {
        command.env("TOOLWIRE_TEST_CONSOLE_TOKEN", token);
    }
    let output = command.output().expect("toolwire runs");
    assert!(!output.status.success(), "it stops");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_console_token_that_is_missing_or_short_stops_the_gateway_saying_so() {
    let unset = refused_start(None);
    assert!(
        unset.contains("TOOLWIRE_TEST_CONSOLE_TOKEN is not set"),
        "{unset}"
    );
    let short = refused_start(Some("hunter2"));
    assert!(short.contains("at least 16"), "{short}");
    assert!(
        !short.contains("hunter2"),
        "the token is never shown: {short}"
    );
    let weak = refused_start(Some("aaaaaaaaaaaaaaaaaaaaaaaa"));
    assert!(weak.contains("too easy to guess"), "{weak}");
    assert!(
        !weak.contains("aaaaaaaa"),
        "the token is never shown: {weak}"
    );
}

/// A POST of `form` to the console at `base` + `path`, with `cookie` if given: the status,
/// the `Set-Cookie` and `Retry-After` headers, and the page.
async fn post(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> (u16, Option<String>, Option<String>, String) {
    let mut request = http
        .post(format!("{base}{path}"))
        .header("origin", base)
        .form(form);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let answer = request.send().await.unwrap();
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (set, retry) = (header("set-cookie"), header("retry-after"));
    (
        answer.status().as_u16(),
        set,
        retry,
        answer.text().await.unwrap(),
    )
}

/// The value of the hidden field `name` in `page`.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name}: {page}"))
        + marker.len();
    page[start..].split('"').next().unwrap().to_owned()
}

#[tokio::test]
async fn each_sign_in_is_its_own_session_and_wrong_tokens_are_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.json");
    std::fs::write(&config, json!({"mcpServers": {}}).to_string()).unwrap();
    let token = "correct-horse-battery-staple-9";
    let mut command = toolwire(&dir);
    command
        .args(["gateway", "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args([
            "--console-token-env",
            "TOOLWIRE_TEST_CONSOLE_TOKEN",
            "--config",
        ])
        .arg(&config)
        .env("TOOLWIRE_TEST_CONSOLE_TOKEN", token);
    let started = support::start(command, "the gateway serves at ");
    let base = started
        .before
        .iter()
        .find_map(|line| line.split("console at ").nth(1))
        .map(|url| url.trim().trim_end_matches("/console").to_owned())
        .unwrap_or_else(|| panic!("no console line in {:?}", started.before));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = http
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    let login_csrf = hidden(&login.text().await.unwrap(), "csrf");

    // Two sign-ins: two sessions, each with its own cookie and CSRF token.
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (status, set, _, _) = post(
            &http,
            &base,
            "/console/login",
            None,
            &[("csrf", &login_csrf), ("token", token)],
        )
        .await;
        assert_eq!(status, 303);
        let set = set.expect("a session cookie");
        assert!(
            set.contains("HttpOnly") && set.contains("Max-Age="),
            "{set}"
        );
        let cookie = set.split(';').next().unwrap().to_owned();
        let page = http
            .get(format!("{base}/console"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        sessions.push((cookie, hidden(&page, "csrf")));
    }
    let [(one, one_csrf), (two, two_csrf)] = [sessions[0].clone(), sessions[1].clone()];
    assert_ne!(one, two);
    assert_ne!(one_csrf, two_csrf);
    // One session's CSRF token does nothing for the other.
    let (status, _, _, _) = post(
        &http,
        &base,
        "/console/logout",
        Some(&two),
        &[("csrf", &one_csrf)],
    )
    .await;
    assert_eq!(status, 403);
    // Signed out, a cookie opens nothing; the other session goes on.
    let (status, _, _, _) = post(
        &http,
        &base,
        "/console/logout",
        Some(&one),
        &[("csrf", &one_csrf)],
    )
    .await;
    assert_eq!(status, 303);
    let status = |cookie: String| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let page = http.get(format!("{base}/console/tools"));
            page.header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(one).await, 401);
    assert_eq!(status(two).await, 200);

    // Wrong tokens: a few are answered and said, then this address waits.
    let mut codes = Vec::new();
    let mut waited = None;
    for i in 0..12 {
        let (code, _, retry, _) = post(
            &http,
            &base,
            "/console/login",
            None,
            &[("csrf", &login_csrf), ("token", &format!("guess-{i}"))],
        )
        .await;
        codes.push(code);
        waited = waited.or(retry);
    }
    assert_eq!(&codes[..5], [403; 5], "{codes:?}");
    assert!(codes[5..].iter().all(|c| *c == 429), "{codes:?}");
    assert!(waited.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s > 0 && s <= 60)));
    // Even the right token waits now, from this address.
    let (code, _, _, _) = post(
        &http,
        &base,
        "/console/login",
        None,
        &[("csrf", &login_csrf), ("token", token)],
    )
    .await;
    assert_eq!(code, 429);
    drop(started.child);
    let said: Vec<String> = started.lines.try_iter().collect();
    let wrong = said.iter().filter(|l| l.contains("wrong token")).count();
    assert!(wrong <= 5, "each wrong token said: {said:?}");
}
