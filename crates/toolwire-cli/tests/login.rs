//! `toolwire login` and `logout` against a real authorization server (npm `oidc-provider`,
//! with its own login and consent pages) guarding a Toolwire server on 127.0.0.1, driven as a
//! person does: the command runs in a pseudo-terminal and prints the address, the "browser"
//! (a cookie jar that fills in the pages) goes there and comes back to the command's loopback
//! port. Then commands without a terminal use the kept token, and after `logout` they say how
//! to sign in again. The provider is on plain http at another origin than the server, so every
//! command here passes `--insecure-oauth-http`; without it the sign-in is refused, and the
//! error names the flag.

use std::time::Duration;

use expectrl::Session;
use serde_json::json;
use toolwire_server::http::{HttpConfig, OAuth};
use toolwire_server::{RequestContext, Server, Tool};

#[path = "support/home.rs"]
mod home;
#[path = "../../toolwire-client/tests/support/oidc.rs"]
mod oidc;
#[path = "support/pty.rs"]
mod pty;
use home::{Home, text};
use oidc::{Browser, Provider};
use pty::{finish, see};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// The development opt-in: the provider is on plain http at another origin.
const DEV: &str = "--insecure-oauth-http";

#[test]
fn login_keeps_a_token_that_later_commands_use_until_logout() {
    let provider = Provider::start(&[("OIDC_INTERACTIONS", "pages")]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let server = Server::builder("crm", "1")
            .tool(Tool::new("hello", |_: NoArgs, _: RequestContext| async {
                "hello"
            }))
            .build()
            .unwrap();
        let guard = OAuth::new(&provider.issuer, url.clone()).scopes_supported(["tools:read"]);
        tokio::spawn(toolwire_server::http::serve(
            server,
            listener,
            HttpConfig::default().oauth(guard),
        ));
        url
    });
    let home = Home::empty("login");
    let config = json!({"mcpServers": {"crm": {"url": url}}});
    std::fs::write(home.0.path().join("mcp.json"), config.to_string()).unwrap();

    // An authorization server on plain http elsewhere than the server is refused unless
    // allowed for development, and the error says how.
    let output = home.run(&["login", "crm"]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(&provider.issuer), "{err}");
    assert!(err.contains("plain http"), "{err}");
    assert!(err.contains("--insecure-oauth-http"), "{err}");
    assert!(
        !home.0.path().join("state/credentials.json").exists(),
        "nothing was registered"
    );

    // Without a terminal nobody can sign in: the error says how.
    let output = home.run(&["call", "crm__hello", "--yes", DEV]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("toolwire login"), "{err}");

    // `toolwire login crm` at a terminal: the address is shown; the person signs in.
    let mut session = Session::spawn(home.command(&["login", "crm", DEV])).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    let asked = see(&mut session, "  open  ");
    let site = provider.issuer.trim_start_matches("http://");
    assert!(
        asked.contains(&format!(
            "crm asks you to sign in at its authorization server, {site}."
        )),
        "{asked}"
    );
    let address = see(&mut session, "\r\n").trim().to_owned();
    assert!(
        address.starts_with(&format!("{}/auth?", provider.issuer)),
        "{address}"
    );
    let redirect_uri = oidc::redirect_uri(&address);
    assert!(
        redirect_uri.starts_with("http://127.0.0.1:"),
        "{redirect_uri}"
    );
    let pages = runtime.block_on(async {
        let mut browser = Browser::default();
        assert_eq!(browser.authorize(&address, &provider.issuer).await, 200);
        browser.pages
    });
    assert!(pages.iter().any(|p| p.contains("name=\"password\"")));
    see(
        &mut session,
        &format!("signed in to crm at {}", provider.issuer),
    );
    assert_eq!(finish(session), 0);

    // The credentials are the user's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let file = home.0.path().join("state/credentials.json");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // Later commands, even without a terminal, use the kept token.
    let output = home.run(&["call", "crm__hello", "--yes", DEV]);
    let (out, err) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(out.trim(), "hello");
    assert!(!err.contains("sign in"), "{err}");
    let output = home.run(&["servers", DEV]);
    let (out, _) = text(&output);
    assert!(
        out.contains(&format!("signed in at {}", provider.issuer)),
        "{out}"
    );

    // So does a command given the URL.
    let output = home.run(&["discover", &url, DEV]);
    let (out, err) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(out.contains("crm"), "{out}");

    // `logout` forgets it; then the commands say how to sign in again.
    let output = home.run(&["logout", "crm"]);
    let (out, err) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(out.trim(), "forgot the token of crm");
    for args in [&["tools", DEV][..], &["discover", &url, DEV]] {
        let output = home.run(args);
        let (_, err) = text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("toolwire login"), "{args:?}: {err}");
    }

    // Mistakes are named.
    let output = home.run(&["login", "nowhere"]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(err.contains("no server named \"nowhere\""), "{err}");
}
