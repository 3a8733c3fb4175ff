//! Reading the JSON into a [`HostConfig`], key by key, so every error can name its key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::keys::{self, IgnoredKey, Verdict};
use super::project::{self, Origin};
use super::{
    ApprovalRules, AuditConfig, ConfigError, HostConfig, OAuthSettings, ServerConfig, ToolFilter,
    Transport, Variables,
};

/// The longest `timeoutMs` accepted: a day.
const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// The longest prefix: leaves room for the tool's name in a 64-character budget.
const MAX_PREFIX: usize = 32;

/// Where a problem is: the file and, inside it, the server.
struct At<'a> {
    file: &'a Path,
    server: Option<&'a str>,
}

impl At<'_> {
    fn err(&self, key: impl Into<Option<String>>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            server: self.server.map(str::to_owned),
            key: key.into(),
            message: message.into(),
        }
    }
}

pub(super) fn parse(
    text: &str,
    file: &Path,
    vars: &Variables,
    origin: Origin,
) -> Result<HostConfig, ConfigError> {
    let at = At { file, server: None };
    let root: Value =
        serde_json::from_str(text).map_err(|e| at.err(None, format!("not JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(at.err(None, "the file must hold a JSON object"));
    };
    let (key, servers) = match (root.get("mcpServers"), root.get("servers")) {
        (Some(_), Some(_)) => {
            return Err(at.err(
                "servers".to_owned(),
                "the file has both \"mcpServers\" and \"servers\"; keep one",
            ));
        }
        (Some(s), None) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (None, None) => {
            return Err(at.err(
                None,
                "no servers: expected an \"mcpServers\" object (Claude, Cursor) or a \"servers\" object (VS Code)",
            ));
        }
    };
    let Value::Object(entries) = servers else {
        return Err(at.err(key.to_owned(), "must be an object of servers by name"));
    };
    let mut ignored = Vec::new();
    for (key, value) in &root {
        match keys::top_key(key) {
            Verdict::Read => {}
            Verdict::Ignored(key) => ignored.extend(holds_something(value).then_some(key)),
            Verdict::Unknown(message) => return Err(at.err(key.clone(), message)),
        }
    }
    let approval = match root.get("approval") {
        Some(v) => approval(v, &at, "approval")?,
        None => ApprovalRules::default(),
    };
    let audit = match root.get("audit") {
        Some(v) => audit(v, &at)?,
        None => AuditConfig::default(),
    };
    let mut roots = Vec::new();
    for (i, root) in array(root.get("roots"), &at, "roots")?.iter().enumerate() {
        let key = format!("roots[{i}]");
        let path = vars
            .expand(string(root, &at, &key)?)
            .map_err(|m| at.err(key, m))?;
        let path = PathBuf::from(path);
        roots.push(match file.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        });
    }
    let mut servers = Vec::new();
    for (name, entry) in entries {
        let at = At {
            file,
            server: Some(name),
        };
        if let Some(server) = server(name, entry, &at, vars, &mut ignored)? {
            servers.push(server);
        }
    }
    check_prefixes(&servers, file)?;
    let mut config = HostConfig {
        servers,
        approval,
        audit,
        roots,
        file: file.to_owned(),
        ignored,
        origin,
        set_aside: Vec::new(),
    };
    if origin == Origin::Project {
        config.set_aside = project::widening(&root);
        project::narrow(&mut config);
    }
    Ok(config)
}

/// One server entry; `None` when it is disabled.
fn server(
    name: &str,
    entry: &Value,
    at: &At<'_>,
    vars: &Variables,
    ignored: &mut Vec<IgnoredKey>,
) -> Result<Option<ServerConfig>, ConfigError> {
    let Value::Object(entry) = entry else {
        return Err(at.err(None, "must be an object"));
    };
    // Before anything else, a misspelled `disabled` among them.
    for (key, value) in entry {
        match keys::server_key(name, key) {
            Verdict::Read => {}
            Verdict::Ignored(key) => ignored.extend(holds_something(value).then_some(key)),
            Verdict::Unknown(message) => return Err(at.err(key.clone(), message)),
        }
    }
    if entry
        .get("disabled")
        .map(|v| boolean(v, at, "disabled"))
        .transpose()?
        == Some(true)
    {
        return Ok(None);
    }
    let transport = transport(entry, at, vars)?;
    let prefix = match entry.get("prefix") {
        Some(v) => {
            let prefix = string(v, at, "prefix")?;
            check_prefix(prefix).map_err(|m| at.err("prefix".to_owned(), m))?;
            prefix.to_owned()
        }
        None => default_prefix(name),
    };
    let mut tool_timeouts = BTreeMap::new();
    let tools = match entry.get("tools") {
        Some(Value::Object(tools)) => {
            only_keys(tools, &["allow", "deny", "timeoutMs"], at, "tools")?;
            match tools.get("timeoutMs") {
                Some(Value::Object(limits)) => {
                    for (tool, ms) in limits {
                        let key = format!("tools.timeoutMs.{tool}");
                        tool_timeouts.insert(tool.clone(), timeout(ms, at, &key)?);
                    }
                }
                Some(_) => {
                    return Err(at.err(
                        "tools.timeoutMs".to_owned(),
                        "must be an object of milliseconds by tool name",
                    ));
                }
                None => {}
            }
            ToolFilter {
                allow: globs(tools.get("allow"), at, "tools.allow")?,
                deny: globs(tools.get("deny"), at, "tools.deny")?,
            }
        }
        Some(_) => {
            return Err(at.err(
                "tools".to_owned(),
                "must be an object with allow, deny and timeoutMs",
            ));
        }
        None => ToolFilter::default(),
    };
    let trust = match entry.get("trust") {
        Some(v) => boolean(v, at, "trust")?,
        None => false,
    };
    let timeout = match entry.get("timeoutMs") {
        Some(v) => Some(timeout(v, at, "timeoutMs")?),
        None => None,
    };
    let approval = match entry.get("approval") {
        Some(v) => approval(v, at, "approval")?,
        None => ApprovalRules::default(),
    };
    Ok(Some(ServerConfig {
        name: name.to_owned(),
        transport,
        prefix,
        tools,
        trust,
        timeout,
        tool_timeouts,
        approval,
    }))
}

fn transport(
    entry: &Map<String, Value>,
    at: &At<'_>,
    vars: &Variables,
) -> Result<Transport, ConfigError> {
    let kind = entry
        .get("type")
        .map(|v| string(v, at, "type"))
        .transpose()?;
    let kind = match (
        kind,
        entry.contains_key("command"),
        entry.contains_key("url"),
    ) {
        (Some("stdio"), ..) => "stdio",
        (Some("http" | "streamable-http" | "streamableHttp"), ..) => "http",
        (Some("sse"), ..) => {
            return Err(at.err(
                "type".to_owned(),
                "\"sse\" is the HTTP+SSE transport of 2024-11-05, which Toolwire does not speak; servers of 2025-03-26 and later take \"http\" (Streamable HTTP) at the same address or one next to it",
            ));
        }
        (Some(other), ..) => {
            return Err(at.err(
                "type".to_owned(),
                format!("unknown type {other:?} (want \"stdio\" or \"http\")"),
            ));
        }
        (None, true, true) => {
            return Err(at.err(
                None,
                "has both \"command\" and \"url\"; keep one, or say which with \"type\"",
            ));
        }
        (None, true, false) => "stdio",
        (None, false, true) => "http",
        (None, false, false) => {
            return Err(at.err(
                None,
                "needs \"command\" (a program to start) or \"url\" (a server to reach)",
            ));
        }
    };
    let expand = |value: &str, key: &str| vars.expand(value).map_err(|m| at.err(key.to_owned(), m));
    if kind == "stdio" {
        let command = entry
            .get("command")
            .ok_or_else(|| at.err("command".to_owned(), "a stdio server needs a command"))?;
        let command = expand(string(command, at, "command")?, "command")?;
        if command.trim().is_empty() {
            return Err(at.err("command".to_owned(), "is empty"));
        }
        let mut args = Vec::new();
        for (i, arg) in array(entry.get("args"), at, "args")?.iter().enumerate() {
            let key = format!("args[{i}]");
            args.push(expand(string(arg, at, &key)?, &key)?);
        }
        let mut env = BTreeMap::new();
        if let Some(file) = entry.get("envFile") {
            let file = PathBuf::from(expand(string(file, at, "envFile")?, "envFile")?);
            env = env_file(&file).map_err(|m| at.err("envFile".to_owned(), m))?;
        }
        for (key, value) in strings(entry.get("env"), at, "env")? {
            let value = expand(value, &format!("env.{key}"))?;
            env.insert(key.clone(), value);
        }
        let cwd = entry
            .get("cwd")
            .map(|v| string(v, at, "cwd").and_then(|c| expand(c, "cwd")))
            .transpose()?
            .map(PathBuf::from);
        Ok(Transport::Stdio {
            command,
            args,
            env,
            cwd,
        })
    } else {
        let url = entry
            .get("url")
            .ok_or_else(|| at.err("url".to_owned(), "an http server needs a url"))?;
        let url = expand(string(url, at, "url")?, "url")?;
        match url::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            Ok(u) => {
                return Err(at.err(
                    "url".to_owned(),
                    format!(
                        "{url:?} is not an http or https address (scheme {:?})",
                        u.scheme()
                    ),
                ));
            }
            Err(e) => {
                return Err(at.err("url".to_owned(), format!("{url:?} is not an address: {e}")));
            }
        }
        let mut headers = BTreeMap::new();
        for (name, value) in strings(entry.get("headers"), at, "headers")? {
            let key = format!("headers.{name}");
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            {
                return Err(at.err(key, "is not a valid header name"));
            }
            let value = expand(value, &key)?;
            if value.contains(['\r', '\n', '\0']) {
                return Err(at.err(key, "a header value may not hold line breaks"));
            }
            headers.insert(name.clone(), value);
        }
        let mut oauth = oauth(entry.get("oauth"), at, &expand)?;
        // A configured Authorization header is the server's credential; OAuth stays out of
        // its way unless the entry asks for both.
        if entry.get("oauth").is_none()
            && headers
                .keys()
                .any(|h| h.eq_ignore_ascii_case("authorization"))
        {
            oauth.disabled = true;
        }
        Ok(Transport::Http {
            url,
            headers,
            oauth,
        })
    }
}

/// `KEY=VALUE` lines of an env file (`#` comments, `export ` and quotes allowed).
fn env_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut env = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("{}:{}: expected KEY=VALUE", path.display(), n + 1))?;
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
            .unwrap_or(value);
        env.insert(key.trim().to_owned(), value.to_owned());
    }
    Ok(env)
}

fn approval(value: &Value, at: &At<'_>, key: &str) -> Result<ApprovalRules, ConfigError> {
    let Value::Object(rules) = value else {
        return Err(at.err(key.to_owned(), "must be an object with allow, ask and deny"));
    };
    only_keys(rules, &["allow", "ask", "deny"], at, key)?;
    Ok(ApprovalRules {
        allow: globs(rules.get("allow"), at, &format!("{key}.allow"))?,
        ask: globs(rules.get("ask"), at, &format!("{key}.ask"))?,
        deny: globs(rules.get("deny"), at, &format!("{key}.deny"))?,
    })
}

fn audit(value: &Value, at: &At<'_>) -> Result<AuditConfig, ConfigError> {
    let Value::Object(audit) = value else {
        return Err(at.err(
            "audit".to_owned(),
            "must be an object with arguments, redactKeys and redactPatterns",
        ));
    };
    only_keys(
        audit,
        &["arguments", "redactKeys", "redactPatterns"],
        at,
        "audit",
    )?;
    let full_arguments = match audit.get("arguments").map(|v| (v, v.as_str())) {
        None | Some((_, Some("redacted"))) => false,
        Some((_, Some("full"))) => true,
        Some((other, _)) => {
            return Err(at.err(
                "audit.arguments".to_owned(),
                format!("must be \"redacted\" or \"full\" (got {other})"),
            ));
        }
    };
    let redact_keys = globs(audit.get("redactKeys"), at, "audit.redactKeys")?;
    let mut redact_patterns = Vec::new();
    for (kind, pattern) in strings(audit.get("redactPatterns"), at, "audit.redactPatterns")? {
        let rule = vec![(kind.clone(), pattern.to_owned())];
        toolwire_sanitize::Redactor::new(&rule)
            .map_err(|m| at.err(format!("audit.redactPatterns.{kind}"), m))?;
        redact_patterns.extend(rule);
    }
    Ok(AuditConfig {
        full_arguments,
        redact_keys,
        redact_patterns,
    })
}

fn timeout(value: &Value, at: &At<'_>, key: &str) -> Result<Duration, ConfigError> {
    match value.as_u64() {
        Some(ms @ 1..=MAX_TIMEOUT_MS) => Ok(Duration::from_millis(ms)),
        _ => Err(at.err(
            key.to_owned(),
            format!(
                "must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS} (got {value})"
            ),
        )),
    }
}

/// A list of glob patterns, each checked to compile.
fn globs(value: Option<&Value>, at: &At<'_>, key: &str) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for (i, pattern) in array(value, at, key)?.iter().enumerate() {
        let key = format!("{key}[{i}]");
        let pattern = string(pattern, at, &key)?;
        crate::glob::Glob::new(pattern).map_err(|e| at.err(key, e.to_string()))?;
        out.push(pattern.to_owned());
    }
    Ok(out)
}

/// `"oauth"`: `true` (the default), `false`, or the settings.
fn oauth(
    value: Option<&Value>,
    at: &At<'_>,
    expand: &dyn Fn(&str, &str) -> Result<String, ConfigError>,
) -> Result<OAuthSettings, ConfigError> {
    let map = match value {
        None | Some(Value::Bool(true)) => return Ok(OAuthSettings::default()),
        Some(Value::Bool(false)) => {
            return Ok(OAuthSettings {
                disabled: true,
                ..OAuthSettings::default()
            });
        }
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(at.err(
                "oauth".to_owned(),
                format!("must be true, false or an object (got {other})"),
            ));
        }
    };
    only_keys(
        map,
        &["clientId", "clientSecret", "issuer", "scope", "grant"],
        at,
        "oauth",
    )?;
    let text = |name: &str| -> Result<Option<String>, ConfigError> {
        let key = format!("oauth.{name}");
        map.get(name)
            .map(|v| string(v, at, &key).and_then(|s| expand(s, &key)))
            .transpose()
    };
    let client_credentials = match text("grant")?.as_deref() {
        None | Some("authorization_code") => false,
        Some("client_credentials") => true,
        Some(other) => {
            return Err(at.err(
                "oauth.grant".to_owned(),
                format!("unknown grant {other:?} (want \"authorization_code\" or \"client_credentials\")"),
            ));
        }
    };
    let settings = OAuthSettings {
        disabled: false,
        client_id: text("clientId")?,
        client_secret: text("clientSecret")?,
        issuer: text("issuer")?,
        scope: text("scope")?,
        client_credentials,
    };
    if settings.client_credentials && settings.client_id.is_none() {
        return Err(at.err(
            "oauth.clientId".to_owned(),
            "the client_credentials grant needs the client's id (and usually its clientSecret)",
        ));
    }
    if settings.client_secret.is_some() && settings.client_id.is_none() {
        return Err(at.err(
            "oauth.clientSecret".to_owned(),
            "a secret without a clientId",
        ));
    }
    Ok(settings)
}

fn only_keys(
    map: &Map<String, Value>,
    allowed: &[&str],
    at: &At<'_>,
    key: &str,
) -> Result<(), ConfigError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(at.err(
            format!("{key}.{k}"),
            keys::unknown(k, allowed, &format!("\"{key}\"")),
        )),
        None => Ok(()),
    }
}

/// Whether leaving `value` out loses anything: `[]`, `{}`, `""` and `null` hold nothing.
fn holds_something(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

fn string<'v>(value: &'v Value, at: &At<'_>, key: &str) -> Result<&'v str, ConfigError> {
    value
        .as_str()
        .ok_or_else(|| at.err(key.to_owned(), format!("must be a string (got {value})")))
}

fn boolean(value: &Value, at: &At<'_>, key: &str) -> Result<bool, ConfigError> {
    value.as_bool().ok_or_else(|| {
        at.err(
            key.to_owned(),
            format!("must be true or false (got {value})"),
        )
    })
}

fn array<'v>(value: Option<&'v Value>, at: &At<'_>, key: &str) -> Result<&'v [Value], ConfigError> {
    match value {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(at.err(key.to_owned(), format!("must be a list (got {other})"))),
    }
}

fn strings<'v>(
    value: Option<&'v Value>,
    at: &At<'_>,
    key: &str,
) -> Result<Vec<(&'v String, &'v str)>, ConfigError> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| Ok((k, string(v, at, &format!("{key}.{k}"))?)))
            .collect(),
        Some(other) => Err(at.err(
            key.to_owned(),
            format!("must be an object of strings (got {other})"),
        )),
    }
}

/// A server's name made a prefix: every character outside `[A-Za-z0-9_-]` becomes `_`, runs
/// of `_` shrink to one, and the result is cut to 32 characters.
pub(crate) fn default_prefix(name: &str) -> String {
    let mut prefix = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && prefix.ends_with('_')) {
            prefix.push(c);
        }
    }
    let prefix = prefix.trim_matches('_');
    let prefix: String = prefix.chars().take(MAX_PREFIX).collect();
    if prefix.is_empty() {
        "server".to_owned()
    } else {
        prefix
    }
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX {
        return Err(format!(
            "must be 1 to {MAX_PREFIX} characters (got {})",
            prefix.len()
        ));
    }
    if !prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{prefix:?} may hold only letters, digits, '_' and '-'"
        ));
    }
    if prefix.contains("__") || prefix.ends_with('_') {
        return Err(format!(
            "{prefix:?} may not contain \"__\" or end with '_': \"__\" separates the prefix from the tool"
        ));
    }
    Ok(())
}

/// Two servers may not share a prefix: their tools' names would be ambiguous.
fn check_prefixes(servers: &[ServerConfig], file: &Path) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for server in servers {
        if let Some(other) = seen.insert(&server.prefix, &server.name) {
            return Err(ConfigError {
                file: file.to_owned(),
                server: Some(server.name.clone()),
                key: Some("prefix".to_owned()),
                message: format!(
                    "prefix {:?} is also the prefix of server {other:?}; give one of them another \"prefix\"",
                    server.prefix
                ),
            });
        }
    }
    Ok(())
}
