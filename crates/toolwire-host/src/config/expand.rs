//! `${…}` expansion, the way Claude Code, Cursor and VS Code do it.

use std::collections::HashMap;
use std::path::Path;

/// Where `${…}` references get their values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Variables {
    env: HashMap<String, String>,
    workspace: Option<String>,
    home: Option<String>,
}

impl Variables {
    /// The process environment; `${workspaceFolder}` is `file`'s directory (its parent when
    /// the file is in `.vscode/`), `${userHome}` the `HOME` directory.
    pub fn from_process(file: &Path) -> Variables {
        let mut dir = file.parent().unwrap_or(Path::new(".")).to_owned();
        if dir.file_name().is_some_and(|n| n == ".vscode") {
            dir = dir.parent().unwrap_or(Path::new(".")).to_owned();
        }
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Variables {
            env: std::env::vars().collect(),
            workspace: Some(dir.display().to_string()),
            home: std::env::var("HOME").ok(),
        }
    }

    /// Only the variables given (for tests, or a host with its own environment).
    pub fn new<K: Into<String>, V: Into<String>>(
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Variables {
        let env: HashMap<String, String> =
            env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let home = env.get("HOME").cloned();
        Variables {
            env,
            workspace: None,
            home,
        }
    }

    /// The same, with `${workspaceFolder}` set to `dir`.
    pub fn with_workspace(mut self, dir: impl Into<String>) -> Variables {
        self.workspace = Some(dir.into());
        self
    }

    /// `text` with every reference replaced; the error says which one is not set.
    pub(crate) fn expand(&self, text: &str) -> Result<String, String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("\"${{\" without a closing \"}}\" in {text:?}"))?;
            out.push_str(&self.value(&after[..end])?);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The environment variables `text` would read, by name, in order, without reading them
    /// (`${workspaceFolder}` and `${userHome}` are the host's own and left out): what a person
    /// is shown before trusting a file that came with a project.
    pub(crate) fn references(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            let reference = &after[..end];
            let name = reference.split_once(":-").map_or(reference, |(n, _)| n);
            let name = name.strip_prefix("env:").unwrap_or(name);
            if !matches!(name, "workspaceFolder" | "userHome") && !name.starts_with("input:") {
                names.push(name.to_owned());
            }
            rest = &after[end + 1..];
        }
        names
    }

    /// The value of one reference (what is between `${` and `}`).
    fn value(&self, reference: &str) -> Result<String, String> {
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let found = match name {
            "workspaceFolder" => self.workspace.clone(),
            "userHome" => self.home.clone(),
            _ if name.starts_with("input:") => {
                return Err(format!(
                    "${{{reference}}} asks a person for a value, which this host does not do; put it in an environment variable and write ${{env:NAME}}"
                ));
            }
            _ => {
                let var = name.strip_prefix("env:").unwrap_or(name);
                if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("${{{reference}}} is not a variable reference"));
                }
                self.env.get(var).cloned()
            }
        };
        // As in a shell: the default stands in for a variable unset or empty.
        match (found, default) {
            (Some(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
            (Some(value), _) => Ok(value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(format!(
                "${{{reference}}} is not set (set it, or give a default: ${{{name}:-value}})"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        Variables::new([("TOKEN", "t0k"), ("EMPTY", ""), ("HOME", "/home/a")])
            .with_workspace("/src/app")
    }

    #[test]
    fn expands_every_form() {
        let v = vars();
        assert_eq!(v.expand("Bearer ${TOKEN}").unwrap(), "Bearer t0k");
        assert_eq!(v.expand("${env:TOKEN}-${TOKEN}").unwrap(), "t0k-t0k");
        assert_eq!(v.expand("${MISSING:-fallback}").unwrap(), "fallback");
        assert_eq!(v.expand("${EMPTY:-x}").unwrap(), "x");
        assert_eq!(
            v.expand("${workspaceFolder}/data").unwrap(),
            "/src/app/data"
        );
        assert_eq!(v.expand("${userHome}").unwrap(), "/home/a");
        assert_eq!(v.expand("plain $HOME text").unwrap(), "plain $HOME text");
    }

    #[test]
    fn names_the_environment_variables_a_text_would_read() {
        assert_eq!(
            Variables::references("Bearer ${TOKEN} ${env:OTHER}-${MISSING:-x}${workspaceFolder}"),
            ["TOKEN", "OTHER", "MISSING"]
        );
        assert!(Variables::references("plain $HOME ${userHome} ${unclosed").is_empty());
    }

    #[test]
    fn refuses_what_it_cannot_expand() {
        let v = vars();
        let unset = v.expand("${MISSING}").unwrap_err();
        assert!(unset.contains("${MISSING} is not set"), "{unset}");
        assert_eq!(v.expand("${EMPTY}").unwrap(), "");
        assert!(v.expand("${TOKEN").unwrap_err().contains("closing"));
        assert!(v.expand("${input:key}").unwrap_err().contains("env:NAME"));
        assert!(v.expand("${a b}").unwrap_err().contains("not a variable"));
    }
}
