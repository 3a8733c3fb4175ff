//! The guides' host example: the servers of a host configuration behind one tool list, each
//! call asked about on the terminal, definitions pinned, calls in an audit log.
//!
//! `cargo run -p toolwire-host --example host -- CONFIG.json [TOOL [ARGUMENTS-JSON]]`

#![allow(clippy::print_stdout)] // an example program prints its results

use std::{future::Future, pin::Pin};

use toolwire_host::{Answer, ApprovalRequest, Approver, Host, HostConfig, HostOptions};

/// Asks on the terminal; a GUI host shows a dialog.
struct AskOnTerminal;

impl Approver for AskOnTerminal {
    fn approve<'a>(
        &'a self,
        call: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move {
            eprintln!(
                "{} wants to run with {} ({})",
                call.qualified, call.arguments, call.reason
            );
            if !call.annotations_trusted {
                let claims = &call.definition["annotations"];
                eprintln!("its annotations are the server's claims: {claims}");
            }
            eprint!("Run it? [y]es / [n]o / [a]lways: ");
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            });
            match line
                .await
                .ok()
                .and_then(Result::ok)
                .as_deref()
                .map(str::trim)
            {
                Some("y") => Answer::AllowOnce,
                Some("a") => Answer::AllowAlways, // for this definition of the tool only
                _ => Answer::Deny("the user said no".to_owned()),
            }
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args
        .next()
        .ok_or("usage: host CONFIG.json [TOOL [ARGUMENTS-JSON]]")?;
    // Your own file: every key applies. A project's file (a cloned repository's .mcp.json) is
    // read with ProjectFile and used only once the person has trusted it.
    let config = HostConfig::load(file)?; // Claude, Cursor or VS Code shape
    let state = format!("{}/.local/state/my-agent", std::env::var("HOME")?);
    let options = HostOptions::new(AskOnTerminal)
        .state_dir(&state) // pins/ and approvals.json
        .audit_log(format!("{state}/audit.jsonl"));
    let host = Host::connect(&config, options).await?; // every server at once
    for server in host.servers() {
        println!("{}: {:?}", server.name, server.state); // Connected { tools } or Failed { error }
    }
    let for_the_model: Vec<_> = host.tools().iter().map(|t| t.for_model()).collect();
    println!("{} tools for the model", for_the_model.len());
    if let Some(tool) = args.next() {
        // e.g. time__get_current_time '{"timezone": "UTC"}'
        let arguments = serde_json::from_str(&args.next().unwrap_or_else(|| "{}".to_owned()))?;
        let result = host.call(&tool, arguments).await;
        println!("{}", serde_json::to_string_pretty(&result)?);
    }
    host.close().await;
    Ok(())
}
