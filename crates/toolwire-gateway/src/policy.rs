//! The gateway's rules applied to callers: which served tools each caller's list shows (a
//! [`ToolVisibility`] on the downstream server), and what becomes of each call — made
//! upstream, refused with the rule that refused it, or first put to the person behind the
//! caller as an elicitation (`ask`), with the tool, its upstream, the exact arguments and why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::Deserialize;
use serde_json::Value;
use toolwire_server::{
    Elicited, InputRequired, RequestContext, ToolCheck, ToolError, ToolVisibility, Viewer,
};

use crate::relay::{Sealed, arguments_sha256};
use crate::rules::{Caller, ClientFacts, Decision, Effect, Rules, ToolFacts};

/// The input key of the approval question. It is asked in a round of its own, before any
/// round of the upstream's (see `relay`), so an upstream's key of the same name does not
/// collide with it.
pub(crate) const APPROVAL_KEY: &str = "dev.toolwire/approval";

/// The most argument text an approval question shows; larger arguments are refused rather
/// than shown cut, since a person must see exactly what will be sent.
const MOST_SHOWN: usize = 8 * 1024;

/// The rules, and the facts of every served tool they read.
pub(crate) struct Policy {
    /// Swapped whole by a reload: a call is decided under the rules it read.
    rules: ArcSwap<Rules>,
    facts: ArcSwap<HashMap<String, Arc<ToolFacts>>>,
    /// Each caller's hidden tools, for the facts of the moment: a list page reads them, rather
    /// than evaluating the rules over every tool again.
    views: Mutex<Views>,
    /// Keys callers' digests with a per-process secret, so that no caller can make its digest
    /// another's.
    keys: std::collections::hash_map::RandomState,
}

/// The tools each caller may not see, and why, by caller digest; for one set of facts.
#[derive(Default)]
struct Views {
    /// The facts these were computed over (their address; a sync swaps in new facts).
    facts: usize,
    hidden: HashMap<u64, Arc<HashMap<String, String>>>,
}

/// The most callers whose views are kept; past it they are computed again.
const MOST_VIEWS: usize = 4096;

/// What becomes of a call.
pub(crate) enum Verdict {
    /// Make it upstream; with the digest of the arguments a person approved, when one did
    /// (kept in the state of the upstream's rounds, so that they are not asked again).
    Go(Option<String>),
    /// Answer with this instead (a refusal the caller reads, or a question to ask).
    Answer(Box<Result<toolwire_protocol::CallToolResult, ToolError>>),
}

impl Policy {
    pub(crate) fn new(rules: Rules) -> Policy {
        Policy {
            rules: ArcSwap::from_pointee(rules),
            facts: ArcSwap::from_pointee(HashMap::new()),
            views: Mutex::new(Views::default()),
            keys: std::collections::hash_map::RandomState::new(),
        }
    }

    /// The served tools' facts, by served name, as of the last sync.
    pub(crate) fn set_facts(&self, facts: HashMap<String, Arc<ToolFacts>>) {
        self.facts.store(Arc::new(facts));
    }

    /// Replaces the rules (a reload): callers' lists are computed again under them.
    pub(crate) fn set_rules(&self, rules: Rules) {
        self.rules.store(Arc::new(rules));
        // The kept views are tied to the facts they were computed over: new facts (the same
        // ones, in a new map) drop them, and every view computed from now on reads the new
        // rules, stored first.
        let facts = HashMap::clone(&self.facts.load());
        self.facts.store(Arc::new(facts));
    }

    /// Whether the rules allow every caller every tool.
    pub(crate) fn is_open(&self) -> bool {
        let rules = self.rules.load();
        rules.is_empty() && rules.default_effect() == Effect::Allow
    }

    /// What becomes of a call of `tool` with `arguments` by the caller of `ctx`, in the round
    /// whose state is `sealed`.
    pub(crate) fn decide(
        &self,
        tool: &str,
        arguments: &Value,
        ctx: &RequestContext,
        sealed: &Sealed,
    ) -> Verdict {
        let rules = self.rules.load();
        if rules.is_empty() && rules.default_effect() == Effect::Allow {
            return Verdict::Go(None);
        }
        let facts = self.facts.load();
        let Some(facts) = facts.get(tool) else {
            return Verdict::Go(None);
        };
        let decision = rules.decide(&caller(&Viewer::of(ctx)), facts, arguments);
        match decision.effect {
            Effect::Allow => Verdict::Go(None),
            Effect::Deny => answer(Ok(toolwire_protocol::CallToolResult::error(format!(
                "The gateway refused the call of {tool}: {}",
                decision.message()
            )))),
            Effect::Ask => ask(facts, arguments, &decision, ctx, sealed),
        }
    }
}

/// The answer to the approval question.
#[derive(Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Run this call, with exactly these arguments?
    approve: bool,
}

/// An `ask` decision: the call goes ahead once the person behind the caller approved these
/// exact arguments (in this round, or in an earlier round of the same call); until then, the
/// question.
fn ask(
    facts: &ToolFacts,
    arguments: &Value,
    decision: &Decision,
    ctx: &RequestContext,
    sealed: &Sealed,
) -> Verdict {
    let refuse = |why: String| {
        answer(Ok(toolwire_protocol::CallToolResult::error(format!(
            "The call of {} needs a person's approval ({}), and {why}",
            facts.name,
            decision.message()
        ))))
    };
    if ctx.client_capabilities().elicitation.is_none() {
        return refuse("this client cannot ask one: it declares no elicitation capability".into());
    }
    let digest = arguments_sha256(arguments);
    if sealed.approved_sha256.as_deref() == Some(digest.as_str()) {
        return Verdict::Go(Some(digest));
    }
    if sealed.asked_sha256.as_deref() == Some(digest.as_str()) {
        match ctx.elicited::<Approval>(APPROVAL_KEY) {
            Ok(Some(Elicited::Accepted(Approval { approve: true }))) => {
                return Verdict::Go(Some(digest));
            }
            Ok(Some(_)) => return refuse("the person did not approve it".into()),
            Ok(None) => {}
            Err(error) => return answer(Err(error)),
        }
    }
    let shown = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if shown.len() > MOST_SHOWN {
        return refuse(format!(
            "its arguments ({} bytes) are too long to show for approval",
            shown.len()
        ));
    }
    let message = format!(
        "Run {} on the upstream server {} with these arguments?\n{shown}\nWhy you are asked: {}",
        facts.name,
        facts.upstream,
        decision.message()
    );
    answer(Err(InputRequired::new()
        .elicit::<Approval>(APPROVAL_KEY, message)
        .state(Sealed {
            asked_sha256: Some(digest),
            ..Sealed::default()
        })
        .into()))
}

/// The caller as the rules read it.
fn caller(viewer: &Viewer<'_>) -> Caller {
    Caller {
        principal: viewer.principal.map(str::to_owned),
        scopes: viewer.scopes.map(<[String]>::to_vec).unwrap_or_default(),
        claims: viewer.claims.cloned().unwrap_or_default(),
        client: viewer.client.map(|c| ClientFacts {
            name: c.name.clone(),
            version: c.version.clone(),
        }),
    }
}

/// The rules as the downstream server's [`ToolVisibility`]: a tool is out of a caller's list
/// when the rules deny it to that caller whatever the arguments.
pub(crate) struct Visibility(pub(crate) Arc<Policy>);

impl ToolVisibility for Visibility {
    fn check<'a>(&'a self, viewer: Viewer<'a>) -> ToolCheck<'a> {
        if self.0.is_open() {
            return Box::new(|_| None);
        }
        let hidden = self.0.hidden(&viewer);
        Box::new(move |tool| hidden.get(tool).cloned())
    }
}

impl Policy {
    /// The tools the caller `viewer` may not see, and why: kept per caller until the facts
    /// change (the caller is made into the rules' facts only when it is not kept).
    fn hidden(&self, viewer: &Viewer<'_>) -> Arc<HashMap<String, String>> {
        let facts = self.facts.load_full();
        let at = Arc::as_ptr(&facts) as usize;
        let key = self.digest(viewer);
        {
            let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
            if views.facts != at {
                *views = Views {
                    facts: at,
                    hidden: HashMap::new(),
                };
            }
            if let Some(hidden) = views.hidden.get(&key) {
                return hidden.clone();
            }
        }
        let rules = self.rules.load();
        let rules = rules.for_caller(&caller(viewer));
        let hidden: HashMap<String, String> = facts
            .iter()
            .filter(|(_, facts)| !rules.lists(facts))
            .map(|(name, facts)| (name.clone(), rules.decide(facts, &Value::Null).message()))
            .collect();
        let hidden = Arc::new(hidden);
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        if views.facts == at {
            if views.hidden.len() >= MOST_VIEWS {
                views.hidden.clear();
            }
            views.hidden.insert(key, hidden.clone());
        }
        hidden
    }

    /// A keyed digest of everything the rules may read of a caller ([`caller`]).
    fn digest(&self, viewer: &Viewer<'_>) -> u64 {
        use std::hash::{BuildHasher as _, Hash as _, Hasher as _};
        let mut hasher = self.keys.build_hasher();
        viewer.principal.hash(&mut hasher);
        viewer.scopes.unwrap_or_default().hash(&mut hasher);
        viewer
            .claims
            .map(|claims| serde_json::to_string(claims).unwrap_or_default())
            .unwrap_or_default()
            .hash(&mut hasher);
        viewer
            .client
            .map(|c| (&c.name, &c.version))
            .hash(&mut hasher);
        hasher.finish()
    }
}

/// The facts of a served tool.
pub(crate) fn facts_of(tool: &toolwire_host::HostTool) -> ToolFacts {
    let definition = &tool.definition;
    let annotations = definition
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_value(a).ok())
        .and_then(|a| match a {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default();
    ToolFacts {
        name: tool.qualified.clone(),
        upstream: tool.server.clone(),
        title: definition.title.clone(),
        description: definition.description.clone(),
        annotations,
    }
}

/// A verdict that answers the call instead of making it.
fn answer(answer: Result<toolwire_protocol::CallToolResult, ToolError>) -> Verdict {
    Verdict::Answer(Box::new(answer))
}
