//! `toolwire serve --config FILE`: a TOML file that configures the served example tools. A bad
//! file stops the command at start with the file, the key and the problem.
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
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("{shown}: cannot read"))?;
    let config: ServeConfig =
        toml::from_str(&text).map_err(|e| anyhow!("{shown}: {}", e.to_string().trim_end()))?;
    config.check().map_err(|e| anyhow!("{shown}: {e}"))?;
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
        }
        for (name, tool) in &self.tools {
            for scope in &tool.scopes {
                scope_name(&format!("tools.{name}.scopes"), scope)?;
            }
        }
        Ok(())
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
        let dir = std::env::temp_dir().join(format!("toolwire-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("serve-{n}.toml"));
        std::fs::write(&path, text).unwrap();
        let result = load(&path);
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
            ("not toml at all", "toolwire-config"),
        ];
        for (text, needle) in cases {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
            assert!(error.contains(".toml"), "names the file: {error}");
        }
    }
}
