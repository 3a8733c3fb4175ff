//! `toolwire trust`: the person's decisions about project configurations. `toolwire trust`
//! shows what the project file here would do and trusts it (after a yes at a terminal);
//! `--refuse` keeps it from being used, `--forget` has it asked about again, `--list` shows
//! every decision and whether its file changed since.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use toolwire_host::{Decision, FileTrust, ProjectFile, TrustStore as _};

use super::open::{SEARCH_ORDER, project_file};
use super::project::describe;
use crate::terminal::{Layout, note, out, shown, visible};
use crate::ui::{Consent, Tone, Ui};

/// What `toolwire trust` is asked to do.
#[derive(Args, Debug)]
pub(crate) struct TrustArgs {
    /// The project configuration: default, the first found here of ./.mcp.json,
    /// ./.cursor/mcp.json, ./.vscode/mcp.json.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Do not use the file as it is now (its servers are not started; asked again if it
    /// changes).
    #[arg(long, conflicts_with_all = ["forget", "list"])]
    refuse: bool,
    /// Forget the decision about the file: it is asked about at its next use.
    #[arg(long, conflicts_with = "list")]
    forget: bool,
    /// Every decision kept: trusted or refused, when, and whether the file changed since.
    #[arg(long, conflicts_with = "file")]
    list: bool,
    /// Trust without asking at a terminal (the file is still shown).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Where decisions are kept (trust.json). Default: $XDG_STATE_HOME/toolwire, else
    /// ~/.local/state/toolwire.
    #[arg(long, env = "TOOLWIRE_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// Runs `toolwire trust`.
pub(crate) async fn trust(args: &TrustArgs) -> anyhow::Result<()> {
    let store = FileTrust::new(crate::signin::state_dir(args.state_dir.as_deref())?);
    if args.list {
        return list(&store);
    }
    let file = match &args.file {
        Some(file) => file.clone(),
        None => project_file().with_context(|| {
            format!(
                "no project configuration here ({}); name one: toolwire trust FILE",
                SEARCH_ORDER[..3].join(", ")
            )
        })?,
    };
    let project = ProjectFile::read(&file)?;
    let name = shown(&file);
    if args.forget {
        let forgotten = store.forget(project.canonical())?;
        return Ok(out(&if forgotten {
            format!("forgot the decision about {name}: it is asked about at its next use")
        } else {
            format!("there was no decision about {name}")
        })?);
    }
    let ui = Ui::new(Consent::from_flag(args.yes));
    if args.refuse {
        project.decide(&store, Decision::Refused)?;
        return Ok(out(&format!("{name} will not be used as it is now"))?);
    }
    note(&format!(
        "toolwire: {}\n{}",
        ui.paint(Tone::Bold, &format!("{name} would do this:")),
        describe(&project.review()?, &ui)
    ));
    if ui.interactive && !args.yes {
        let question = format!(
            "{} [y]es / [n]o: ",
            ui.paint(Tone::Bold, "Trust it and start its servers?")
        );
        if ui.choose(&question, &["yes", "no"], None).await != Some("yes") {
            anyhow::bail!("{name} was not trusted");
        }
    }
    project.decide(&store, Decision::Trusted)?;
    Ok(out(&format!(
        "trusted {name} (sha256 {}); you will be asked again if it changes",
        &project.sha256()[..16]
    ))?)
}

/// `--list`: one line a decision.
fn list(store: &FileTrust) -> anyhow::Result<()> {
    let records = store.list()?;
    if records.is_empty() {
        return Ok(out("no decisions about project configurations are kept")?);
    }
    let mut lines = Vec::new();
    for record in records {
        let now = ProjectFile::read(&record.file).ok();
        let state = match now {
            None => " (the file is gone)",
            Some(now) if now.sha256() != record.sha256 => " (changed since: asked again)",
            Some(_) => "",
        };
        let decision = match record.decision {
            Decision::Trusted => "trusted",
            Decision::Refused => "refused",
        };
        lines.push(format!(
            "{decision}  {}  {}{state}",
            record.at,
            visible(&shown(&record.file), Layout::Line)
        ));
    }
    Ok(out(&lines.join("\n"))?)
}
