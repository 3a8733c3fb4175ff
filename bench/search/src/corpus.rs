//! The corpus of real tool definitions and the queries, as `bench/search` keeps them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde::Deserialize;
use toolwire_protocol::Tool;
use toolwire_search::Entry;

#[derive(Deserialize)]
struct CorpusFile {
    prefix: String,
    tools: Vec<Tool>,
}

/// One query and the tools that do its task, by id (`FILE_STEM/TOOL`).
#[derive(Deserialize, Clone)]
pub(crate) struct Case {
    pub(crate) query: String,
    pub(crate) relevant: Vec<String>,
}

/// A tool of the corpus: its id, and the entry a gateway would serve it as (`PREFIX__NAME`,
/// the prefix its file names).
pub(crate) struct Indexed {
    pub(crate) id: String,
    pub(crate) entry: Entry,
}

/// The directory of `bench/search`.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Every tool of the corpus, in file order.
pub(crate) fn tools() -> anyhow::Result<Vec<Indexed>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir().join("corpus"))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .context("a corpus file's name")?
            .to_owned();
        let parsed: CorpusFile = serde_json::from_slice(&std::fs::read(&file)?)
            .with_context(|| format!("{}", file.display()))?;
        let prefix = parsed.prefix;
        for tool in parsed.tools {
            tools.push(Indexed {
                id: format!("{stem}/{}", tool.name),
                entry: Entry::new(
                    format!("{prefix}__{}", tool.name),
                    prefix.clone(),
                    Arc::new(tool),
                ),
            });
        }
    }
    Ok(tools)
}

/// The queries.
pub(crate) fn cases() -> anyhow::Result<Vec<Case>> {
    Ok(serde_json::from_slice(&std::fs::read(
        dir().join("queries.json"),
    )?)?)
}
