//! The rules as an operator writes them: JSON objects `{"deny": "<CEL>", "why": "…"}` in an
//! ordered list, and the effect when no rule decides.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a rule, or the default, does with a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// The call runs.
    #[default]
    Allow,
    /// The call runs only once a person accepts it.
    Ask,
    /// The call is refused, and the tool is not listed when that is known without the arguments.
    Deny,
}

impl Effect {
    /// The key that names this effect in a rule: `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }

    /// The past participle for a sentence: "allowed", "sent for approval", "denied".
    pub(crate) fn done(self) -> &'static str {
        match self {
            Effect::Allow => "allowed",
            Effect::Ask => "sent for approval",
            Effect::Deny => "denied",
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule: an effect, the CEL expression that says when it applies, and an optional reason
/// shown to the caller. In JSON exactly one of `allow`, `deny` or `ask` holds the expression:
///
/// ```
/// use toolwire_gateway::rules::{Effect, RuleConfig};
///
/// let rule: RuleConfig = serde_json::from_str(
///     r#"{"deny": "tool.upstream == \"shell\"", "why": "no shell access"}"#,
/// )
/// .unwrap();
/// assert_eq!(rule.effect, Effect::Deny);
/// assert_eq!(rule.why.as_deref(), Some("no shell access"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawRule", into = "RawRule")]
pub struct RuleConfig {
    /// What the rule does when its expression is true.
    pub effect: Effect,
    /// The CEL expression, over `caller`, `tool` and `args`.
    pub expr: String,
    /// A reason shown to the caller with the decision.
    pub why: Option<String>,
}

/// An ordered list of rules and the effect when none applies (`allow` unless given):
///
/// ```
/// use toolwire_gateway::rules::{Effect, RulesConfig};
///
/// let config: RulesConfig = serde_json::from_str(
///     r#"{"rules": [{"allow": "args.path.startsWith(\"/srv/public/\")"}], "default": "deny"}"#,
/// )
/// .unwrap();
/// assert_eq!((config.rules.len(), config.default), (1, Effect::Deny));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawRules")]
pub struct RulesConfig {
    /// The rules, in the order they are reported in; every rule is considered for a call.
    pub rules: Vec<RuleConfig>,
    /// The effect when no rule applies.
    pub default: Effect,
}

/// A rule as written: the three effect keys are optional here so that a rule with none or
/// several of them gets an error that says so, rather than serde's "unknown variant".
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ask: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deny: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    default: Effect,
}

/// Why a rule's JSON is not one rule.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ShapeError(String);

impl TryFrom<RawRule> for RuleConfig {
    type Error = ShapeError;

    fn try_from(raw: RawRule) -> Result<Self, ShapeError> {
        let given: Vec<(Effect, String)> = [
            (Effect::Allow, raw.allow),
            (Effect::Ask, raw.ask),
            (Effect::Deny, raw.deny),
        ]
        .into_iter()
        .filter_map(|(effect, expr)| Some((effect, expr?)))
        .collect();
        match <[_; 1]>::try_from(given) {
            Ok([(effect, expr)]) => Ok(RuleConfig {
                effect,
                expr,
                why: raw.why,
            }),
            Err(given) if given.is_empty() => Err(ShapeError(
                "a rule needs one of \"allow\", \"ask\" or \"deny\" with a CEL expression, and has none"
                    .to_owned(),
            )),
            Err(given) => {
                let keys: Vec<&str> = given.iter().map(|(effect, _)| effect.as_str()).collect();
                Err(ShapeError(format!(
                    "a rule has exactly one of \"allow\", \"ask\" or \"deny\", and this one has {}",
                    keys.join(" and ")
                )))
            }
        }
    }
}

impl From<RuleConfig> for RawRule {
    fn from(rule: RuleConfig) -> Self {
        let mut raw = RawRule {
            allow: None,
            ask: None,
            deny: None,
            why: rule.why,
        };
        let slot = match rule.effect {
            Effect::Allow => &mut raw.allow,
            Effect::Ask => &mut raw.ask,
            Effect::Deny => &mut raw.deny,
        };
        *slot = Some(rule.expr);
        raw
    }
}

impl TryFrom<RawRules> for RulesConfig {
    type Error = ShapeError;

    fn try_from(raw: RawRules) -> Result<Self, ShapeError> {
        let rules = raw
            .rules
            .into_iter()
            .enumerate()
            .map(|(index, rule)| {
                RuleConfig::try_from(rule).map_err(|e| ShapeError(format!("rules[{index}]: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(RulesConfig {
            rules,
            default: raw.default,
        })
    }
}

/// A rule as decisions and errors name it: `rules[2] (deny: tool.name == "x")`. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRef {
    /// The rule's index in the configuration's `rules` array, from 0.
    pub index: usize,
    /// The rule's effect.
    pub effect: Effect,
    /// The rule's CEL text, as written.
    pub text: Arc<str>,
    /// The rule's reason for the caller, if it has one.
    pub why: Option<Arc<str>>,
}

impl RuleRef {
    pub(crate) fn new(index: usize, rule: &RuleConfig) -> Self {
        RuleRef {
            index,
            effect: rule.effect,
            text: rule.expr.as_str().into(),
            why: rule.why.as_deref().map(Arc::from),
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rules[{}] ({}: {})", self.index, self.effect, self.text)
    }
}
