//! `toolwire sandbox COMMAND`: what a local server would be allowed to read, write and reach,
//! and how much of it this kernel enforces, before anything runs.

use anyhow::Context as _;

use crate::target::Named;
use crate::terminal::{Layout, out, visible};

/// `toolwire sandbox`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct SandboxArgs {
    /// The server's command line, quoted ("npx -y @modelcontextprotocol/server-filesystem
    /// ~/notes"). Nothing is started.
    #[arg(value_name = "COMMAND")]
    command: String,
    #[command(flatten)]
    named: Named,
    /// Print the profile as JSON, as the launcher is given it.
    #[arg(long)]
    json: bool,
}

/// Runs `toolwire sandbox`.
pub(crate) fn show(args: &SandboxArgs) -> anyhow::Result<()> {
    let words = shlex::split(&args.command)
        .filter(|w| !w.is_empty())
        .with_context(|| format!("cannot split the command line {:?}", args.command))?;
    let Some(profile) = args.named.sandbox_profile(&args.command, &words) else {
        let status = args.named.sandbox_setting().status(
            &args.command,
            &toolwire_host::Transport::Stdio {
                command: words[0].clone(),
                args: words[1..].to_vec(),
                env: Default::default(),
                cwd: None,
            },
        );
        return Ok(out(&visible(&status.to_string(), Layout::Line))?);
    };
    if args.json {
        return Ok(out(&serde_json::to_string(&profile)?)?);
    }
    Ok(out(&describe(&profile).join("\n"))?)
}

/// What `profile` allows, in lines a person reads, and how much of it this system enforces.
fn describe(profile: &toolwire_sandbox::Profile) -> Vec<String> {
    let mut lines = Vec::new();
    let list = |paths: &[std::path::PathBuf]| -> String {
        paths
            .iter()
            .map(|p| visible(&p.display().to_string(), Layout::Line).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    lines.push(format!("reads:   {}", list(&profile.read)));
    let present: Vec<_> = profile
        .hidden
        .iter()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    lines.push(format!(
        "  but not: {}",
        if present.is_empty() {
            "(none of the hidden paths exists here)".to_owned()
        } else {
            list(&present)
        }
    ));
    lines.push(format!("writes:  {}", list(&profile.write)));
    if let Some(data) = &profile.data {
        lines.push(format!(
            "  and its own directory: {}",
            visible(&data.display().to_string(), Layout::Line)
        ));
    }
    lines.push("  and a private temporary directory (its TMPDIR)".into());
    lines.push(format!(
        "network: {}",
        match &profile.network {
            toolwire_sandbox::Network::None => {
                "none (no TCP or UDP; local sockets only)".to_owned()
            }
            toolwire_sandbox::Network::Tcp(ports) => format!(
                "TCP to port {} only, on any address; no UDP, so no DNS",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            toolwire_sandbox::Network::Hosts(hosts) => format!(
                "{} only, through a filtering proxy from a network of its own; no UDP",
                hosts.join(", ")
            ),
            _ => "any".to_owned(),
        }
    ));
    lines.push(format!(
        "here:    {}",
        match toolwire_sandbox::check(profile) {
            Ok(coverage) => coverage.to_string(),
            Err(e) => format!("not enforceable, the server would not start: {e}"),
        }
    ));
    lines
}
