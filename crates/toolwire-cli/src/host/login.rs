//! Signing in to protected servers (OAuth): `toolwire login SERVER`, `toolwire logout SERVER`,
//! and the sign-in any command starts when a server challenges it at a terminal. Identities
//! and tokens are kept in `credentials.json` in the state directory (mode 0600), per
//! authorization server and resource; the person signs in in a browser, whose redirect comes
//! back to a listener on 127.0.0.1.

use anyhow::{Context as _, bail};
use toolwire_client::auth::{CredentialStore as _, FileStore};
use toolwire_host::{ServerState, Transport};

use super::open::{Servers, SignIn};
use super::{ConfigArgs, ConnectArgs, HostArgs};
use crate::terminal::{Layout, out, visible};
use crate::ui::{Consent, Tone, Ui};

/// The configured (or named) HTTP server `server`: its name and URL.
async fn http_server(
    args: &HostArgs,
    server: &str,
    ui: &Ui,
) -> anyhow::Result<(toolwire_host::HostConfig, String)> {
    let one_off = args.one_off(Some(server));
    let mut config = args.configuration(one_off, ui).await?;
    if one_off.is_none() {
        config.servers.retain(|s| s.name == server);
    }
    let Some(entry) = config.servers.first() else {
        bail!(
            "no server named {server:?} in {} (`toolwire servers` lists them)",
            config.file.display()
        );
    };
    let url = match &entry.transport {
        Transport::Http { url, oauth, .. } => {
            if oauth.disabled {
                bail!(
                    "{server}: OAuth is off for this server (its entry sets an Authorization \
                     header, or \"oauth\": false)"
                );
            }
            url.clone()
        }
        Transport::Stdio { .. } => bail!(
            "{server} is a stdio server: OAuth is for HTTP servers (a stdio server takes its \
             credentials from its environment)"
        ),
    };
    Ok((config, url))
}

/// `toolwire login SERVER`: connects to the server, signing in when it asks, and says with
/// what.
pub(crate) async fn login(args: &HostArgs, server: &str) -> anyhow::Result<()> {
    let ui = Ui::new(Consent::Ask);
    let (config, _) = http_server(args, server, &ui).await?;
    let host = args
        .open_with(
            &config,
            Servers::named(args.one_off(Some(server))),
            &ui,
            SignIn::Allowed,
        )
        .await?;
    let status = host.servers().first().cloned().context("no server")?;
    host.close().await;
    let name = visible(&status.name, Layout::Line);
    if let ServerState::Failed { error } = &status.state {
        bail!("{name}: {}", visible(error, Layout::Line));
    }
    let Some(authorized) = status.authorized else {
        return Ok(out(&format!(
            "{name} did not ask for authorization: there is nothing to sign in to"
        ))?);
    };
    let mut line = format!(
        "{} to {name} at {}",
        ui.paint_out(Tone::Green, "signed in"),
        visible(&authorized.issuer, Layout::Line)
    );
    if let Some(scope) = &authorized.scope {
        line.push_str(&format!(", scope {}", visible(scope, Layout::Line)));
    }
    if let Some(expires) = authorized.expires_at {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        line.push_str(&format!(
            "; the token lasts {} more minutes",
            expires.saturating_sub(now).div_ceil(60)
        ));
    }
    if authorized.refreshable {
        line.push_str(" and is renewed without asking");
    }
    Ok(out(&line)?)
}

/// `toolwire logout SERVER`: forgets the server's tokens (the client's registration at the
/// authorization server is kept, so the next sign-in does not register again).
pub(crate) async fn logout(config: &ConfigArgs, server: &str) -> anyhow::Result<()> {
    // Nothing is connected to: the configuration (or the URL) only says which tokens.
    let args = ConnectArgs {
        config: config.clone(),
        connection: Default::default(),
    }
    .host();
    let (_, url) = http_server(&args, server, &Ui::new(Consent::Ask)).await?;
    let file = crate::signin::credentials_file(&args.state_dir()?);
    let forgotten = FileStore::new(&file).forget(&url)?;
    let name = visible(server, Layout::Line);
    Ok(out(&match forgotten {
        0 => format!("no tokens were kept for {name}"),
        1 => format!("forgot the token of {name}"),
        n => format!("forgot {n} tokens of {name}"),
    })?)
}
