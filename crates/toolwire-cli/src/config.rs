//! `toolwire serve --config FILE`: a TOML file that configures the served example tools. A bad
//! file stops the command at start with the file, the key and the problem.
//!
//! The example `examples/serve.toml` shows every key; in short:
//!
//! ```toml
//! [auth]                                   # HTTP only: an OAuth 2.1 resource server
//! issuer = "https://id.example.com"        # whose access tokens are accepted (exact string)
//! resource = "https://mcp.example.com/mcp" # this endpoint's canonical URI (the token's aud)
//! # jwks_uri = "https://id.example.com/jwks"   # else found in the issuer's metadata
//! # scopes_supported = ["math"]                # else every scope the tools name
//! # required_scopes = []                       # scopes every request needs
//! # leeway_seconds = 60
//!
//! # [auth.introspection]                   # opaque tokens too (RFC 7662)
//! # client_id = "mcp-server"
//! # client_secret_env = "TOOLWIRE_INTROSPECTION_SECRET"  # the secret, from the environment
//! # endpoint = "https://id.example.com/introspect"      # else from the issuer's metadata
//! # cache_seconds = 60                     # the longest a revoked token keeps working
//! # all_tokens = false                     # true: introspect JWTs as well
//!
//! # [auth.scope_implies]                   # scope hierarchy: a broader scope implies narrower
//! # admin = ["math"]
//!
//! [output]                                 # the output guard, on by default (T-15)
//! # max_result_bytes = 1048576
//! # strip_control_characters = true
//! # redact_secrets = true
//! # default_secret_patterns = true
//! # secret_patterns = { internal-id = "INT-[0-9]{6}" }
//! # link_schemes = ["s3"]                  # besides https, http and the server's own
//! # media_checks = true
//! # off = "why"                            # turns it off for every tool, with the reason
//!
//! [audit]                                  # one JSON line per tools/call (also in the logs)
//! # file = "audit.jsonl"                   # a relative path is in --state-dir
//!
//! [deadlines]                              # how long a tool may run per call
//! # tool_timeout_ms = 60000
//! # off = "why"                            # no limit for tools that set none
//!
//! [limits]                                 # quotas per caller and tool; the HTTP flood limit
//! # tool_calls = 300                       # per tool_period_seconds, per caller and tool
//! # tool_period_seconds = 60
//! # tool_burst = 300                       # how many at once (default tool_calls)
//! # off = "why"                            # no quota for tools that set none
//! # http_requests_per_second = 200         # per client address, 429 beyond
//! # http_burst = 400
//! # http_off = "why"
//! # forwarded_header = "x-forwarded-for"   # the client address, as your proxy sets it
//! #                                        # ("forwarded": RFC 7239); 400 when missing
//! # trusted_proxies = 1                    # proxies in front that add to it
//!
//! [handles]                                # the notes' handles
//! # idle_seconds = 1800                    # valid this long after their last use
//! # max_age_seconds = 86400                # and this long at most
//! # in_memory = false                      # true: not in --data-dir, gone at exit
//!
//! [store]                                  # state shared by several instances (Redis)
//! # url = "redis://127.0.0.1:6379/0"       # or rediss://; --store (TOOLWIRE_STORE) wins
//! # password_env = "TOOLWIRE_REDIS_PASSWORD"   # the password, from the environment
//! # key_prefix = "toolwire:"               # the same on every instance of one service
//! # timeout_ms = 2000                      # past it a call needing the store fails
//!
//! [tools.add]
//! scopes = ["math"]                        # needed to see and call the tool
//! # rate_limit = { calls = 10, period_seconds = 60, burst = 10 }
//! # cost = 1                               # how much of the quota a call uses
//! # no_rate_limit = "why"
//! # raw_output = "why"                     # this tool's results go out unsanitized
//! # timeout_ms = 5000                      # its own limit
//! # no_timeout = "why"                     # no limit for it
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::layers::{HandlesConfig, LimitsConfig, RateLimitConfig};
use crate::store::StoreConfig;
use anyhow::{anyhow, bail};
use serde::Deserialize;
use toolwire_server::OutputGuard;
use toolwire_server::http::OAuth;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeConfig {
    #[serde(default)]
    pub(crate) auth: Option<AuthConfig>,
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, ToolConfig>,
    #[serde(default)]
    pub(crate) output: Option<OutputConfig>,
    #[serde(default)]
    pub(crate) deadlines: Option<DeadlinesConfig>,
    #[serde(default)]
    pub(crate) audit: Option<AuditConfig>,
    #[serde(default)]
    pub(crate) limits: Option<LimitsConfig>,
    #[serde(default)]
    pub(crate) handles: Option<HandlesConfig>,
    #[serde(default)]
    pub(crate) store: Option<StoreConfig>,
    /// The introspection client secret, read from the environment at load.
    #[serde(skip)]
    secret: Option<String>,
}

/// `[auth]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthConfig {
    issuer: String,
    resource: String,
    #[serde(default)]
    jwks_uri: Option<String>,
    #[serde(default)]
    scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default)]
    leeway_seconds: Option<u64>,
    #[serde(default)]
    introspection: Option<IntrospectionConfig>,
    #[serde(default)]
    scope_implies: BTreeMap<String, Vec<String>>,
}

/// `[auth.introspection]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IntrospectionConfig {
    client_id: String,
    /// The name of the environment variable holding the client secret: secrets stay out of
    /// configuration files.
    client_secret_env: String,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    cache_seconds: Option<u64>,
    #[serde(default)]
    all_tokens: bool,
}

/// `[tools.NAME]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolConfig {
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
    /// The reason this tool's output goes out unsanitized.
    #[serde(default)]
    pub(crate) raw_output: Option<String>,
    /// Its own time limit.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// The reason it has no time limit.
    #[serde(default)]
    pub(crate) no_timeout: Option<String>,
    /// Its own quota per caller.
    #[serde(default)]
    pub(crate) rate_limit: Option<RateLimitConfig>,
    /// The reason it has no quota.
    #[serde(default)]
    pub(crate) no_rate_limit: Option<String>,
    /// How much of the quota one call uses.
    #[serde(default)]
    pub(crate) cost: Option<u32>,
}

/// `[audit]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditConfig {
    /// The JSON Lines file audit events are appended to; a relative path is in the data
    /// directory.
    pub(crate) file: Option<std::path::PathBuf>,
}

/// `[deadlines]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeadlinesConfig {
    #[serde(default)]
    pub(crate) tool_timeout_ms: Option<u64>,
    #[serde(default)]
    pub(crate) off: Option<String>,
}

/// `[output]`: the output guard.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputConfig {
    #[serde(default)]
    off: Option<String>,
    #[serde(default)]
    max_result_bytes: Option<usize>,
    #[serde(default = "yes")]
    strip_control_characters: bool,
    #[serde(default = "yes")]
    redact_secrets: bool,
    #[serde(default = "yes")]
    default_secret_patterns: bool,
    #[serde(default)]
    secret_patterns: BTreeMap<String, String>,
    #[serde(default)]
    link_schemes: Vec<String>,
    #[serde(default = "yes")]
    media_checks: bool,
}

fn yes() -> bool {
    true
}

impl OutputConfig {
    /// The guard this section describes.
    pub(crate) fn guard(&self) -> OutputGuard {
        if let Some(reason) = &self.off {
            return OutputGuard::off(reason.clone());
        }
        let mut guard = OutputGuard::default();
        if let Some(max) = self.max_result_bytes {
            guard = guard.max_result_bytes(max);
        }
        if !self.strip_control_characters {
            guard = guard.keep_control_characters();
        }
        if !self.redact_secrets {
            guard = guard.no_redaction();
        }
        if !self.default_secret_patterns {
            guard = guard.without_default_secret_patterns();
        }
        for (kind, regex) in &self.secret_patterns {
            guard = guard.secret_pattern(kind.clone(), regex.clone());
        }
        for scheme in &self.link_schemes {
            guard = guard.allow_link_scheme(scheme.clone());
        }
        if !self.media_checks {
            guard = guard.no_media_checks();
        }
        guard
    }

    /// `[output]`: `off` with its reason, a cap of at least 1 byte, patterns that compile and
    /// link schemes that are URI schemes.
    fn check(&self) -> anyhow::Result<()> {
        if self.off.as_deref().is_some_and(|r| r.trim().is_empty()) {
            bail!("output.off: give the reason the output guard is off");
        }
        if self.max_result_bytes == Some(0) {
            bail!("output.max_result_bytes: must be at least 1");
        }
        for (kind, regex) in &self.secret_patterns {
            OutputGuard::default()
                .without_default_secret_patterns()
                .secret_pattern(kind.clone(), regex.clone())
                .validate()
                .map_err(|e| anyhow!("output.secret_patterns.{kind}: {e}"))?;
        }
        for scheme in &self.link_schemes {
            let ok = scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if !ok {
                bail!("output.link_schemes: {scheme:?} is not a URI scheme");
            }
        }
        Ok(())
    }
}

/// The `"gateway"` object of a `toolwire gateway` file, `file`: the settings of this file
/// (`auth`, `tools`, `output`, `audit`, `deadlines`, `limits`, `store`) under the same names,
/// as JSON.
pub(crate) fn from_json(value: &serde_json::Value, file: &Path) -> anyhow::Result<ServeConfig> {
    let shown = file.display();
    let mut config: ServeConfig =
        serde_json::from_value(value.clone()).map_err(|e| anyhow!("{shown}: gateway: {e}"))?;
    if config.handles.is_some() {
        bail!("{shown}: gateway.handles: a gateway keeps no notes; drop it");
    }
    config
        .check()
        .map_err(|e| anyhow!("{shown}: gateway: {e}"))?;
    config.secret = config
        .read_secret(|name| std::env::var(name).ok())
        .map_err(|e| anyhow!("{shown}: gateway: {e}"))?;
    Ok(config)
}

/// The file `path` whose content is `text`, read and checked: at start and on each reload.
pub(crate) fn parse(text: &str, path: &Path) -> anyhow::Result<ServeConfig> {
    parse_with_env(text, path, |name| std::env::var(name).ok())
}

/// [`parse`] reading secrets through `env`.
fn parse_with_env(
    text: &str,
    path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<ServeConfig> {
    let shown = path.display();
    let mut config: ServeConfig =
        // The parser shows the line and a caret under the column: its lines are kept.
        toml::from_str(text).map_err(|e| {
            crate::terminal::Lines(format!("{shown}: {}", e.to_string().trim_end()))
        })?;
    config.check().map_err(|e| anyhow!("{shown}: {e}"))?;
    config.secret = config
        .read_secret(env)
        .map_err(|e| anyhow!("{shown}: {e}"))?;
    Ok(config)
}

impl ServeConfig {
    /// Every section checked in turn; the first problem names its key.
    fn check(&self) -> anyhow::Result<()> {
        if let Some(auth) = &self.auth {
            auth.check()?;
        }
        for (name, tool) in &self.tools {
            tool.check(name)?;
        }
        if let Some(limits) = &self.limits {
            limits.check()?;
        }
        if let Some(handles) = &self.handles {
            handles.check()?;
        }
        if let Some(store) = &self.store {
            store.check()?;
        }
        if let Some(file) = self.audit.as_ref().and_then(|a| a.file.as_ref()) {
            if file.as_os_str().is_empty() {
                bail!("audit.file: empty");
            }
        }
        if let Some(deadlines) = &self.deadlines {
            deadlines.check()?;
        }
        if let Some(output) = &self.output {
            output.check()?;
        }
        Ok(())
    }

    /// The introspection secret named by `client_secret_env`; an unset or empty variable is an
    /// error naming it.
    fn read_secret(&self, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Option<String>> {
        let Some(introspection) = self.auth.as_ref().and_then(|a| a.introspection.as_ref()) else {
            return Ok(None);
        };
        let name = &introspection.client_secret_env;
        match env(name) {
            Some(secret) if !secret.is_empty() => Ok(Some(secret)),
            _ => bail!(
                "auth.introspection.client_secret_env: the environment variable {name} is unset or empty"
            ),
        }
    }

    /// The resource server `[auth]` asks for, with the scopes the tools name as the supported
    /// ones unless the file lists them.
    pub(crate) fn oauth(&self) -> Option<OAuth> {
        let auth = self.auth.as_ref()?;
        let named: BTreeSet<&String> = self.tools.values().flat_map(|t| &t.scopes).collect();
        let supported: Vec<String> = match &auth.scopes_supported {
            Some(scopes) => scopes.clone(),
            None => named.into_iter().cloned().collect(),
        };
        let mut oauth = OAuth::new(auth.issuer.clone(), auth.resource.clone())
            .scopes_supported(supported)
            .required_scopes(auth.required_scopes.clone());
        if let Some(jwks) = &auth.jwks_uri {
            oauth = oauth.jwks_uri(jwks.clone());
        }
        if let Some(seconds) = auth.leeway_seconds {
            oauth = oauth.leeway(Duration::from_secs(seconds));
        }
        if let (Some(introspection), Some(secret)) = (&auth.introspection, &self.secret) {
            oauth = oauth.introspection(introspection.client_id.clone(), secret.clone());
            if let Some(endpoint) = &introspection.endpoint {
                oauth = oauth.introspection_endpoint(endpoint.clone());
            }
            if let Some(seconds) = introspection.cache_seconds {
                oauth = oauth.introspection_cache(Duration::from_secs(seconds));
            }
            if introspection.all_tokens {
                oauth = oauth.introspect_all_tokens();
            }
        }
        for (broader, narrower) in &auth.scope_implies {
            oauth = oauth.scope_implies(broader.clone(), narrower.clone());
        }
        Some(oauth)
    }

    /// The audit log's file: `[audit] file`, a relative path taken as one in the state
    /// directory (`state_dir`), as every relative audit file of Toolwire's is, so that the
    /// server never writes into wherever it was started.
    pub(crate) fn audit_file(&self, state_dir: Option<&Path>) -> Option<std::path::PathBuf> {
        let file = self.audit.as_ref()?.file.as_ref()?;
        match state_dir {
            Some(dir) if file.is_relative() => Some(dir.join(file)),
            _ => Some(file.clone()),
        }
    }

    /// Whether `[audit] file` is a relative path, which needs the state directory.
    pub(crate) fn audit_is_relative(&self) -> bool {
        self.audit
            .as_ref()
            .and_then(|a| a.file.as_ref())
            .is_some_and(|file| file.is_relative())
    }

    /// What a token for calling `tool` must be, when `[auth]` asks for one: its issuer, its
    /// audience and the scopes the call needs (the tool's and those every request needs).
    pub(crate) fn token_for(&self, tool: &str) -> Option<TokenNeeds<'_>> {
        let auth = self.auth.as_ref()?;
        let scopes = auth
            .required_scopes
            .iter()
            .chain(self.tools.get(tool).into_iter().flat_map(|t| &t.scopes))
            .map(String::as_str)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        Some(TokenNeeds {
            issuer: &auth.issuer,
            resource: &auth.resource,
            scopes,
        })
    }
}

impl AuthConfig {
    /// `[auth]`: addresses, scope names and the introspection client.
    fn check(&self) -> anyhow::Result<()> {
        url("auth.issuer", &self.issuer)?;
        url("auth.resource", &self.resource)?;
        if self.resource.contains('#') {
            bail!("auth.resource: a resource URI has no fragment (RFC 8707)");
        }
        if let Some(jwks) = &self.jwks_uri {
            url("auth.jwks_uri", jwks)?;
        }
        for scope in self
            .scopes_supported
            .iter()
            .flatten()
            .chain(&self.required_scopes)
        {
            scope_name("auth", scope)?;
        }
        if let Some(introspection) = &self.introspection {
            if let Some(endpoint) = &introspection.endpoint {
                url("auth.introspection.endpoint", endpoint)?;
            }
            if introspection.client_id.is_empty() {
                bail!("auth.introspection.client_id: empty");
            }
        }
        for (broader, narrower) in &self.scope_implies {
            let key = format!("auth.scope_implies.{broader}");
            scope_name(&key, broader)?;
            for scope in narrower {
                scope_name(&key, scope)?;
            }
        }
        Ok(())
    }
}

impl ToolConfig {
    /// `[tools.NAME]`: scope names, reasons given for each opt-out, and no contradictions.
    fn check(&self, name: &str) -> anyhow::Result<()> {
        for scope in &self.scopes {
            scope_name(&format!("tools.{name}.scopes"), scope)?;
        }
        if self
            .raw_output
            .as_deref()
            .is_some_and(|r| r.trim().is_empty())
        {
            bail!("tools.{name}.raw_output: give the reason the output goes out unsanitized");
        }
        if self
            .no_timeout
            .as_deref()
            .is_some_and(|r| r.trim().is_empty())
        {
            bail!("tools.{name}.no_timeout: give the reason the tool has no time limit");
        }
        if self.timeout_ms == Some(0) {
            bail!("tools.{name}.timeout_ms: must be at least 1");
        }
        if self.timeout_ms.is_some() && self.no_timeout.is_some() {
            bail!("tools.{name}: timeout_ms and no_timeout together");
        }
        crate::layers::reason(
            &format!("tools.{name}.no_rate_limit"),
            self.no_rate_limit.as_ref(),
        )?;
        if let Some(limit) = &self.rate_limit {
            limit.check(&format!("tools.{name}.rate_limit"))?;
        }
        if self.rate_limit.is_some() && self.no_rate_limit.is_some() {
            bail!("tools.{name}: rate_limit and no_rate_limit together");
        }
        if self.cost == Some(0) {
            bail!("tools.{name}.cost: must be at least 1");
        }
        Ok(())
    }
}

impl DeadlinesConfig {
    /// `[deadlines]`: a limit of at least 1 ms, or `off` with its reason, not both.
    fn check(&self) -> anyhow::Result<()> {
        if self.tool_timeout_ms == Some(0) {
            bail!("deadlines.tool_timeout_ms: must be at least 1");
        }
        if self.off.as_deref().is_some_and(|r| r.trim().is_empty()) {
            bail!("deadlines.off: give the reason tools have no time limit");
        }
        if self.off.is_some() && self.tool_timeout_ms.is_some() {
            bail!("deadlines: tool_timeout_ms and off together");
        }
        Ok(())
    }
}

/// What an access token must be for a call: see [`ServeConfig::token_for`].
pub(crate) struct TokenNeeds<'a> {
    pub(crate) issuer: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) scopes: Vec<&'a str>,
}

fn url(key: &str, value: &str) -> anyhow::Result<()> {
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| anyhow!("{key}: {value:?} is not an http(s) URL"))?;
    if rest.is_empty() || rest.starts_with('/') {
        bail!("{key}: {value:?} has no host");
    }
    Ok(())
}

fn scope_name(key: &str, scope: &str) -> anyhow::Result<()> {
    // RFC 6749 §3.3: scope tokens are printable ASCII without spaces, quotes or backslashes.
    if scope.is_empty()
        || !scope
            .chars()
            .all(|c| ('!'..='~').contains(&c) && c != '"' && c != '\\')
    {
        bail!(
            "{key}: {scope:?} is not a scope (printable ASCII, no spaces, quotes or backslashes)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<ServeConfig> {
        parse_with_env(text, |_| None)
    }

    fn parse_with_env(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<ServeConfig> {
        let dir = tempfile::Builder::new()
            .prefix("toolwire-config-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, text).unwrap();
        super::parse_with_env(text, &path, env)
    }

    #[test]
    fn a_good_file_reads_and_names_its_scopes() {
        let config = parse(
            "[auth]\nissuer = \"https://id.example.com\"\nresource = \"https://mcp.example.com/mcp\"\n\n[tools.add]\nscopes = [\"math\"]\n",
        )
        .unwrap();
        assert_eq!(config.tools["add"].scopes, ["math"]);
        assert!(config.oauth().is_some());
        assert!(parse("[tools.echo]\n").unwrap().oauth().is_none());
    }

    #[test]
    fn the_example_file_reads() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/serve.toml"
        ));
        let text = std::fs::read_to_string(path).unwrap();
        // As the README runs it: nothing needed from the environment.
        let config = parse_with_env(&text, |_| None).unwrap();
        assert!(config.oauth().is_some());
        assert!(!config.tools.is_empty());
        assert!(config.audit_is_relative(), "never written where it is run");
        assert!(config.limits.is_some() && config.handles.is_some());
        assert!(config.tools["add"].rate_limit.is_some());
    }

    #[test]
    fn the_introspection_secret_comes_from_the_environment() {
        let text = "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp\"\n[auth.introspection]\nclient_id = \"rs\"\nclient_secret_env = \"RS_SECRET\"\n";
        let error = parse(text).unwrap_err().to_string();
        assert!(
            error.contains("RS_SECRET") && error.contains("client_secret_env"),
            "{error}"
        );
        let config = parse_with_env(text, |n| (n == "RS_SECRET").then(|| "x".to_owned())).unwrap();
        assert!(format!("{:?}", config.oauth().unwrap()).contains("introspection"));
        let literal = "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp\"\n[auth.introspection]\nclient_id = \"rs\"\nclient_secret = \"x\"\n";
        let error = parse(literal).unwrap_err().to_string();
        assert!(
            error.contains("client_secret"),
            "secrets never in the file: {error}"
        );
    }

    #[test]
    fn bad_files_name_the_key_and_the_problem() {
        let cases = [
            ("[auth]\nissuer = \"https://id\"\n", "resource"),
            (
                "[auth]\nissuer = \"id.example.com\"\nresource = \"https://m/mcp\"\n",
                "auth.issuer",
            ),
            (
                "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp#x\"\n",
                "fragment",
            ),
            (
                "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp\"\nisuer = \"x\"\n",
                "isuer",
            ),
            (
                "[tools.add]\nscopes = [\"two words\"]\n",
                "tools.add.scopes",
            ),
            ("[tools.add]\nscope = [\"math\"]\n", "scope"),
            ("[tools.add]\nscopes = \"math\"\n", "scopes"),
            ("[server]\nport = 1\n", "server"),
            (
                "[output]\nsecret_patterns = { mine = \"(\" }\n",
                "output.secret_patterns.mine",
            ),
            ("[output]\nlink_schemes = [\"1x\"]\n", "output.link_schemes"),
            ("[output]\noff = \" \"\n", "output.off"),
            (
                "[output]\nmax_result_bytes = 0\n",
                "output.max_result_bytes",
            ),
            ("[output]\nmax_bytes = 10\n", "max_bytes"),
            ("[tools.add]\nraw_output = \"\"\n", "tools.add.raw_output"),
            ("[tools.add]\ntimeout_ms = 0\n", "tools.add.timeout_ms"),
            (
                "[tools.add]\ntimeout_ms = 5\nno_timeout = \"x\"\n",
                "together",
            ),
            (
                "[deadlines]\ntool_timeout_ms = 0\n",
                "deadlines.tool_timeout_ms",
            ),
            ("[deadlines]\noff = \"\"\n", "deadlines.off"),
            ("[limits]\ntool_calls = 0\n", "limits.tool_calls"),
            ("[limits]\noff = \" \"\n", "limits.off"),
            (
                "[limits]\nhttp_off = \"x\"\nhttp_burst = 5\n",
                "http_off together",
            ),
            (
                "[limits]\nforwarded_header = \"a b\"\n",
                "limits.forwarded_header",
            ),
            (
                "[limits]\nforwarded_header = \"forwarded\"\ntrusted_proxies = 0\n",
                "limits.trusted_proxies",
            ),
            (
                "[limits]\ntrusted_proxies = 2\n",
                "needs limits.forwarded_header",
            ),
            (
                "[limits]\ntool_calls = 1\ntool_period_seconds = 0\n",
                "limits.tool_period_seconds",
            ),
            ("[limits]\ncalls = 5\n", "calls"),
            ("[handles]\nidle_seconds = 0\n", "handles.idle_seconds"),
            (
                "[handles]\nidle_seconds = 10\nmax_age_seconds = 5\n",
                "handles.idle_seconds",
            ),
            (
                "[tools.add]\nrate_limit = { calls = 0 }\n",
                "tools.add.rate_limit",
            ),
            (
                "[tools.add]\nrate_limit = { calls = 5 }\nno_rate_limit = \"x\"\n",
                "together",
            ),
            ("[tools.add]\ncost = 0\n", "tools.add.cost"),
            ("[tools.add]\nrate_limit = { calls = 5, per = 1 }\n", "per"),
            (
                "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp\"\n[auth.scope_implies]\nadmin = [\"a b\"]\n",
                "auth.scope_implies.admin",
            ),
            (
                "[auth]\nissuer = \"https://id\"\nresource = \"https://m/mcp\"\n[auth.introspection]\nclient_id = \"rs\"\nclient_secret_env = \"X\"\nendpoint = \"ftp://x\"\n",
                "auth.introspection.endpoint",
            ),
            ("not toml at all", "toolwire-config"),
        ];
        for (text, needle) in cases {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
            assert!(error.contains(".toml"), "names the file: {error}");
        }
    }

    #[test]
    fn a_relative_audit_file_is_in_the_state_directory() {
        let data = Path::new("/home/ann/.local/state/toolwire");
        let cases = [
            ("", None),
            ("[audit]\n", None),
            (
                "[audit]\nfile = \"audit.jsonl\"\n",
                Some("/home/ann/.local/state/toolwire/audit.jsonl"),
            ),
            (
                "[audit]\nfile = \"logs/a.jsonl\"\n",
                Some("/home/ann/.local/state/toolwire/logs/a.jsonl"),
            ),
            (
                "[audit]\nfile = \"/var/log/toolwire.jsonl\"\n",
                Some("/var/log/toolwire.jsonl"),
            ),
        ];
        for (text, want) in cases {
            let config = parse(text).unwrap();
            let file = config.audit_file(Some(data));
            assert_eq!(file.as_deref(), want.map(Path::new), "{text:?}");
            assert_eq!(
                config.audit_is_relative(),
                want.is_some_and(|w| w.starts_with("/home"))
            );
        }
    }

    #[test]
    fn the_token_a_call_needs_names_the_issuer_the_resource_and_the_scopes() {
        let auth = "[auth]\nissuer = \"http://127.0.0.1:9400\"\nresource = \"http://127.0.0.1:8080/mcp\"\n";
        assert!(
            parse("[tools.add]\nscopes = [\"math\"]\n")
                .unwrap()
                .token_for("add")
                .is_none()
        );
        let cases = [
            ("", vec![]),
            ("[tools.add]\nscopes = [\"math\"]\n", vec!["math"]),
            (
                "required_scopes = [\"tools:read\", \"math\"]\n[tools.add]\nscopes = [\"math\"]\n",
                vec!["math", "tools:read"],
            ),
        ];
        for (rest, scopes) in cases {
            let config = parse(&format!("{auth}{rest}")).unwrap();
            let token = config.token_for("add").unwrap();
            assert_eq!(token.issuer, "http://127.0.0.1:9400");
            assert_eq!(token.resource, "http://127.0.0.1:8080/mcp");
            assert_eq!(token.scopes, scopes, "{rest:?}");
        }
    }
}
