//! Where `toolwire serve` keeps its state: in this process (the default), or in one Redis (or
//! Valkey) shared by every instance that names it with `--store` or `[store] url`, so that
//! several instances behind a load balancer answer for one another.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::Deserialize;
use toolwire_host::RedisPins;
use toolwire_server::Store;

/// The environment variable `--store` reads when not given, so that a URL with a password
/// need not be on the command line (where `ps` shows it).
pub(crate) const STORE_ENV: &str = "TOOLWIRE_STORE";

/// `[store]` of `serve --config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreConfig {
    /// `redis://HOST:PORT[/DB]` or `rediss://…`, without a password.
    #[serde(default)]
    url: Option<String>,
    /// The name of the environment variable holding the Redis password: secrets stay out of
    /// configuration files.
    #[serde(default)]
    password_env: Option<String>,
    #[serde(default)]
    key_prefix: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The store chosen, and how to name it on screen (never with its password).
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) store: Store,
    /// Tool pins in the same store, under the same key prefix (`{prefix}pins:{server}`).
    pub(crate) pins: Arc<RedisPins>,
    /// `redis://HOST:PORT/DB (key prefix P)`.
    pub(crate) shown: String,
}

impl StoreConfig {
    /// `[store]`: a Redis URL without a password, a non-empty prefix, a timeout of at least
    /// 1 ms. Whether the URL itself is usable is checked when the store is opened.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.url {
            if has_password(url) {
                bail!(
                    "store.url: holds a password; secrets stay out of this file: name the environment variable that holds it with store.password_env"
                );
            }
        }
        if self.password_env.as_deref().is_some_and(str::is_empty) {
            bail!("store.password_env: empty");
        }
        if self.key_prefix.as_deref().is_some_and(str::is_empty) {
            bail!("store.key_prefix: empty (leave it out for the default, toolwire:)");
        }
        if self.timeout_ms == Some(0) {
            bail!("store.timeout_ms: must be at least 1");
        }
        Ok(())
    }
}

/// The store `toolwire serve` uses: `flag` (`--store`, or `TOOLWIRE_STORE`) before
/// `[store] url`; `None` when neither names one (state in this process, notes in SQLite).
/// `env` reads `[store] password_env`.
pub(crate) fn open(
    flag: Option<&str>,
    config: Option<&StoreConfig>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<Chosen>> {
    let (url, key) = match (flag, config.and_then(|c| c.url.as_deref())) {
        (Some(url), _) => (url.to_owned(), "--store"),
        (None, Some(url)) => (url.to_owned(), "store.url"),
        (None, None) => {
            if config.is_some_and(|c| c.password_env.is_some()) {
                bail!("store.password_env: no store named (store.url or --store)");
            }
            return Ok(None);
        }
    };
    let url = match config.and_then(|c| c.password_env.as_deref()) {
        Some(name) => with_password(&url, key, name, &env)?,
        None => url,
    };
    let mut store = Store::redis(&url).map_err(|e| anyhow!("{key}: {e}"))?;
    let prefix = config.and_then(|c| c.key_prefix.clone());
    if let Some(prefix) = &prefix {
        store = store.key_prefix(prefix.clone());
    }
    let timeout = config.and_then(|c| c.timeout_ms).map_or(
        toolwire_server::DEFAULT_STORE_TIMEOUT,
        Duration::from_millis,
    );
    store = store.timeout(timeout);
    let prefix = prefix.unwrap_or_else(|| toolwire_server::DEFAULT_KEY_PREFIX.to_owned());
    // The URL was checked by `Store::redis` above.
    let client = redis::Client::open(url.as_str())
        .map_err(|_| anyhow!("{key}: {} is not a Redis URL", shown(&url)))?;
    Ok(Some(Chosen {
        store,
        pins: Arc::new(RedisPins::new(client, prefix.clone(), timeout)),
        shown: format!("{} (key prefix {prefix})", shown(&url)),
    }))
}

/// `url` with the password read from the environment variable `name`.
fn with_password(
    url: &str,
    key: &str,
    name: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> anyhow::Result<String> {
    let password = env(name).filter(|p| !p.is_empty()).ok_or_else(|| {
        anyhow!("store.password_env: the environment variable {name} is unset or empty")
    })?;
    if has_password(url) {
        bail!("{key}: holds a password and store.password_env names another; give one");
    }
    let mut parsed = url::Url::parse(url).map_err(|_| {
        anyhow!(
            "{key}: {} is not a Redis URL (redis://HOST:PORT[/DB])",
            shown(url)
        )
    })?;
    parsed
        .set_password(Some(&password))
        .map_err(|()| anyhow!("{key}: {} names no host", shown(url)))?;
    Ok(parsed.into())
}

/// Whether `url` carries a password (`redis://[USER]:PASSWORD@HOST…`).
fn has_password(url: &str) -> bool {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once('@'))
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// `scheme://HOST:PORT/DB`: the port and database filled in with Redis's defaults, the user
/// and password left out.
fn shown(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return "the URL given".to_owned();
    };
    let host = parsed.host_str().unwrap_or_default();
    let port = parsed.port().unwrap_or(6379);
    let db = parsed.path().trim_start_matches('/');
    let db = if db.is_empty() { "0" } else { db };
    format!("{}://{host}:{port}/{db}", parsed.scheme())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> StoreConfig {
        let config: StoreConfig = toml::from_str(text).unwrap();
        config.check().unwrap();
        config
    }

    #[tokio::test]
    async fn the_flag_wins_over_the_file_and_the_password_is_never_shown() {
        let file = config(
            "url = \"redis://file.internal:6380/2\"\nkey_prefix = \"svc:\"\ntimeout_ms = 500\n",
        );
        let none = |_: &str| None;
        let chosen = open(Some("redis://:hunter2@flag.internal/3"), Some(&file), none)
            .unwrap()
            .unwrap();
        assert_eq!(
            chosen.shown,
            "redis://flag.internal:6379/3 (key prefix svc:)"
        );
        assert!(chosen.store.is_shared());
        let chosen = open(None, Some(&file), none).unwrap().unwrap();
        assert_eq!(
            chosen.shown,
            "redis://file.internal:6380/2 (key prefix svc:)"
        );
        assert!(open(None, None, none).unwrap().is_none());
        assert!(open(None, Some(&config("")), none).unwrap().is_none());
    }

    #[tokio::test]
    async fn the_password_comes_from_the_environment_named() {
        let file = config("url = \"rediss://cache.internal:6380\"\npassword_env = \"REDIS_PW\"\n");
        let env = |name: &str| (name == "REDIS_PW").then(|| "p@ss:word/x".to_owned());
        let chosen = open(None, Some(&file), env).unwrap().unwrap();
        assert_eq!(
            chosen.shown,
            "rediss://cache.internal:6380/0 (key prefix toolwire:)"
        );
        let error = open(None, Some(&file), |_: &str| None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("REDIS_PW"), "{error}");
    }

    #[test]
    fn bad_settings_name_the_flag_or_key_and_never_the_password() {
        let none = |_: &str| None;
        for (flag, needle) in [
            ("localhost:6379", "--store"),
            ("http://localhost", "--store"),
            ("redis://:hunter2@:6379", "--store"),
            ("redis://:hunter2@localhost:port", "--store"),
        ] {
            let error = match open(Some(flag), None, none) {
                Ok(_) => panic!("{flag} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(error.contains(needle), "{flag}: {error}");
            assert!(!error.contains("hunter2"), "{flag}: {error}");
        }
        for (text, needle) in [
            (
                "url = \"redis://:hunter2@h:1\"\n",
                "store.url: holds a password",
            ),
            ("key_prefix = \"\"\n", "store.key_prefix"),
            ("timeout_ms = 0\n", "store.timeout_ms"),
            ("password_env = \"\"\n", "store.password_env"),
        ] {
            let config: StoreConfig = toml::from_str(text).unwrap();
            let error = config.check().unwrap_err().to_string();
            assert!(error.contains(needle), "{text}: {error}");
            assert!(!error.contains("hunter2"), "{text}: {error}");
        }
        let file: StoreConfig = toml::from_str("url = \"ftp://h\"\n").unwrap();
        let error = match open(None, Some(&file), none) {
            Ok(_) => panic!("ftp accepted"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains("store.url"), "{error}");
    }
}
