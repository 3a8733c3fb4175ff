//! The host's configuration: the `mcpServers` JSON that Claude Desktop, Claude Code
//! (`.mcp.json`) and Cursor read, VS Code's `servers` shape, and Toolwire's own keys beside
//! them, per server and for the whole host.
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "time": {
//!       "command": "uvx", "args": ["mcp-server-time"],
//!       "prefix": "time", "trust": true, "timeoutMs": 30000,
//!       "tools": { "deny": ["convert_*"], "timeoutMs": { "convert_time": 5000 } },
//!       "approval": { "allow": ["time__get_current_time"] }
//!     },
//!     "docs": { "type": "http", "url": "https://docs.example/mcp",
//!               "headers": { "Authorization": "Bearer ${DOCS_TOKEN}" } },
//!     "crm": { "url": "https://crm.example/mcp",
//!              "oauth": { "clientId": "toolwire", "scope": "crm:read" } }
//!   },
//!   "approval": { "deny": ["*__delete_*"] },
//!   "roots": ["${workspaceFolder}"],
//!   "audit": { "redactKeys": ["ssn"], "redactPatterns": { "employee-id": "\\bE[0-9]{6}\\b" } }
//! }
//! ```
//!
//! `${VAR}`, `${VAR:-default}` and `${env:VAR}` are expanded in commands, arguments,
//! environment values, working directories, URLs and header values, the way those hosts do;
//! `${workspaceFolder}` and `${userHome}` as VS Code does. A variable that is not set (and has
//! no default) is an error, never an empty string. Every error names the file, the server and
//! the key.
//!
//! A file that came with a project (a cloned repository's `.mcp.json`) is read as a
//! [`ProjectFile`]: reviewed ([`Review`]) and trusted ([`TrustStore`]) before anything in it is
//! started or expanded, and even then only able to narrow the approval rules
//! ([`Origin::Project`]). Keys Toolwire does not know are refused with the nearest known one
//! (a misspelled `"aproval"` is never skipped); keys of other hosts' formats it knowingly
//! leaves alone are listed in [`HostConfig::ignored`].
//!
//! An HTTP server without an `Authorization` header is authorized by OAuth when it challenges
//! (with the host's credential store and authorizer, [`HostOptions::oauth`]); `"oauth"` sets
//! a registered client (`clientId`, `clientSecret`, its `issuer`), the `scope`, or
//! `"grant": "client_credentials"` for a machine client, and `"oauth": false` turns it off.
//! `"tokenExchange"` (with `clientId`, a `clientSecret` from the environment and `issuer`) is
//! for `toolwire gateway`: each call for a caller goes with a token exchanged for that caller's
//! own at `issuer` (RFC 8693), never the caller's token itself.
//!
//! [`HostOptions::oauth`]: crate::HostOptions::oauth

mod expand;
mod keys;
mod project;
mod read;
mod sandbox;
mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use expand::Variables;
pub use keys::IgnoredKey;
pub use project::{Launch, ProjectError, ProjectFile, Review, ServerReview, Setting, VariableUse};
pub use sandbox::{SandboxSetting, SandboxStatus};
pub use trust::{Decision, FileTrust, MemoryTrust, TrustError, TrustRecord, TrustStore};

/// Who wrote a configuration file, which decides what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// The person's own configuration (in their configuration directory, or a file they named):
    /// every key applies.
    #[default]
    Own,
    /// A file that came with a project: used once trusted, and only to narrow the approval
    /// rules and trust the person's own configuration sets.
    Project,
}

/// A configuration file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// The servers, ordered by name; disabled ones are left out.
    pub servers: Vec<ServerConfig>,
    /// Approval rules for every server's tools, checked with each server's own.
    pub approval: ApprovalRules,
    /// What the audit log keeps of arguments.
    pub audit: AuditConfig,
    /// The directories servers may work in (the top-level `roots` key: paths, variables
    /// expanded, relative ones from the file's directory); empty when the file names none.
    pub roots: Vec<PathBuf>,
    /// The file read.
    pub file: PathBuf,
    /// Keys of other hosts' formats that Toolwire does not read and left alone: worth naming
    /// to a person, since a setting they expected to apply does not.
    pub ignored: Vec<IgnoredKey>,
    /// Who wrote the file.
    pub origin: Origin,
    /// What a project file set that only the person's own configuration may, left out.
    pub set_aside: Vec<Setting>,
}

/// What the audit log keeps of a call's arguments (the top-level `audit` key):
/// `{"arguments": "redacted" | "full", "redactKeys": [globs], "redactPatterns": {kind: regex}}`.
/// By default arguments are redacted with [`crate::audit::DEFAULT_REDACTED_KEYS`] and the
/// default secret patterns; the lists here are added to those.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuditConfig {
    /// Arguments are logged as sent, nothing redacted (`"arguments": "full"`).
    pub full_arguments: bool,
    /// More argument names whose values are never logged: globs, case-insensitive.
    pub redact_keys: Vec<String>,
    /// More patterns redacted inside strings: (kind, regular expression), shown as
    /// `[REDACTED:kind]`.
    pub redact_patterns: Vec<(String, String)>,
}

/// One server of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its name in the file.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// What its tools' and prompts' qualified names start with (`prefix__tool`), and the
    /// authority of its resources' URIs (`toolwire://prefix/URI`, [`crate::uris`]): the
    /// configured `prefix`, else the server's name with every character outside
    /// `[A-Za-z0-9_-]` made `_`. No two servers' prefixes are the same ignoring case. Empty
    /// (`"prefix": ""`) only for the only server: its tools under their own names.
    pub prefix: String,
    /// Which of its tools the model may see.
    pub tools: ToolFilter,
    /// Whether its annotations (`readOnlyHint` and the rest) may be relied on. Off unless
    /// configured: an untrusted server's hints are shown, never acted on.
    pub trust: bool,
    /// The time limit of each call to it, if configured.
    pub timeout: Option<Duration>,
    /// Time limits of single tools (by the server's name for them), over `timeout`
    /// (`"tools": {"timeoutMs": {"slow_tool": 120000}}`).
    pub tool_timeouts: BTreeMap<String, Duration>,
    /// Approval rules for its tools.
    pub approval: ApprovalRules,
    /// The sandbox a stdio server starts in (`"sandbox"` in its entry; X-03).
    pub sandbox: SandboxSetting,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking over its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the host's environment.
        env: BTreeMap<String, String>,
        /// Where it runs, if not the host's own working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request (for example `Authorization`).
        headers: BTreeMap<String, String>,
        /// How it is authorized when it challenges.
        oauth: OAuthSettings,
    },
}

/// How an HTTP server is authorized when it challenges (`"oauth"` in its entry). The default:
/// OAuth with a registered identity per authorization server, found or made (dynamic
/// registration), unless the entry sets an `Authorization` header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthSettings {
    /// `"oauth": false`: never authorize; or an `Authorization` header is configured.
    pub disabled: bool,
    /// A client registered beforehand (`clientId`).
    pub client_id: Option<String>,
    /// Its secret (`clientSecret`), for a confidential client.
    pub client_secret: Option<String>,
    /// The authorization server it is registered at (`issuer`); without it, the one the server
    /// names first.
    pub issuer: Option<String>,
    /// The scope to ask for instead of the server's (`scope`).
    pub scope: Option<String>,
    /// `"grant": "client_credentials"`: a machine client, no person (needs `clientId`).
    pub client_credentials: bool,
    /// `"tokenExchange"`: a gateway's calls for its callers go with a token exchanged for
    /// each caller's own (RFC 8693) by the client `clientId` at `issuer`; the gateway's own
    /// requests (listing, subscribing) stay with the other settings.
    pub token_exchange: Option<TokenExchangeSettings>,
}

/// What a gateway asks the authorization server for when it exchanges a caller's token for
/// an upstream's (`"oauth": {"tokenExchange": true | {"resource", "audience", "scope"}}`, with
/// `clientId`, `clientSecret` from the environment, and `issuer` beside it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenExchangeSettings {
    /// The `resource` the token is for (RFC 8707); the upstream's URL when `None`.
    pub resource: Option<String>,
    /// The `audience` to name too, if the authorization server wants one.
    pub audience: Option<String>,
    /// The `scope` to ask for; the authorization server's choice when `None`.
    pub scope: Option<String>,
}

/// Which tools of a server the model may see: those matching an `allow` glob (every tool when
/// there is none) and no `deny` glob. The globs match the tool's own name, as the server
/// lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Globs of tools to keep; empty keeps every tool.
    pub allow: Vec<String>,
    /// Globs of tools to drop; they win over `allow`.
    pub deny: Vec<String>,
}

/// Approval rules in three classes, `deny` over `ask` over `allow`, as globs over qualified
/// names (`prefix__tool`; `*` matches any run of characters, `?` one). A call that matches no
/// rule is asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalRules {
    /// Calls made without asking.
    pub allow: Vec<String>,
    /// Calls always asked about, even when an `allow` rule or a trusted annotation matches.
    pub ask: Vec<String>,
    /// Calls refused; the model is told why.
    pub deny: Vec<String>,
}

/// A configuration that cannot be used: the file, the server and the key, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}: {message}", file.display(), server.as_ref().map(|s| format!(": server \"{s}\"")).unwrap_or_default(), key.as_ref().map(|k| format!(": key \"{k}\"")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// The server, when the problem is in one.
    pub server: Option<String>,
    /// The key, as a path (`args[2]`, `headers.Authorization`).
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl HostConfig {
    /// Reads `file` as the person's own configuration, expanding variables from the process
    /// environment; `${workspaceFolder}` is the file's directory (its parent, for a file in
    /// `.vscode/`). A file that came with a project is read with [`ProjectFile`] instead.
    pub fn load(file: impl AsRef<Path>) -> Result<HostConfig, ConfigError> {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).map_err(|e| ConfigError {
            file: file.to_owned(),
            server: None,
            key: None,
            message: format!("cannot read it: {e}"),
        })?;
        HostConfig::parse(&text, file, &Variables::from_process(file))
    }

    /// Reads configuration `text` as if from the person's own `file`, expanding with
    /// `variables`.
    pub fn parse(
        text: &str,
        file: impl AsRef<Path>,
        variables: &Variables,
    ) -> Result<HostConfig, ConfigError> {
        project::parse(text, file.as_ref(), variables, Origin::Own)
    }

    /// [`HostConfig::parse`] for a file of `origin`: a project file's widening settings are
    /// set aside.
    pub fn parse_as(
        text: &str,
        file: impl AsRef<Path>,
        variables: &Variables,
        origin: Origin,
    ) -> Result<HostConfig, ConfigError> {
        project::parse(text, file.as_ref(), variables, origin)
    }

    /// A configuration of one server, as named on a command line: nothing else is configured.
    pub fn one_server(server: ServerConfig, file: impl Into<PathBuf>) -> HostConfig {
        HostConfig {
            servers: vec![server],
            approval: ApprovalRules::default(),
            audit: AuditConfig::default(),
            roots: Vec::new(),
            file: file.into(),
            ignored: Vec::new(),
            origin: Origin::Own,
            set_aside: Vec::new(),
        }
    }

    /// Where a host keeps this configuration's pins and "allow always" answers, given its
    /// state directory `dir`: `dir` itself for the person's own configuration, and
    /// `dir/projects/HASH` for a project's file (by the hash of where the file really is). A
    /// project's server may share a name, and even its tool definitions, with a server of
    /// the person's, but not what the person approved of theirs.
    pub fn state_dir_in(&self, dir: &Path) -> PathBuf {
        match self.origin {
            Origin::Own => dir.to_owned(),
            Origin::Project => {
                let file = std::fs::canonicalize(&self.file).unwrap_or_else(|_| self.file.clone());
                let hash = crate::util::sha256_hex(file.as_os_str().as_encoded_bytes());
                dir.join("projects").join(&hash[..16])
            }
        }
    }

    /// The server called `name`.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests;
