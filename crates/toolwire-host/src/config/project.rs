//! Configuration that came with a project rather than from the person: a cloned repository's
//! `.mcp.json`, `.cursor/mcp.json` or `.vscode/mcp.json`. Whoever wrote it chose the commands
//! it starts, the addresses it sends environment variables to and the rules it sets, so it is
//! used only after the person has seen what it would do and trusted it ([`ProjectFile`],
//! [`TrustStore`]); until then nothing in it is started, expanded or read. Even trusted, it
//! may only narrow what the person allows: its `approval.allow` rules, `"trust": true` and
//! `"audit": {"arguments": "full"}` are set aside ([`HostConfig::set_aside`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::trust::{Decision, TrustError, TrustRecord, TrustStore};
use super::{ConfigError, HostConfig, Origin, Variables, read};

/// One setting of a file, where it is and its value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The server whose entry holds it; `None` at the top of the file.
    pub server: Option<String>,
    /// The key, as a path (`approval.allow`).
    pub key: String,
    /// The value as written (JSON).
    pub value: String,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(server) = &self.server {
            write!(f, "server \"{server}\": ")?;
        }
        write!(f, "\"{}\": {}", self.key, self.value)
    }
}

/// The configuration in `text`; for a project file, with its widening settings set aside.
pub(super) fn parse(
    text: &str,
    file: &Path,
    vars: &Variables,
    origin: Origin,
) -> Result<HostConfig, ConfigError> {
    let (mut config, root) = read::parse(text, file, vars, origin)?;
    if origin == Origin::Project {
        config.set_aside = widening(&root);
        narrow(&mut config);
    }
    Ok(config)
}

/// The settings of a project file that only the person's own configuration may make: rules
/// that allow calls without asking, trust in a server's annotations (which lets its read-only
/// tools run unasked), and audit logs that keep arguments unredacted.
pub(super) fn widening(root: &Map<String, Value>) -> Vec<Setting> {
    let mut found = Vec::new();
    let mut check = |server: Option<&str>, object: &Map<String, Value>| {
        let mut add = |key: &str, value: &Value| {
            found.push(Setting {
                server: server.map(str::to_owned),
                key: key.to_owned(),
                value: value.to_string(),
            });
        };
        if let Some(allow) = object.get("approval").and_then(|a| a.get("allow")) {
            if allow.as_array().is_none_or(|a| !a.is_empty()) {
                add("approval.allow", allow);
            }
        }
        if let Some(trust) = object.get("trust").filter(|t| **t != Value::Bool(false)) {
            add("trust", trust);
        }
        // A project's servers may close their network, nothing more.
        if let Some(Value::Object(sandbox)) = object.get("sandbox") {
            for (key, value) in sandbox {
                let narrows = key == "network"
                    && (value.as_str() == Some("none") || value.is_object() || value.is_array());
                if !narrows && super::read::holds_something(value) {
                    add(&format!("sandbox.{key}"), value);
                }
            }
        }
        if let Some(full) = object
            .get("audit")
            .and_then(|a| a.get("arguments"))
            .filter(|a| a.as_str() != Some("redacted"))
        {
            add("audit.arguments", full);
        }
    };
    check(None, root);
    for (name, entry) in servers(root) {
        if let Value::Object(entry) = entry {
            check(Some(name), entry);
        }
    }
    found
}

/// What [`widening`] names, taken out of a parsed configuration.
pub(super) fn narrow(config: &mut HostConfig) {
    config.approval.allow.clear();
    config.audit.full_arguments = false;
    for server in &mut config.servers {
        server.approval.allow.clear();
        server.trust = false;
        server.sandbox = server.sandbox.narrowed();
    }
}

/// The server entries of a file, in either shape, without judging them.
fn servers(root: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    ["mcpServers", "servers"]
        .into_iter()
        .filter_map(|key| root.get(key)?.as_object())
        .flatten()
}

/// What a project file would do, read from its text without expanding, reading or starting
/// anything: what a person is shown before trusting it. Values are as written, so a
/// `${SECRET}` shows as itself, never as the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The file.
    pub file: PathBuf,
    /// The SHA-256 of its bytes, lowercase hex: what a decision is bound to.
    pub sha256: String,
    /// Its servers, by name.
    pub servers: Vec<ServerReview>,
    /// Its `roots`: the directories its servers would be told they may work in.
    pub roots: Vec<String>,
    /// The rules it sets that apply once trusted: approval `ask`/`deny`, tool filters.
    pub rules: Vec<Setting>,
    /// What it sets that only the person's own configuration may, set aside even when it is
    /// trusted.
    pub set_aside: Vec<Setting>,
}

/// One server of a [`Review`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReview {
    /// Its name.
    pub name: String,
    /// `"disabled": true`: never started or reached.
    pub disabled: bool,
    /// What would be started or reached.
    pub launch: Launch,
    /// The environment variables it would read, and where each goes.
    pub variables: Vec<VariableUse>,
}

/// What a server entry would start or reach, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// A program started on this machine.
    Program {
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Where it would run.
        cwd: Option<String>,
        /// Variables it would be given: (name, value as written).
        env: Vec<(String, String)>,
        /// A file whose variables it would be given.
        env_file: Option<String>,
    },
    /// A server reached over HTTP.
    Remote {
        /// Its address.
        url: String,
        /// Headers sent with every request: (name, value as written).
        headers: Vec<(String, String)>,
    },
    /// Neither a command nor a URL that could be read (the file is refused when loaded).
    Unclear,
}

/// An environment variable a server entry reads (`${NAME}`), and the key it goes into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableUse {
    /// The variable's name.
    pub name: String,
    /// Where its value goes (`headers.Authorization`, `args[2]`, `url`).
    pub key: String,
}

impl Review {
    /// Reads `text` (the bytes of `file`, whose hash is `sha256`) without judging it.
    fn of(text: &str, file: &Path, sha256: &str) -> Result<Review, ConfigError> {
        let error = |message: String| ConfigError {
            file: file.to_owned(),
            server: None,
            key: None,
            message,
        };
        let root: Value =
            serde_json::from_str(text).map_err(|e| error(format!("not JSON: {e}")))?;
        let Value::Object(root) = root else {
            return Err(error("the file must hold a JSON object".to_owned()));
        };
        let mut rules = Vec::new();
        let mut collect = |server: Option<&str>, object: &Map<String, Value>| {
            for (outer, inner) in [
                ("approval", "ask"),
                ("approval", "deny"),
                ("tools", "allow"),
                ("tools", "deny"),
            ] {
                if let Some(value) = object.get(outer).and_then(|o| o.get(inner)) {
                    rules.push(Setting {
                        server: server.map(str::to_owned),
                        key: format!("{outer}.{inner}"),
                        value: value.to_string(),
                    });
                }
            }
        };
        collect(None, &root);
        let mut servers_seen = Vec::new();
        for (name, entry) in servers(&root) {
            let empty = Map::new();
            let entry = entry.as_object().unwrap_or(&empty);
            collect(Some(name), entry);
            servers_seen.push(ServerReview::of(name, entry));
        }
        servers_seen.sort_by(|a, b| a.name.cmp(&b.name));
        let roots = match root.get("roots") {
            Some(Value::Array(items)) => items.iter().map(written).collect(),
            Some(other) => vec![written(other)],
            None => Vec::new(),
        };
        Ok(Review {
            file: file.to_owned(),
            sha256: sha256.to_owned(),
            servers: servers_seen,
            roots,
            rules,
            set_aside: widening(&root),
        })
    }

    /// Every environment variable the file reads, each once, in the order first met.
    pub fn variables(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for variable in self.servers.iter().flat_map(|s| &s.variables) {
            if !names.contains(&variable.name.as_str()) {
                names.push(&variable.name);
            }
        }
        names
    }
}

impl ServerReview {
    fn of(name: &str, entry: &Map<String, Value>) -> ServerReview {
        let text = |key: &str| entry.get(key).map(written);
        let pairs = |key: &str| -> Vec<(String, String)> {
            match entry.get(key) {
                Some(Value::Object(map)) => {
                    map.iter().map(|(k, v)| (k.clone(), written(v))).collect()
                }
                Some(other) => vec![(String::new(), written(other))],
                None => Vec::new(),
            }
        };
        let http = match entry.get("type").and_then(Value::as_str) {
            Some("stdio") => false,
            Some(_) => true,
            None => !entry.contains_key("command") && entry.contains_key("url"),
        };
        let launch = match (http, text("command"), text("url")) {
            (false, Some(command), _) => Launch::Program {
                command,
                args: match entry.get("args") {
                    Some(Value::Array(args)) => args.iter().map(written).collect(),
                    Some(other) => vec![written(other)],
                    None => Vec::new(),
                },
                cwd: text("cwd"),
                env: pairs("env"),
                env_file: text("envFile"),
            },
            (true, _, Some(url)) => Launch::Remote {
                url,
                headers: pairs("headers"),
            },
            _ => Launch::Unclear,
        };
        let mut variables = Vec::new();
        walk_strings(&Value::Object(entry.clone()), "", &mut |key, text| {
            for name in Variables::references(text) {
                variables.push(VariableUse {
                    name,
                    key: key.to_owned(),
                });
            }
        });
        ServerReview {
            name: name.to_owned(),
            disabled: entry.get("disabled") == Some(&Value::Bool(true)),
            launch,
            variables,
        }
    }
}

/// Calls `visit` with every string in `value` and its key path (`headers.Authorization`,
/// `args[2]`).
fn walk_strings(value: &Value, path: &str, visit: &mut dyn FnMut(&str, &str)) {
    match value {
        Value::String(text) => visit(path, text),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_strings(item, &format!("{path}[{i}]"), visit);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk_strings(item, &path, visit);
            }
        }
        _ => {}
    }
}

/// A value as written: a string as itself, anything else as JSON.
fn written(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A project file that cannot be used (yet).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectError {
    /// Nobody has decided about it, or it changed since it was trusted.
    #[error(
        "{}: {} and nothing in it runs until you trust it",
        file.display(),
        if *changed { "this project configuration changed since it was trusted" } else { "this project configuration came with the directory, not from you," }
    )]
    NotTrusted {
        /// The file.
        file: PathBuf,
        /// It was trusted before, with other contents.
        changed: bool,
    },
    /// The person chose not to trust it, as it is now.
    #[error("{}: you chose not to trust this project configuration ({at})", file.display())]
    Refused {
        /// The file.
        file: PathBuf,
        /// When.
        at: String,
    },
    /// Trusted, but it does not read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The decisions could not be read or written.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// A project file, read once: what is reviewed, what is trusted and what is loaded are the
/// same bytes.
#[derive(Debug, Clone)]
pub struct ProjectFile {
    file: PathBuf,
    key: PathBuf,
    text: String,
    sha256: String,
}

impl ProjectFile {
    /// Reads `file`.
    pub fn read(file: impl AsRef<Path>) -> Result<ProjectFile, ConfigError> {
        let file = file.as_ref();
        let error = |e: std::io::Error| ConfigError {
            file: file.to_owned(),
            server: None,
            key: None,
            message: format!("cannot read it: {e}"),
        };
        let bytes = std::fs::read(file).map_err(error)?;
        // Decisions are kept by where the file really is, whatever path led to it.
        let key = std::fs::canonicalize(file).map_err(error)?;
        let text = String::from_utf8(bytes).map_err(|_| ConfigError {
            file: file.to_owned(),
            server: None,
            key: None,
            message: "not UTF-8 text".to_owned(),
        })?;
        Ok(ProjectFile {
            file: file.to_owned(),
            key,
            sha256: crate::util::sha256_hex(text.as_bytes()),
            text,
        })
    }

    /// The file, as it was named.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Where the file really is: what decisions are kept by.
    pub fn canonical(&self) -> &Path {
        &self.key
    }

    /// The SHA-256 of its bytes, lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// What it would do, for a person to read before trusting it.
    pub fn review(&self) -> Result<Review, ConfigError> {
        Review::of(&self.text, &self.file, &self.sha256)
    }

    /// The decision kept for this file as it is now: `None` when there is none, or when the
    /// file changed since.
    pub fn decision(&self, store: &dyn TrustStore) -> Result<Option<Decision>, TrustError> {
        Ok(store
            .get(&self.key)?
            .filter(|record| record.sha256 == self.sha256)
            .map(|record| record.decision))
    }

    /// Keeps `decision` for this file as it is now.
    pub fn decide(&self, store: &dyn TrustStore, decision: Decision) -> Result<(), TrustError> {
        store.set(TrustRecord {
            file: self.key.clone(),
            sha256: self.sha256.clone(),
            decision,
            at: crate::util::now(),
        })
    }

    /// The configuration, if this file as it is now is trusted in `store`.
    pub fn load(&self, store: &dyn TrustStore) -> Result<HostConfig, ProjectError> {
        match store.get(&self.key)? {
            Some(record) if record.sha256 == self.sha256 => match record.decision {
                Decision::Trusted => Ok(self.load_trusted()?),
                Decision::Refused => Err(ProjectError::Refused {
                    file: self.file.clone(),
                    at: record.at,
                }),
            },
            Some(_) => Err(ProjectError::NotTrusted {
                file: self.file.clone(),
                changed: true,
            }),
            None => Err(ProjectError::NotTrusted {
                file: self.file.clone(),
                changed: false,
            }),
        }
    }

    /// The configuration, on the caller's word that the person trusts the file (they were just
    /// asked, or said so for this one command); as a project file, its widening settings set
    /// aside. Variables are expanded from the process environment.
    pub fn load_trusted(&self) -> Result<HostConfig, ConfigError> {
        parse(
            &self.text,
            &self.file,
            &Variables::from_process(&self.file),
            Origin::Project,
        )
    }
}
