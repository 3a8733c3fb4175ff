//! Where the terminal host keeps its state, and how a person signs in to a protected server
//! from it: the address shown on stderr and opened in a browser, the redirect caught on
//! 127.0.0.1. Used by the host commands (`host/`) and by the one-server commands
//! (`target.rs`); `host/login.rs` holds `toolwire login` and `logout`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolwire_client::auth::{Authorizer, LoopbackAuthorizer};
use toolwire_host::AuthorizerFor;

use crate::terminal::{Layout, note, visible};
use crate::ui::{Tone, Ui};

/// The state directory: `explicit` (`--state-dir`, TOOLWIRE_STATE_DIR), else
/// $XDG_STATE_HOME/toolwire, else ~/.local/state/toolwire; created private (the default one
/// made private if it is not: see `private::dir`).
pub(crate) fn state_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let (dir, own) = match (explicit, var("XDG_STATE_HOME"), var("HOME")) {
        (Some(dir), _, _) => (dir.to_owned(), false),
        (None, Some(state), _) => (PathBuf::from(state).join("toolwire"), true),
        (None, None, Some(home)) => (PathBuf::from(home).join(".local/state/toolwire"), true),
        (None, None, None) => {
            anyhow::bail!("no HOME or XDG_STATE_HOME to keep state in: pass --state-dir DIR")
        }
    };
    // A directory that cannot be made is reported by what writes in it, if anything does.
    if let Err(e) = crate::private::dir(&dir, own) {
        tracing::debug!("cannot create the state directory {}: {e}", dir.display());
    }
    Ok(dir)
}

/// The file of identities and tokens in the state directory.
pub(crate) fn credentials_file(state_dir: &Path) -> PathBuf {
    state_dir.join("credentials.json")
}

/// The authorizer of each server: the address is shown on stderr (and opened in a browser),
/// and the browser's redirect is awaited on 127.0.0.1.
pub(crate) fn authorizer_for(ui: &Arc<Ui>) -> AuthorizerFor {
    let ui = ui.clone();
    Arc::new(move |server: &str| -> Arc<dyn Authorizer> {
        let (ui, server) = (ui.clone(), server.to_owned());
        Arc::new(LoopbackAuthorizer::new(move |url: &str| {
            ui.end_progress();
            note(&format!(
                "toolwire: {} asks you to sign in at its authorization server.",
                ui.paint(Tone::Bold, &visible(&server, Layout::Line))
            ));
            note(&format!("  open  {}", visible(url, Layout::Line)));
            note("  waiting up to 5 minutes for the browser to come back here (Ctrl-C gives up)");
            crate::ui::open_in_browser(url);
        }))
    })
}

/// Whether commands other than `login` may ask the person to sign in: only with a terminal
/// on stderr, where the address can be seen; a script gets an error naming `toolwire login`.
pub(crate) fn signs_in_here() -> bool {
    std::io::stderr().is_terminal()
}
