//! Reading the JSON into a [`HostConfig`], key by key, so every error can name its key: the
//! file's top keys and each server entry here, an entry's transport in `transport`, and the
//! single values both read in `value`.

mod sandbox;
mod transport;
mod value;

pub(super) use self::value::holds_something;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use self::value::{At, array, boolean, globs, only_keys, string, strings, timeout};
use super::Origin;
use super::keys::{self, IgnoredKey, Verdict};
use super::{
    ApprovalRules, AuditConfig, ConfigError, HostConfig, ServerConfig, ToolFilter, Variables,
};

/// The longest prefix: leaves room for the tool's name in a 64-character budget.
const MAX_PREFIX: usize = 32;

/// The configuration in `text`, read from `file` (which names it in errors and anchors its
/// relative paths), its variables expanded with `vars`; and the file's JSON object, from which
/// a project file's widening settings are set aside (see `project::parse`).
pub(super) fn parse(
    text: &str,
    file: &Path,
    vars: &Variables,
    origin: Origin,
) -> Result<(HostConfig, Map<String, Value>), ConfigError> {
    let at = At { file, server: None };
    let root: Value =
        serde_json::from_str(text).map_err(|e| at.err(None, format!("not JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(at.err(None, "the file must hold a JSON object"));
    };
    let entries = server_entries(&root, &at)?;
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
    let roots = roots(&root, &at, vars)?;
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
    let config = HostConfig {
        servers,
        approval,
        audit,
        roots,
        file: file.to_owned(),
        ignored,
        origin,
        set_aside: Vec::new(),
    };
    Ok((config, root))
}

/// The servers by name: `mcpServers` (Claude, Cursor) or `servers` (VS Code), not both.
fn server_entries<'r>(
    root: &'r Map<String, Value>,
    at: &At<'_>,
) -> Result<&'r Map<String, Value>, ConfigError> {
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
    Ok(entries)
}

/// `roots`: each path expanded, a relative one taken from the file's directory.
fn roots(
    root: &Map<String, Value>,
    at: &At<'_>,
    vars: &Variables,
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut roots = Vec::new();
    for (i, root) in array(root.get("roots"), at, "roots")?.iter().enumerate() {
        let key = format!("roots[{i}]");
        let path = vars
            .expand(string(root, at, &key)?)
            .map_err(|m| at.err(key, m))?;
        let path = PathBuf::from(path);
        roots.push(match at.file.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        });
    }
    Ok(roots)
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
    let transport = transport::transport(entry, at, vars)?;
    let prefix = match entry.get("prefix") {
        Some(v) => {
            let prefix = string(v, at, "prefix")?;
            check_prefix(prefix).map_err(|m| at.err("prefix".to_owned(), m))?;
            prefix.to_owned()
        }
        None => default_prefix(name),
    };
    let (tools, tool_timeouts) = tools(entry, at)?;
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
    let sandbox = sandbox::sandbox(entry.get("sandbox"), at, vars)?;
    Ok(Some(ServerConfig {
        name: name.to_owned(),
        transport,
        prefix,
        tools,
        trust,
        timeout,
        tool_timeouts,
        approval,
        sandbox,
    }))
}

/// An entry's `tools`: which the model sees (`allow`, `deny`) and each one's time limit.
fn tools(
    entry: &Map<String, Value>,
    at: &At<'_>,
) -> Result<(ToolFilter, BTreeMap<String, Duration>), ConfigError> {
    let tools = match entry.get("tools") {
        Some(Value::Object(tools)) => tools,
        Some(_) => {
            return Err(at.err(
                "tools".to_owned(),
                "must be an object with allow, deny and timeoutMs",
            ));
        }
        None => return Ok((ToolFilter::default(), BTreeMap::new())),
    };
    only_keys(tools, &["allow", "deny", "timeoutMs"], at, "tools")?;
    let mut tool_timeouts = BTreeMap::new();
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
    let filter = ToolFilter {
        allow: globs(tools.get("allow"), at, "tools.allow")?,
        deny: globs(tools.get("deny"), at, "tools.deny")?,
    };
    Ok((filter, tool_timeouts))
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

/// A configured prefix: empty (the only server's tools under their own names, checked by
/// [`check_prefixes`]) or 1 to 32 safe characters that cannot be taken for the separator.
fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.len() > MAX_PREFIX {
        return Err(format!(
            "must be empty or 1 to {MAX_PREFIX} characters (got {})",
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

/// Two servers may not share a prefix, and only the only server may have an empty one: their
/// tools' names would be ambiguous. Nor may two prefixes differ only in case: a prefix is the
/// authority of its resources' URIs (`toolwire://PREFIX/…`, see [`crate::uris`]), which RFC
/// 3986 compares ignoring case.
fn check_prefixes(servers: &[ServerConfig], file: &Path) -> Result<(), ConfigError> {
    if let Err(crate::NameError::Unprefixed { unprefixed, other }) =
        crate::names::check_prefixes(servers.iter().map(|s| (s.name.as_str(), s.prefix.as_str())))
    {
        return Err(ConfigError {
            file: file.to_owned(),
            server: Some(unprefixed),
            key: Some("prefix".to_owned()),
            message: format!(
                "an empty prefix (tools under their own names) is for the only server, and server {other:?} is configured too: with two servers a name could stand for a tool of either; give this server a prefix"
            ),
        });
    }
    let mut seen: BTreeMap<String, (&str, &str)> = BTreeMap::new();
    for server in servers {
        let key = server.prefix.to_ascii_lowercase();
        if let Some((prefix, other)) = seen.insert(key, (&server.prefix, &server.name)) {
            let message = if prefix == server.prefix {
                format!(
                    "prefix {:?} is also the prefix of server {other:?}; give one of them another \"prefix\"",
                    server.prefix
                )
            } else {
                format!(
                    "prefix {:?} is the prefix of server {other:?} but for case ({prefix:?}), and resource URIs (toolwire://PREFIX/…) compare prefixes ignoring case; give one of them another \"prefix\"",
                    server.prefix
                )
            };
            return Err(ConfigError {
                file: file.to_owned(),
                server: Some(server.name.clone()),
                key: Some("prefix".to_owned()),
                message,
            });
        }
    }
    Ok(())
}
