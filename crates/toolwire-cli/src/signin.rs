//! Where the terminal host keeps its state, and how a person signs in to a protected server
//! from it: the address shown on stderr and opened in a browser, the redirect caught on
//! 127.0.0.1. Used by the host commands (`host/`) and by the one-server commands
//! (`target.rs`); `host/login.rs` holds `toolwire login` and `logout`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolwire_client::auth::http::check_authorization_endpoint;
use toolwire_client::auth::{Authorizer, LoopbackAuthorizer, UrlError};
use toolwire_host::AuthorizerFor;

use crate::private::Chosen;
use crate::terminal::{Layout, note, visible};
use crate::ui::{Tone, Ui};

/// The state directory: `explicit` (`--state-dir`, TOOLWIRE_STATE_DIR), else
/// $XDG_STATE_HOME/toolwire, else ~/.local/state/toolwire; created private (the default one
/// made private if it is not: see `private::dir`).
pub(crate) fn state_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let (dir, chosen) = state_dir_chosen(explicit)?;
    // A directory that cannot be made is reported by what writes in it, if anything does.
    if let Err(e) = crate::private::dir(&dir, chosen) {
        tracing::debug!("cannot create the state directory {}: {e}", dir.display());
    }
    Ok(dir)
}

/// The state directory, for a command that only reads it: not created when missing.
pub(crate) fn state_dir_to_read(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    Ok(state_dir_chosen(explicit)?.0)
}

fn state_dir_chosen(explicit: Option<&Path>) -> anyhow::Result<(PathBuf, Chosen)> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let (dir, chosen) = match (explicit, var("XDG_STATE_HOME"), var("HOME")) {
        (Some(dir), _, _) => (dir.to_owned(), Chosen::ByPerson),
        (None, Some(state), _) => (PathBuf::from(state).join("toolwire"), Chosen::ByToolwire),
        (None, None, Some(home)) => (
            PathBuf::from(home).join(".local/state/toolwire"),
            Chosen::ByToolwire,
        ),
        (None, None, None) => {
            anyhow::bail!("no HOME or XDG_STATE_HOME to keep state in: pass --state-dir DIR")
        }
    };
    Ok((dir, chosen))
}

/// The file of identities and tokens in the state directory.
pub(crate) fn credentials_file(state_dir: &Path) -> PathBuf {
    state_dir.join("credentials.json")
}

/// The authorizer of each server: the site and the address are shown on stderr (and opened
/// in a browser), and the browser's redirect is awaited on 127.0.0.1.
pub(crate) fn authorizer_for(ui: &Arc<Ui>) -> AuthorizerFor {
    let ui = ui.clone();
    Arc::new(move |server: &str| -> Arc<dyn Authorizer> {
        let (ui, server) = (ui.clone(), server.to_owned());
        Arc::new(LoopbackAuthorizer::new(move |url: &str| {
            ui.end_progress();
            let server = ui.paint(Tone::Bold, &visible(&server, Layout::Line));
            // The library hands over only https pages or pages on this machine; checked again
            // here, as nothing else may reach the opener.
            let site = match sign_in_site(url) {
                Ok(site) => site,
                Err(why) => {
                    note(&format!(
                        "toolwire: {server} asks you to sign in at {}: not opened ({})",
                        visible(url, Layout::Line),
                        visible(&why.to_string(), Layout::Line)
                    ));
                    return;
                }
            };
            note(&format!(
                "toolwire: {server} asks you to sign in at its authorization server, {}.",
                ui.paint(Tone::Bold, &visible(&site, Layout::Line))
            ));
            note(&format!("  open  {}", visible(url, Layout::Line)));
            note("  waiting up to 5 minutes for the browser to come back here (Ctrl-C gives up)");
            crate::ui::open_in_browser(url);
        }))
    })
}

/// The site (host, and port when it is not the scheme's) of a sign-in page that may be
/// opened: `https:`, or `http:` on this machine. An internationalized name is shown in its
/// ASCII form, so a look-alike name does not pass for another.
pub(crate) fn sign_in_site(url: &str) -> Result<String, UrlError> {
    check_authorization_endpoint(url)?;
    let parsed = url::Url::parse(url).ok();
    let host = parsed
        .as_ref()
        .and_then(url::Url::host_str)
        .unwrap_or_default();
    Ok(match parsed.as_ref().and_then(url::Url::port) {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// Whether commands other than `login` may ask the person to sign in: only with a terminal
/// on stderr, where the address can be seen; a script gets an error naming `toolwire login`.
pub(crate) fn signs_in_here() -> bool {
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_of_a_sign_in_page_is_its_host() {
        for (url, site) in [
            (
                "https://auth.example.com/authorize?x=1",
                Some("auth.example.com"),
            ),
            (
                "https://auth.example.com:8443/authorize",
                Some("auth.example.com:8443"),
            ),
            (
                "https://auth.example.com:443/authorize",
                Some("auth.example.com"),
            ),
            ("http://127.0.0.1:5000/auth", Some("127.0.0.1:5000")),
            ("https://аuth.example.com/", Some("xn--uth-5cd.example.com")),
            ("https://auth.example.com@evil.example/", None),
            ("http://auth.example.com/authorize", None),
            ("file:///etc/passwd", None),
        ] {
            assert_eq!(sign_in_site(url).ok().as_deref(), site, "{url}");
        }
    }
}
