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
//! [tools.add]
//! scopes = ["math"]                        # needed to see and call the tool
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde::Deserialize;
use toolwire_server::http::OAuth;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeConfig {
    #[serde(default)]
    pub(crate) auth: Option<AuthConfig>,
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, ToolConfig>,
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
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolConfig {
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
}

/// Reads and checks `path`.
pub(crate) fn load(path: &Path) -> anyhow::Result<ServeConfig> {
    load_with_env(path, |name| std::env::var(name).ok())
}

/// [`load`] reading secrets through `env`.
fn load_with_env(path: &Path, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<ServeConfig> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("{shown}: cannot read"))?;
    let mut config: ServeConfig =
        toml::from_str(&text).map_err(|e| anyhow!("{shown}: {}", e.to_string().trim_end()))?;
    config.check().map_err(|e| anyhow!("{shown}: {e}"))?;
    config.secret = config
        .read_secret(env)
        .map_err(|e| anyhow!("{shown}: {e}"))?;
    Ok(config)
}

impl ServeConfig {
    fn check(&self) -> anyhow::Result<()> {
        if let Some(auth) = &self.auth {
            url("auth.issuer", &auth.issuer)?;
            url("auth.resource", &auth.resource)?;
            if auth.resource.contains('#') {
                bail!("auth.resource: a resource URI has no fragment (RFC 8707)");
            }
            if let Some(jwks) = &auth.jwks_uri {
                url("auth.jwks_uri", jwks)?;
            }
            for scope in auth
                .scopes_supported
                .iter()
                .flatten()
                .chain(&auth.required_scopes)
            {
                scope_name("auth", scope)?;
            }
            if let Some(introspection) = &auth.introspection {
                if let Some(endpoint) = &introspection.endpoint {
                    url("auth.introspection.endpoint", endpoint)?;
                }
                if introspection.client_id.is_empty() {
                    bail!("auth.introspection.client_id: empty");
                }
            }
            for (broader, narrower) in &auth.scope_implies {
                let key = format!("auth.scope_implies.{broader}");
                scope_name(&key, broader)?;
                for scope in narrower {
                    scope_name(&key, scope)?;
                }
            }
        }
        for (name, tool) in &self.tools {
            for scope in &tool.scopes {
                scope_name(&format!("tools.{name}.scopes"), scope)?;
            }
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
        let dir = std::env::temp_dir().join(format!("toolwire-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("serve-{n}.toml"));
        std::fs::write(&path, text).unwrap();
        let result = load_with_env(&path, env);
        let _ = std::fs::remove_file(&path);
        result
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
        let config = parse_with_env(&text, |name| {
            (name == "TOOLWIRE_INTROSPECTION_SECRET").then(|| "s3cret".to_owned())
        })
        .unwrap();
        assert!(config.oauth().is_some());
        assert_eq!(config.secret.as_deref(), Some("s3cret"));
        assert!(!config.tools.is_empty());
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
}
