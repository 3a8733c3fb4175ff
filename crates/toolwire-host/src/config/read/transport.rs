//! A server entry's transport: which one it names (`type`, or `command` / `url`), then the
//! keys of a stdio server (its program, arguments, environment and directory) or of an HTTP
//! server (its address, headers and OAuth settings).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::super::{ConfigError, OAuthSettings, TokenExchangeSettings, Transport, Variables};
use super::value::{At, array, only_keys, string, strings};

/// The transport an entry names, before its keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A program to start (`"type": "stdio"`, or a `command`).
    Stdio,
    /// A server to reach (`"type": "http"` and its aliases, or a `url`).
    Http,
}

/// A variable-expanding reader of an entry's strings: errors name the key.
type Expand<'e> = dyn Fn(&str, &str) -> Result<String, ConfigError> + 'e;

/// The entry's transport and its settings.
pub(super) fn transport(
    entry: &Map<String, Value>,
    at: &At<'_>,
    vars: &Variables,
) -> Result<Transport, ConfigError> {
    let expand = |value: &str, key: &str| vars.expand(value).map_err(|m| at.err(key.to_owned(), m));
    match kind(entry, at)? {
        Kind::Stdio => stdio(entry, at, &expand),
        Kind::Http => http(entry, at, &expand),
    }
}

/// Which transport the entry names: its `type`, else whichever of `command` and `url` it has.
fn kind(entry: &Map<String, Value>, at: &At<'_>) -> Result<Kind, ConfigError> {
    let kind = entry
        .get("type")
        .map(|v| string(v, at, "type"))
        .transpose()?;
    match (
        kind,
        entry.contains_key("command"),
        entry.contains_key("url"),
    ) {
        (Some("stdio"), ..) => Ok(Kind::Stdio),
        (Some("http" | "streamable-http" | "streamableHttp"), ..) => Ok(Kind::Http),
        (Some("sse"), ..) => Err(at.err(
            "type".to_owned(),
            "\"sse\" is the HTTP+SSE transport of 2024-11-05, which Toolwire does not speak; servers of 2025-03-26 and later take \"http\" (Streamable HTTP) at the same address or one next to it",
        )),
        (Some(other), ..) => Err(at.err(
            "type".to_owned(),
            format!("unknown type {other:?} (want \"stdio\" or \"http\")"),
        )),
        (None, true, true) => Err(at.err(
            None,
            "has both \"command\" and \"url\"; keep one, or say which with \"type\"",
        )),
        (None, true, false) => Ok(Kind::Stdio),
        (None, false, true) => Ok(Kind::Http),
        (None, false, false) => Err(at.err(
            None,
            "needs \"command\" (a program to start) or \"url\" (a server to reach)",
        )),
    }
}

/// A stdio server's program, arguments, environment (an `envFile`, then `env`) and directory.
fn stdio(
    entry: &Map<String, Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
) -> Result<Transport, ConfigError> {
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
}

/// An HTTP server's address, headers and OAuth settings.
fn http(
    entry: &Map<String, Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
) -> Result<Transport, ConfigError> {
    let url = url(entry, at, expand)?;
    let headers = headers(entry, at, expand)?;
    let mut oauth = oauth(entry.get("oauth"), at, expand)?;
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

/// The entry's `url`: an http or https address with a host.
fn url(
    entry: &Map<String, Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
) -> Result<String, ConfigError> {
    let url = entry
        .get("url")
        .ok_or_else(|| at.err("url".to_owned(), "an http server needs a url"))?;
    let url = expand(string(url, at, "url")?, "url")?;
    match url::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(url),
        Ok(u) => Err(at.err(
            "url".to_owned(),
            format!(
                "{url:?} is not an http or https address (scheme {:?})",
                u.scheme()
            ),
        )),
        Err(e) => Err(at.err("url".to_owned(), format!("{url:?} is not an address: {e}"))),
    }
}

/// The entry's `headers`: valid names, values without line breaks.
fn headers(
    entry: &Map<String, Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
) -> Result<BTreeMap<String, String>, ConfigError> {
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
    Ok(headers)
}

/// `"oauth"`: `true` (the default), `false`, or the settings.
fn oauth(
    value: Option<&Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
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
        &[
            "clientId",
            "clientSecret",
            "issuer",
            "scope",
            "grant",
            "tokenExchange",
        ],
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
        token_exchange: token_exchange(map, at, expand)?,
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

/// `"oauth.tokenExchange"`: `true`, `false` or `{"resource", "audience", "scope"}`; it needs
/// the client's `clientId`, its `clientSecret` from the environment (`"${VAR}"`: a gateway's
/// file is shared and read by people who must not learn the secret), and the `issuer`.
fn token_exchange(
    oauth: &Map<String, Value>,
    at: &At<'_>,
    expand: &Expand<'_>,
) -> Result<Option<TokenExchangeSettings>, ConfigError> {
    const KEY: &str = "oauth.tokenExchange";
    let settings = match oauth.get("tokenExchange") {
        None | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Bool(true)) => TokenExchangeSettings::default(),
        Some(Value::Object(map)) => {
            only_keys(map, &["resource", "audience", "scope"], at, KEY)?;
            let text = |name: &str| -> Result<Option<String>, ConfigError> {
                let key = format!("{KEY}.{name}");
                map.get(name)
                    .map(|v| string(v, at, &key).and_then(|s| expand(s, &key)))
                    .transpose()
            };
            TokenExchangeSettings {
                resource: text("resource")?,
                audience: text("audience")?,
                scope: text("scope")?,
            }
        }
        Some(other) => {
            return Err(at.err(
                KEY.to_owned(),
                format!("must be true, false or an object (got {other})"),
            ));
        }
    };
    if let Some(resource) = &settings.resource {
        match url::Url::parse(resource) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => {
                return Err(at.err(
                    format!("{KEY}.resource"),
                    format!("{resource:?} is not an http or https address"),
                ));
            }
        }
    }
    let needs = |name: &str, why: &str| match oauth.get(name) {
        Some(Value::String(_)) => Ok(()),
        _ => Err(at.err(format!("oauth.{name}"), why.to_owned())),
    };
    needs(
        "clientId",
        "token exchange needs the gateway's own client (clientId)",
    )?;
    needs(
        "issuer",
        "token exchange needs the authorization server it is done at (issuer)",
    )?;
    needs(
        "clientSecret",
        "token exchange needs the gateway client's secret (clientSecret: \"${VAR}\")",
    )?;
    if !oauth["clientSecret"]
        .as_str()
        .is_some_and(|s| s.contains("${"))
    {
        return Err(at.err(
            "oauth.clientSecret".to_owned(),
            "with tokenExchange the secret comes from the environment: write \"${VAR}\", not the secret",
        ));
    }
    Ok(Some(settings))
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
