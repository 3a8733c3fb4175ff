//! The gateway's rules applied to callers: which served tools, prompts, resources and templates
//! each caller's lists show (a [`ToolVisibility`] on the downstream server), and what becomes
//! of each call, prompt got or resource read — made upstream, refused with the rule that
//! refused it (a prompt or resource refused is, to the caller, one the gateway does not have),
//! or first put to the person behind the caller as an elicitation (`ask`), with the offer, its
//! upstream, the exact arguments and why. An offer the rules have no facts of (in the moment
//! between an upstream's list changing and the served set following it) is refused unless
//! the rules allow everything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::Deserialize;
use serde_json::Value;
use toolwire_protocol::ErrorObject;
use toolwire_server::{
    Elicited, InputRequired, OfferKind, RequestContext, ToolCheck, ToolError, ToolVisibility,
    Viewer,
};

use crate::relay::{Sealed, arguments_sha256};
use crate::rules::{Caller, ClientFacts, Decision, Effect, Kind, Rules, ToolFacts};

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
    /// The served prompts', resources' and templates' facts, by kind and served name or URI.
    offers: ArcSwap<HashMap<(Kind, String), Arc<ToolFacts>>>,
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
            offers: ArcSwap::from_pointee(HashMap::new()),
            views: Mutex::new(Views::default()),
            keys: std::collections::hash_map::RandomState::new(),
        }
    }

    /// The served tools' facts, by served name, as of the last sync.
    pub(crate) fn set_facts(&self, facts: HashMap<String, Arc<ToolFacts>>) {
        self.facts.store(Arc::new(facts));
    }

    /// The served prompts', resources' and templates' facts, as of the last sync.
    pub(crate) fn set_offer_facts(&self, offers: HashMap<(Kind, String), Arc<ToolFacts>>) {
        self.offers.store(Arc::new(offers));
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

    /// How many served tools the caller `viewer` may use (those its rules do not hide).
    pub(crate) fn usable(&self, viewer: &Viewer<'_>) -> usize {
        if self.is_open() {
            return self.facts.load().len();
        }
        let (hidden, facts) = self.hidden(viewer);
        facts.len().saturating_sub(hidden.len())
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
            // Fail closed: a tool the rules know nothing of is refused, not made.
            return answer(Ok(toolwire_protocol::CallToolResult::error(format!(
                "The gateway refused the call of {tool}: {UNKNOWN_TO_RULES}"
            ))));
        };
        let decision = rules.decide(&caller(&Viewer::of(ctx)), facts, arguments);
        match decision.effect {
            Effect::Allow => Verdict::Go(None),
            Effect::Deny => answer(Ok(toolwire_protocol::CallToolResult::error(format!(
                "The gateway refused the call of {tool}: {}",
                decision.message()
            )))),
            Effect::Ask => match ask(facts, arguments, &decision, ctx, sealed) {
                Asked::Go(digest) => Verdict::Go(Some(digest)),
                Asked::Refused(why) => answer(Ok(toolwire_protocol::CallToolResult::error(why))),
                Asked::Question(question) => answer(Err(question)),
            },
        }
    }

    /// What becomes of getting the prompt, or reading the resource or template, `kind` named
    /// `name` (its served name, URI or URI template) with `args` by the caller of `ctx`: go
    /// ahead (with the digest of what a person approved, when one did), or the error to answer.
    /// A denied one is refused exactly as one the gateway does not have (`unknown`: what the
    /// downstream server answers for it), so that a caller cannot tell it exists.
    pub(crate) fn decide_offer(
        &self,
        kind: Kind,
        name: &str,
        args: &Value,
        ctx: &RequestContext,
        sealed: &Sealed,
        unknown: impl FnOnce() -> ErrorObject,
    ) -> Result<Option<String>, ToolError> {
        if self.is_open() {
            return Ok(None);
        }
        let offers = self.offers.load();
        let Some(facts) = offers.get(&(kind, name.to_owned())) else {
            return Err(ToolError::Protocol(unknown()));
        };
        let rules = self.rules.load();
        let decision = rules.decide(&caller(&Viewer::of(ctx)), facts, args);
        match decision.effect {
            Effect::Allow => Ok(None),
            Effect::Deny => Err(ToolError::Protocol(unknown())),
            Effect::Ask => match ask(facts, args, &decision, ctx, sealed) {
                Asked::Go(digest) => Ok(Some(digest)),
                Asked::Refused(why) => Err(ToolError::Protocol(ErrorObject::invalid_params(why))),
                Asked::Question(question) => Err(question),
            },
        }
    }
}

/// Why an offer the rules have no facts of is refused.
const UNKNOWN_TO_RULES: &str = "the gateway's rules do not know it yet (its upstream's list is \
    changing): try again in a moment";

/// What an `ask` decision comes to in this round.
enum Asked {
    /// A person approved these arguments: their digest.
    Go(String),
    /// Refused, with why.
    Refused(String),
    /// The question to put to the person behind the caller.
    Question(ToolError),
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
) -> Asked {
    let what = match facts.kind {
        Kind::Tool => format!("The call of {}", facts.name),
        Kind::Prompt => format!("Getting the prompt {}", facts.name),
        Kind::Resource | Kind::Template => format!("Reading {}", facts.name),
    };
    let refuse = |why: String| {
        Asked::Refused(format!(
            "{what} needs a person's approval ({}), and {why}",
            decision.message()
        ))
    };
    if ctx.client_capabilities().elicitation.is_none() {
        return refuse("this client cannot ask one: it declares no elicitation capability".into());
    }
    let digest = arguments_sha256(arguments);
    if sealed.approved_sha256.as_deref() == Some(digest.as_str()) {
        return Asked::Go(digest);
    }
    if sealed.asked_sha256.as_deref() == Some(digest.as_str()) {
        match ctx.elicited::<Approval>(APPROVAL_KEY) {
            Ok(Some(Elicited::Accepted(Approval { approve: true }))) => {
                return Asked::Go(digest);
            }
            Ok(Some(_)) => return refuse("the person did not approve it".into()),
            Ok(None) => {}
            Err(error) => return Asked::Question(error),
        }
    }
    let shown = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if shown.len() > MOST_SHOWN {
        return refuse(format!(
            "its arguments ({} bytes) are too long to show for approval",
            shown.len()
        ));
    }
    let doing = match facts.kind {
        Kind::Tool => "Run",
        Kind::Prompt => "Get the prompt",
        Kind::Resource | Kind::Template => "Read",
    };
    let message = format!(
        "{doing} {} on the upstream server {} with these arguments?\n{shown}\nWhy you are asked: {}",
        facts.name,
        facts.upstream,
        decision.message()
    );
    Asked::Question(
        InputRequired::new()
            .elicit::<Approval>(APPROVAL_KEY, message)
            .state(Sealed {
                asked_sha256: Some(digest),
                ..Sealed::default()
            })
            .into(),
    )
}

/// The caller as the rules read it.
pub(crate) fn caller(viewer: &Viewer<'_>) -> Caller {
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
        let (hidden, facts) = self.0.hidden(&viewer);
        Box::new(move |tool| match hidden.get(tool) {
            Some(why) => Some(why.clone()),
            // Fail closed: a tool the rules know nothing of is out of every list.
            None => (!facts.contains_key(tool)).then(|| UNKNOWN_TO_RULES.to_owned()),
        })
    }

    fn check_offers<'a>(&'a self, viewer: Viewer<'a>, kind: OfferKind) -> ToolCheck<'a> {
        if self.0.is_open() {
            return Box::new(|_| None);
        }
        let kind = match kind {
            OfferKind::Prompt => Kind::Prompt,
            OfferKind::Resource => Kind::Resource,
            _ => Kind::Template,
        };
        let offers = self.0.offers.load_full();
        let rules = self.0.rules.load_full();
        let caller = caller(&viewer);
        Box::new(move |key| {
            let Some(facts) = offers.get(&(kind, key.to_owned())) else {
                return Some(UNKNOWN_TO_RULES.to_owned());
            };
            let rules = rules.for_caller(&caller);
            (!rules.lists(facts)).then(|| rules.decide(facts, &Value::Null).message())
        })
    }
}

impl Policy {
    /// The tools the caller `viewer` may not see, and why: kept per caller until the facts
    /// change (the caller is made into the rules' facts only when it is not kept); with the
    /// facts they were computed over.
    #[allow(clippy::type_complexity)]
    fn hidden(
        &self,
        viewer: &Viewer<'_>,
    ) -> (
        Arc<HashMap<String, String>>,
        Arc<HashMap<String, Arc<ToolFacts>>>,
    ) {
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
                return (hidden.clone(), facts);
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
        (hidden, facts)
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
        kind: Kind::Tool,
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
