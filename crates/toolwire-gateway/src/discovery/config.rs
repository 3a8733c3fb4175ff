//! The discovery modes as an operator writes them (`"discovery"` in the gateway's
//! configuration), read key by key so that an error names the field, and compiled once: each
//! caller entry's `when` a CEL condition over `caller`, as the rules read it.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::rules::{Caller, Effect, RuleConfig, Rules, RulesConfig, ToolFacts};

/// How many tools a caller may use before `auto` gives it search instead of the whole list:
/// under the 128 tools some clients (OpenAI's, Copilot's) refuse a list beyond.
pub const DEFAULT_THRESHOLD: usize = 100;

/// The largest threshold taken (a typing error, not a setting, beyond it).
const MOST_THRESHOLD: u64 = 1_000_000;

/// How long a query's embedding is waited for unless `timeoutMs` says otherwise: past it, the
/// search answers lexically.
pub const DEFAULT_EMBEDDINGS_TIMEOUT: Duration = Duration::from_millis(3000);

/// The longest `timeoutMs` taken: a minute.
const MOST_TIMEOUT_MS: u64 = 60_000;

/// What a caller's `tools/list` holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// `search` once the tools the caller may use exceed the threshold, `direct` until then.
    #[default]
    Auto,
    /// Every tool the caller may use; the search tools are not listed.
    Direct,
    /// Only `search_tools`, `call_tool` and the always-on tools the caller may use.
    Search,
}

impl Mode {
    /// The word that names it in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Direct => "direct",
            Mode::Search => "search",
        }
    }

    fn named(word: &str) -> Option<Mode> {
        [Mode::Auto, Mode::Direct, Mode::Search]
            .into_iter()
            .find(|mode| mode.as_str() == word)
    }
}

/// One caller entry: the callers its condition holds for get its mode (and threshold).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallerMode {
    /// A CEL condition over `caller` alone, as the rules read it.
    pub when: String,
    /// The mode of the callers it holds for.
    pub mode: Mode,
    /// Their threshold under `auto`; the section's when absent.
    pub threshold: Option<usize>,
}

/// The `"discovery"` section: the mode of every caller, the threshold of `auto`, the tools
/// always listed, and per-caller modes (the first entry whose `when` holds decides).
///
/// ```
/// use toolwire_gateway::discovery::{DiscoveryConfig, Mode};
///
/// let config = DiscoveryConfig::from_json(&serde_json::json!({
///     "mode": "auto",
///     "threshold": 80,
///     "alwaysOn": ["github__create_issue"],
///     "callers": [{"when": "caller.client.name == \"inspector\"", "mode": "direct"}]
/// }))
/// .unwrap();
/// assert_eq!((config.mode, config.threshold), (Mode::Auto, 80));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoveryConfig {
    /// The mode of callers no entry of `callers` matches.
    pub mode: Mode,
    /// Under `auto`, search once a caller may use more tools than this.
    pub threshold: usize,
    /// Served tools (qualified names) listed in search mode too, to callers the rules let see
    /// them.
    pub always_on: BTreeSet<String>,
    /// Per-caller modes, in order.
    pub callers: Vec<CallerMode>,
    /// The optional semantic stage of `search_tools`: the embeddings endpoint whose vectors
    /// weigh in beside the words. Without it, search is lexical.
    pub embeddings: Option<EmbeddingsConfig>,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            mode: Mode::Auto,
            threshold: DEFAULT_THRESHOLD,
            always_on: BTreeSet::new(),
            callers: Vec::new(),
            embeddings: None,
        }
    }
}

/// `"embeddings"`: an OpenAI-compatible embeddings endpoint (`POST …/v1/embeddings`) the
/// operator runs or pays for, which makes `search_tools` hybrid: each served tool's short text
/// and each query embedded, and the cosine weighed with the lexical score.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EmbeddingsConfig {
    /// The endpoint: `http://` or `https://`, such as `http://127.0.0.1:8080/v1/embeddings`.
    pub url: String,
    /// The model named in each request.
    pub model: String,
    /// The environment variable holding the API key, sent as `Authorization: Bearer KEY`.
    pub api_key_env: Option<String>,
    /// How long a query's embedding is waited for; past it the search answers lexically.
    pub timeout: Duration,
}

/// Why a `"discovery"` section cannot be used: each names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// A field has the wrong shape or value.
    #[error("{}: {problem}", path(.at))]
    Field {
        /// The field, from the section: `callers[1].mode`.
        at: String,
        /// What is wrong, and what to write instead.
        problem: String,
    },
    /// A caller entry's `when` is not a usable condition over `caller`.
    #[error("discovery.callers[{index}].when: {problem}")]
    Condition {
        /// The entry's index in `callers`.
        index: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// An upstream has an empty prefix: its tools keep their own names, which could be those
    /// of the search tools.
    #[error(
        "the upstream \"{server}\" has an empty prefix, so its tools keep their own names, \
         which could be the gateway's search tools' (search_tools, call_tool); give it a \
         prefix, or set discovery.mode to \"direct\" (with no callers entries that search)"
    )]
    Unprefixed {
        /// The upstream's name.
        server: String,
    },
}

/// A field's path from the gateway's section: `discovery.callers[0].mode`.
fn path(at: &str) -> String {
    if at.is_empty() {
        "discovery".to_owned()
    } else {
        format!("discovery.{at}")
    }
}

fn field(at: impl Into<String>, problem: impl Into<String>) -> DiscoveryError {
    DiscoveryError::Field {
        at: at.into(),
        problem: problem.into(),
    }
}

impl DiscoveryConfig {
    /// Reads the `"discovery"` section's JSON; unknown keys are errors.
    pub fn from_json(value: &Value) -> Result<DiscoveryConfig, DiscoveryError> {
        let section = object(
            value,
            "",
            &["mode", "threshold", "alwaysOn", "callers", "embeddings"],
        )?;
        let mut config = DiscoveryConfig::default();
        if let Some(mode) = section.get("mode") {
            config.mode = mode_of(mode, "mode")?;
        }
        if let Some(threshold) = section.get("threshold") {
            config.threshold = threshold_of(threshold, "threshold")?;
        }
        if let Some(always) = section.get("alwaysOn") {
            config.always_on = always_on(always)?;
        }
        if let Some(callers) = section.get("callers") {
            let Value::Array(entries) = callers else {
                return Err(field(
                    "callers",
                    "give a list of {\"when\", \"mode\"} objects",
                ));
            };
            for (index, entry) in entries.iter().enumerate() {
                config.callers.push(caller_mode(entry, index)?);
            }
        }
        if let Some(embeddings) = section.get("embeddings") {
            config.embeddings = Some(embeddings_of(embeddings)?);
        }
        Ok(config)
    }
}

/// `value` as an object whose keys are among `known`; `at` names it ("" for the section).
fn object<'v>(
    value: &'v Value,
    at: &str,
    known: &[&str],
) -> Result<&'v Map<String, Value>, DiscoveryError> {
    let shown = if at.is_empty() {
        "discovery"
    } else {
        at.trim_end_matches('.')
    };
    let Value::Object(map) = value else {
        return Err(field(
            shown.trim_start_matches("discovery"),
            format!("{shown} is an object"),
        ));
    };
    if let Some(unknown) = map.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(field(
            format!("{at}{unknown}"),
            format!("not a key of {shown}; it has {}", known.join(", ")),
        ));
    }
    Ok(map)
}

fn mode_of(value: &Value, at: &str) -> Result<Mode, DiscoveryError> {
    value.as_str().and_then(Mode::named).ok_or_else(|| {
        field(
            at,
            format!("{value} is not a mode; give \"auto\", \"direct\" or \"search\""),
        )
    })
}

fn threshold_of(value: &Value, at: &str) -> Result<usize, DiscoveryError> {
    match value.as_u64() {
        Some(n) if n <= MOST_THRESHOLD => Ok(n as usize),
        _ => Err(field(
            at,
            format!(
                "{value} is not a number of tools; give a whole number from 0 to {MOST_THRESHOLD}"
            ),
        )),
    }
}

fn always_on(value: &Value) -> Result<BTreeSet<String>, DiscoveryError> {
    let Value::Array(names) = value else {
        return Err(field(
            "alwaysOn",
            "give a list of served tool names (\"prefix__tool\")",
        ));
    };
    let mut always = BTreeSet::new();
    for (index, name) in names.iter().enumerate() {
        let at = format!("alwaysOn[{index}]");
        match name.as_str() {
            Some(name) if super::is_search_tool(name) => {
                return Err(field(
                    at,
                    format!("{name} is one of the search tools, which search mode always lists"),
                ));
            }
            Some(name) if !name.is_empty() => {
                always.insert(name.to_owned());
            }
            _ => {
                return Err(field(
                    at,
                    format!(
                        "{name} is not a tool name; give a served name such as \"github__create_issue\""
                    ),
                ));
            }
        }
    }
    Ok(always)
}

fn caller_mode(entry: &Value, index: usize) -> Result<CallerMode, DiscoveryError> {
    let at = format!("callers[{index}].");
    let map = object(entry, &at, &["when", "mode", "threshold"])?;
    let when = match map.get("when") {
        Some(Value::String(when)) if !when.trim().is_empty() => when.clone(),
        _ => {
            return Err(field(
                format!("{at}when"),
                "give a CEL condition over caller, such as \"caller.client.name == \\\"inspector\\\"\"",
            ));
        }
    };
    let mode = match map.get("mode") {
        Some(mode) => mode_of(mode, &format!("{at}mode"))?,
        None => return Err(field(format!("{at}mode"), "give the callers' mode")),
    };
    let threshold = map
        .get("threshold")
        .map(|t| threshold_of(t, &format!("{at}threshold")))
        .transpose()?;
    Ok(CallerMode {
        when,
        mode,
        threshold,
    })
}

fn embeddings_of(value: &Value) -> Result<EmbeddingsConfig, DiscoveryError> {
    let map = object(
        value,
        "embeddings.",
        &["url", "model", "apiKeyEnv", "timeoutMs"],
    )?;
    let url = match map.get("url") {
        Some(Value::String(url)) if is_http_url(url) => url.clone(),
        Some(url) => {
            return Err(field(
                "embeddings.url",
                format!(
                    "{url} is not an http:// or https:// URL; give the endpoint, such as \
                     \"http://127.0.0.1:8080/v1/embeddings\""
                ),
            ));
        }
        None => {
            return Err(field(
                "embeddings.url",
                "give the embeddings endpoint, such as \"http://127.0.0.1:8080/v1/embeddings\"",
            ));
        }
    };
    let model = match map.get("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => model.clone(),
        _ => {
            return Err(field(
                "embeddings.model",
                "give the model's name, such as \"text-embedding-3-small\"",
            ));
        }
    };
    let api_key_env = match map.get("apiKeyEnv") {
        None => None,
        Some(Value::String(name)) if is_env_name(name) => Some(name.clone()),
        Some(name) => {
            return Err(field(
                "embeddings.apiKeyEnv",
                format!(
                    "{name} is not an environment variable's name; give one such as \"OPENAI_API_KEY\" \
                     (the key itself stays out of the file)"
                ),
            ));
        }
    };
    let timeout = match map.get("timeoutMs") {
        None => DEFAULT_EMBEDDINGS_TIMEOUT,
        Some(ms) => match ms.as_u64() {
            Some(ms) if (1..=MOST_TIMEOUT_MS).contains(&ms) => Duration::from_millis(ms),
            _ => {
                return Err(field(
                    "embeddings.timeoutMs",
                    format!(
                        "{ms} is not a timeout; give a whole number of milliseconds from 1 to {MOST_TIMEOUT_MS}"
                    ),
                ));
            }
        },
    };
    Ok(EmbeddingsConfig {
        url,
        model,
        api_key_env,
        timeout,
    })
}

/// Whether `url` is an `http://` or `https://` URL with a host.
fn is_http_url(url: &str) -> bool {
    url.parse::<http::Uri>().is_ok_and(|uri| {
        matches!(uri.scheme_str(), Some("http" | "https"))
            && uri.host().is_some_and(|h| !h.is_empty())
    })
}

/// Whether `name` can name an environment variable: letters, digits and `_`, not starting
/// with a digit.
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A [`DiscoveryConfig`] ready to decide each caller's mode: each `when` parsed and checked
/// once.
#[derive(Default)]
pub struct Discovery {
    config: DiscoveryConfig,
    /// Each caller entry's condition, as a rule set of one `allow` rule that holds or not.
    conditions: Vec<Rules>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a caller's list is, once its mode is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Every tool it may use.
    Direct,
    /// The search tools and the always-on tools it may use.
    Search,
}

impl Discovery {
    /// Checks every caller entry's condition: CEL over `caller` alone (no `tool`, no `args`),
    /// with the functions the rules have.
    pub fn compile(config: &DiscoveryConfig) -> Result<Discovery, DiscoveryError> {
        let mut conditions = Vec::with_capacity(config.callers.len());
        for (index, entry) in config.callers.iter().enumerate() {
            let rules = RulesConfig {
                rules: vec![RuleConfig {
                    effect: Effect::Allow,
                    expr: entry.when.clone(),
                    why: None,
                }],
                default: Effect::Deny,
            };
            let compiled = Rules::compile(&rules).map_err(|error| {
                // The rule's own name ("rules[0] (allow: …)") means nothing here.
                let text = error.to_string();
                let problem = text
                    .strip_prefix(&format!("{} ", error.rule()))
                    .unwrap_or(&text)
                    .to_owned();
                DiscoveryError::Condition { index, problem }
            })?;
            if !compiled.reads_only_caller() {
                return Err(DiscoveryError::Condition {
                    index,
                    problem: "reads `tool` or `args`; a caller's mode depends on the caller alone"
                        .into(),
                });
            }
            conditions.push(compiled);
        }
        Ok(Discovery {
            config: config.clone(),
            conditions,
        })
    }

    /// The configuration it was compiled from.
    pub fn config(&self) -> &DiscoveryConfig {
        &self.config
    }

    /// Whether some caller may be given search: the search tools are served then.
    pub fn may_search(&self) -> bool {
        self.config.mode != Mode::Direct
            || self.config.callers.iter().any(|c| c.mode != Mode::Direct)
    }

    /// Whether `tool` is always listed (to callers that may see it).
    pub(crate) fn always_on(&self, tool: &str) -> bool {
        self.config.always_on.contains(tool)
    }

    /// A caller's list: the mode of the first entry whose condition holds for `caller` (made
    /// only when there are entries; one that cannot be evaluated does not hold), else the
    /// section's; `auto` as `usable` (how many tools the caller may use, counted only then)
    /// against the threshold.
    pub(crate) fn listed(
        &self,
        caller: impl FnOnce() -> Caller,
        usable: impl FnOnce() -> usize,
    ) -> Listed {
        let mut mode = (self.config.mode, self.config.threshold);
        if !self.conditions.is_empty() {
            let caller = caller();
            let caller = &caller;
            let nothing = ToolFacts::default();
            let found = self
                .conditions
                .iter()
                .zip(&self.config.callers)
                .find(|(c, _)| c.decide(caller, &nothing, &Value::Null).effect == Effect::Allow);
            if let Some((_, entry)) = found {
                mode = (entry.mode, entry.threshold.unwrap_or(self.config.threshold));
            }
        }
        match mode {
            (Mode::Direct, _) => Listed::Direct,
            (Mode::Search, _) => Listed::Search,
            (Mode::Auto, threshold) if usable() > threshold => Listed::Search,
            (Mode::Auto, _) => Listed::Direct,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_bad_section_is_refused_naming_the_field() {
        let cases = [
            (json!([]), "discovery: discovery is an object"),
            (
                json!({"callers": [1]}),
                "discovery.callers[0]: callers[0] is an object",
            ),
            (json!({"modes": "auto"}), "discovery.modes: not a key"),
            (
                json!({"mode": "fast"}),
                "discovery.mode: \"fast\" is not a mode",
            ),
            (
                json!({"threshold": -1}),
                "discovery.threshold: -1 is not a number",
            ),
            (
                json!({"threshold": "100"}),
                "discovery.threshold: \"100\" is not",
            ),
            (
                json!({"alwaysOn": "a__b"}),
                "discovery.alwaysOn: give a list",
            ),
            (
                json!({"alwaysOn": ["a__b", 3]}),
                "discovery.alwaysOn[1]: 3 is not a tool name",
            ),
            (
                json!({"alwaysOn": ["call_tool"]}),
                "discovery.alwaysOn[0]: call_tool is one of",
            ),
            (json!({"callers": {}}), "discovery.callers: give a list"),
            (
                json!({"embeddings": "http://x/v1/embeddings"}),
                "discovery.embeddings: embeddings is an object",
            ),
            (
                json!({"embeddings": {"model": "m"}}),
                "discovery.embeddings.url: give the embeddings endpoint",
            ),
            (
                json!({"embeddings": {"url": "ftp://x/v1/embeddings", "model": "m"}}),
                "discovery.embeddings.url: \"ftp://x/v1/embeddings\" is not an http",
            ),
            (
                json!({"embeddings": {"url": "localhost:8080", "model": "m"}}),
                "discovery.embeddings.url: \"localhost:8080\" is not an http",
            ),
            (
                json!({"embeddings": {"url": "http://x/v1/embeddings"}}),
                "discovery.embeddings.model: give the model's name",
            ),
            (
                json!({"embeddings": {"url": "http://x/e", "model": ""}}),
                "discovery.embeddings.model: give",
            ),
            (
                json!({"embeddings": {"url": "http://x/e", "model": "m", "apiKeyEnv": "sk-123 abc"}}),
                "discovery.embeddings.apiKeyEnv: \"sk-123 abc\" is not an environment variable",
            ),
            (
                json!({"embeddings": {"url": "http://x/e", "model": "m", "timeoutMs": 0}}),
                "discovery.embeddings.timeoutMs: 0 is not a timeout",
            ),
            (
                json!({"embeddings": {"url": "http://x/e", "model": "m", "timeoutMs": "3s"}}),
                "discovery.embeddings.timeoutMs: \"3s\" is not a timeout",
            ),
            (
                json!({"embeddings": {"url": "http://x/e", "model": "m", "key": "k"}}),
                "discovery.embeddings.key: not a key of embeddings",
            ),
            (
                json!({"callers": [{"mode": "direct"}]}),
                "discovery.callers[0].when: give a CEL",
            ),
            (
                json!({"callers": [{"when": "true"}]}),
                "discovery.callers[0].mode: give",
            ),
            (
                json!({"callers": [{"when": "true", "mode": "all"}]}),
                "discovery.callers[0].mode: \"all\" is not a mode",
            ),
            (
                json!({"callers": [{"when": "true", "mode": "direct", "x": 1}]}),
                "discovery.callers[0].x: not a key of callers[0]",
            ),
        ];
        for (value, want) in cases {
            let error = DiscoveryConfig::from_json(&value).expect_err(&value.to_string());
            assert!(error.to_string().starts_with(want), "{value}: {error}");
        }
    }

    /// The section in the configuration reference and in the example gateway file, read and
    /// compiled as the gateway reads them.
    #[test]
    fn the_documented_sections_compile() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let reference = std::fs::read_to_string(format!("{root}/docs/reference/configuration.md"))
            .expect("the configuration reference");
        let after = &reference[reference.find("### `discovery`").expect("its heading")..];
        let block = after
            .split("```json\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("its JSON block");
        let example = std::fs::read_to_string(format!("{root}/examples/gateway.json"))
            .expect("the example gateway file");
        let example: Value = serde_json::from_str(&example).expect("JSON");
        let documented = DiscoveryConfig::from_json(&serde_json::from_str(block).expect("JSON"))
            .expect("a section");
        assert!(
            documented.embeddings.is_some(),
            "the reference shows embeddings"
        );
        for section in [
            serde_json::from_str(block).expect("JSON"),
            example["gateway"]["discovery"].clone(),
        ] {
            let config = DiscoveryConfig::from_json(&section).expect("a section");
            Discovery::compile(&config).expect("it compiles");
            assert!(!config.callers.is_empty() && !config.always_on.is_empty());
        }
    }

    #[test]
    fn an_embeddings_section_is_read_with_its_defaults() {
        let config = DiscoveryConfig::from_json(&json!({
            "embeddings": {"url": "https://api.openai.com/v1/embeddings", "model": "text-embedding-3-small",
                           "apiKeyEnv": "OPENAI_API_KEY", "timeoutMs": 1500}
        }))
        .unwrap();
        let embeddings = config.embeddings.unwrap();
        assert_eq!(embeddings.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(embeddings.timeout, Duration::from_millis(1500));
        let config = DiscoveryConfig::from_json(&json!({
            "embeddings": {"url": "http://127.0.0.1:9/v1/embeddings", "model": "m"}
        }))
        .unwrap();
        let embeddings = config.embeddings.unwrap();
        assert_eq!(
            (embeddings.api_key_env, embeddings.timeout),
            (None, DEFAULT_EMBEDDINGS_TIMEOUT)
        );
        assert_eq!(
            DiscoveryConfig::from_json(&json!({})).unwrap().embeddings,
            None
        );
    }

    #[test]
    fn a_condition_must_be_cel_over_the_caller_alone() {
        let cases = [
            (
                "caller.client.name ==",
                "discovery.callers[0].when: is not a valid CEL",
            ),
            (
                "tool.name == \"x\"",
                "discovery.callers[0].when: reads `tool` or `args`",
            ),
            (
                "args.x == 1",
                "discovery.callers[0].when: reads `tool` or `args`",
            ),
            ("who == 1", "discovery.callers[0].when: reads `who`"),
        ];
        for (when, want) in cases {
            let config =
                DiscoveryConfig::from_json(&json!({"callers": [{"when": when, "mode": "direct"}]}))
                    .unwrap();
            let error = Discovery::compile(&config).expect_err(when);
            assert!(error.to_string().starts_with(want), "{when}: {error}");
        }
    }

    #[test]
    fn the_first_matching_entry_decides_and_auto_counts_against_the_threshold() {
        let config = DiscoveryConfig::from_json(&json!({
            "threshold": 3,
            "callers": [
                {"when": "caller.client.name == \"inspector\"", "mode": "direct"},
                {"when": "\"big\" in caller.scopes", "mode": "auto", "threshold": 10},
                {"when": "caller.principal == \"robot\"", "mode": "search"},
            ]
        }))
        .unwrap();
        let discovery = Discovery::compile(&config).unwrap();
        let client = |name: &str| Caller {
            client: Some(crate::rules::ClientFacts {
                name: name.into(),
                version: "1".into(),
            }),
            ..Caller::default()
        };
        let big = Caller {
            scopes: vec!["big".into()],
            ..Caller::default()
        };
        let robot = Caller {
            principal: Some("robot".into()),
            ..Caller::default()
        };
        let cases = [
            (client("inspector"), 500, Listed::Direct),
            (client("other"), 3, Listed::Direct),
            (client("other"), 4, Listed::Search),
            (big.clone(), 10, Listed::Direct),
            (big, 11, Listed::Search),
            (robot, 0, Listed::Search),
            // No client: `caller.client.name` cannot be evaluated, so the entry does not hold.
            (Caller::default(), 4, Listed::Search),
        ];
        for (caller, usable, want) in cases {
            assert_eq!(
                discovery.listed(|| caller.clone(), || usable),
                want,
                "{caller:?} {usable}"
            );
        }
        assert!(discovery.may_search());
        let direct = DiscoveryConfig::from_json(&json!({"mode": "direct"})).unwrap();
        assert!(!Discovery::compile(&direct).unwrap().may_search());
    }
}
