//! An entry's `"sandbox"`: `{"read": [...], "write": [...], "network": "none" | "any"}`, or
//! `{"off": "the reason"}`.

use std::path::PathBuf;

use serde_json::Value;
use toolwire_sandbox::Network;

use super::super::{ConfigError, SandboxSetting, Variables};
use super::value::{At, array, only_keys, string};

/// The entry's sandbox setting; unset when it has none.
pub(super) fn sandbox(
    value: Option<&Value>,
    at: &At<'_>,
    vars: &Variables,
) -> Result<SandboxSetting, ConfigError> {
    let Some(value) = value else {
        return Ok(SandboxSetting::default());
    };
    let Value::Object(map) = value else {
        return Err(at.err(
            "sandbox".to_owned(),
            format!(
                "must be an object: {{\"read\": [...], \"write\": [...], \"network\": \"none\"}}, or {{\"off\": \"why it must run unconfined\"}} (got {value})"
            ),
        ));
    };
    if let Some(off) = map.get("off") {
        only_keys(map, &["off"], at, "sandbox")?;
        let reason = string(off, at, "sandbox.off")?.trim();
        if reason.is_empty() {
            return Err(at.err(
                "sandbox.off".to_owned(),
                "needs a reason: the server then runs with all your rights, and the reason is shown wherever it is listed",
            ));
        }
        return Ok(SandboxSetting::Off {
            reason: reason.to_owned(),
        });
    }
    only_keys(map, &["read", "write", "network"], at, "sandbox")?;
    let paths = |key: &str| -> Result<Vec<PathBuf>, ConfigError> {
        let full = format!("sandbox.{key}");
        let mut out = Vec::new();
        for (i, path) in array(map.get(key), at, &full)?.iter().enumerate() {
            let at_key = format!("{full}[{i}]");
            let text = vars
                .expand(string(path, at, &at_key)?)
                .map_err(|m| at.err(at_key.clone(), m))?;
            out.push(home_relative(&text));
        }
        Ok(out)
    };
    let network = map.get("network").map(|v| network(v, at)).transpose()?;
    Ok(SandboxSetting::On {
        read: paths("read")?,
        write: paths("write")?,
        network,
    })
}

/// `"any"`, `"none"`, `{"tcp": [PORT, …]}`, or `["HOST:PORT", …]`.
fn network(value: &Value, at: &At<'_>) -> Result<Network, ConfigError> {
    if let Value::Array(hosts) = value {
        let mut listed = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let key = format!("sandbox.network[{i}]");
            let text = string(host, at, &key)?;
            let valid = text.rsplit_once(':').is_some_and(|(name, port)| {
                !name.is_empty()
                    && !name.contains(['/', '@', ' '])
                    && port.parse::<u16>().is_ok_and(|p| p != 0)
            });
            if !valid {
                return Err(at.err(
                    key,
                    format!("must be HOST:PORT, such as \"api.github.com:443\" (got {text:?})"),
                ));
            }
            listed.push(text.to_owned());
        }
        return Ok(Network::Hosts(listed));
    }
    if let Value::Object(map) = value {
        only_keys(map, &["tcp"], at, "sandbox.network")?;
        let mut ports = Vec::new();
        for (i, port) in array(map.get("tcp"), at, "sandbox.network.tcp")?
            .iter()
            .enumerate()
        {
            let number = port
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    at.err(
                        format!("sandbox.network.tcp[{i}]"),
                        format!("must be a port number from 1 to 65535 (got {port})"),
                    )
                })?;
            ports.push(number);
        }
        return Ok(Network::Tcp(ports));
    }
    match string(value, at, "sandbox.network")? {
        "none" => Ok(Network::None),
        "any" => Ok(Network::Any),
        other => Err(at.err(
            "sandbox.network".to_owned(),
            format!("unknown network {other:?} (want \"any\", \"none\", {{\"tcp\": [port, …]}} or [\"host:port\", …])"),
        )),
    }
}

/// `~/x` under the home directory; anything else as written.
fn home_relative(text: &str) -> PathBuf {
    match (text.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(text),
    }
}
