//! What the gateway's file is checked for before it runs or is reloaded, beyond its parsing:
//! per-tool settings that cannot work under the server's, and an upstream that is the gateway
//! itself.

use std::net::SocketAddr;
use std::path::Path;

use toolwire_server::Server;

use crate::config::ServeConfig;
use crate::examples;

/// Checks the file's per-tool settings (`gateway.tools`) under its server settings on their
/// own, before the tools they are for exist: a rate limit that cannot work, a cost its bucket
/// never holds. `server`: the running server, else a new one with the default schema limits.
pub(super) fn check_settings(
    server: Option<&Server>,
    settings: &ServeConfig,
    file: &Path,
) -> anyhow::Result<()> {
    let placeholders: Vec<toolwire_server::Tool> = settings
        .tools
        .iter()
        .map(|(name, config)| {
            let placeholder = toolwire_server::Tool::raw(
                name.clone(),
                serde_json::json!({"type": "object"}),
                |_, _| async { toolwire_protocol::CallToolResult::text("") },
            );
            examples::configured_tool(placeholder, config)
        })
        .collect();
    let probe;
    let server = match server {
        Some(server) => server,
        None => {
            probe = Server::builder("toolwire-gateway-check", "0").build()?;
            &probe
        }
    };
    server
        .check_tools(&examples::reconfigure(settings), placeholders)
        .map_err(|e| anyhow::anyhow!("{}: gateway: {e}", file.display()))
}

/// Refuses an upstream whose URL is this gateway's own `--http` address (a loop that would
/// serve `remote__remote__…` without end). A loop through another name or a balancer is found
/// once running, from what the upstream lists (its tools carry this gateway's mark).
pub(super) fn refuse_itself(
    upstreams: &toolwire_host::HostConfig,
    http: Option<SocketAddr>,
    file: &Path,
) -> anyhow::Result<()> {
    let Some(own) = http.filter(|addr| addr.port() != 0) else {
        return Ok(());
    };
    for server in &upstreams.servers {
        let toolwire_host::Transport::Http { url, .. } = &server.transport else {
            continue;
        };
        let Ok(url) = url::Url::parse(url) else {
            continue;
        };
        let port = url.port_or_known_default();
        let local = match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback() || std::net::IpAddr::V4(ip) == own.ip(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback() || std::net::IpAddr::V6(ip) == own.ip(),
            None => false,
        };
        let serves_there = own.ip().is_loopback() || own.ip().is_unspecified() || local;
        if port == Some(own.port()) && local && serves_there {
            anyhow::bail!(
                "{}: the upstream \"{}\" is this gateway's own address ({}): a gateway cannot be its own upstream (point it at another server)",
                file.display(),
                server.name,
                own
            );
        }
    }
    Ok(())
}
