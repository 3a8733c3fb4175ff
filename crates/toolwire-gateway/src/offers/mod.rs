//! The upstream prompts, resources and resource templates as the downstream server serves
//! them: each under the host's name for it (a prompt `prefix__name`, a resource
//! `toolwire://PREFIX/URI`, a template `toolwire://PREFIX/TEMPLATE`; see
//! [`toolwire_host::uris`]), its handler asking the host, which asks the upstream that offers
//! it; the served sets kept in step with the host's lists on each sync, the way tools are.
//!
//! The downstream server must offer prompts and resources
//! ([`ServerBuilder::offer_prompts`](toolwire_server::ServerBuilder::offer_prompts),
//! [`offer_resources`](toolwire_server::ServerBuilder::offer_resources)); a kind it does not
//! offer is not passed through (said once). Every field of a definition is served as listed
//! upstream, but for the name or URI (the host's) and fields the protocol does not define.
//! A template the server's matcher does not take (it takes `{var}` and `{+var}` with literal
//! text between them; RFC 6570 levels 3 and 4 are refused) is not served (said once); its
//! expansions can still be read through the host. `completion/complete` for a served prompt's
//! argument or template's variable is asked of the upstream, for the caller.
//!
//! The gateway's rules decide each of them as they decide tools ([`Policy`]): the facts of
//! every served prompt, resource and template are the policy's before the server offers it; a
//! caller's lists leave out what the rules deny it, and getting or reading one is decided
//! again with its arguments (a prompt's arguments, a template's matched variables) — denied as
//! unknown, asked of a person, or made.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};

mod made;

use serde_json::Value;
use toolwire_host::{Host, HostPrompt, HostResource, HostTemplate};
use toolwire_server::Server;

use crate::exchange::Exchanges;
use crate::policy::Policy;
use crate::rules::{Kind as RuleKind, ToolFacts};
use made::{Upstreamed, prompt, resource, template};

/// What the gateway serves of the host's prompts, resources and templates.
pub(crate) struct Offers {
    state: Mutex<Served>,
    /// The upstreams' token exchanges, which requests for callers use.
    exchanges: Arc<Exchanges>,
    /// The rules, which every served item's handler consults.
    policy: Arc<Policy>,
}

#[derive(Default)]
struct Served {
    prompts: Kind,
    resources: Kind,
    templates: Kind,
    /// Whether "the server does not offer prompts" was said.
    said_no_prompts: bool,
    /// Whether "the server does not offer resources" was said.
    said_no_resources: bool,
}

/// One kind's served items, by name or URI, each with a digest of what it was made from.
#[derive(Default)]
struct Kind {
    served: HashMap<String, u64>,
    /// Items the server refused to register, with the digest refused: said once per
    /// definition.
    refused: HashMap<String, u64>,
}

impl Offers {
    /// Nothing served yet; requests to an upstream in `exchanges` go with exchanged tokens,
    /// under `policy`.
    pub(crate) fn new(exchanges: Arc<Exchanges>, policy: Arc<Policy>) -> Offers {
        Offers {
            state: Mutex::default(),
            exchanges,
            policy,
        }
    }

    /// Serves on `server` what `host` lists: new and changed items added, gone ones removed;
    /// nothing of the upstreams that are this gateway itself (`looped`).
    pub(crate) fn sync(
        &self,
        host: &Arc<Host>,
        server: &Server,
        looped: &std::collections::HashSet<String>,
    ) {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let served = &mut *served;
        let capabilities = server.capabilities();
        let not_looped = |upstream: &String| !looped.contains(upstream);
        let prompts: Vec<HostPrompt> = host
            .prompts()
            .iter()
            .filter(|p| not_looped(&p.server))
            .cloned()
            .collect();
        let resources: Vec<HostResource> = host
            .resources()
            .iter()
            .filter(|r| not_looped(&r.server))
            .cloned()
            .collect();
        let templates: Vec<HostTemplate> = host
            .resource_templates()
            .iter()
            .filter(|t| not_looped(&t.server))
            .cloned()
            .collect();
        // The rules know each one before it is served (and forget a gone one first).
        self.policy
            .set_offer_facts(offer_facts(&prompts, &resources, &templates));
        let offers_prompts = capabilities.prompts.is_some();
        if offered(
            &mut served.said_no_prompts,
            offers_prompts,
            "prompts",
            prompts.len(),
        ) {
            self.sync_prompts(&mut served.prompts, host, server, &prompts);
        }
        let offers_resources = capabilities.resources.is_some();
        let count = resources.len() + templates.len();
        if offered(
            &mut served.said_no_resources,
            offers_resources,
            "resources",
            count,
        ) {
            self.sync_resources(served, host, server, (&resources, &templates));
        }
    }

    /// The served prompts in step with `prompts`.
    fn sync_prompts(
        &self,
        served: &mut Kind,
        host: &Arc<Host>,
        server: &Server,
        prompts: &[HostPrompt],
    ) {
        served.in_step(
            "prompt",
            wanted(prompts, |p| {
                let definition = serde_json::to_string(&p.definition);
                (p.qualified.clone(), digest(&p.server, definition))
            }),
            |p| {
                let exchange = self.exchanges.of_server(&p.server);
                server.add_prompt(prompt(
                    host,
                    p,
                    Upstreamed::new(&p.server, exchange, &self.policy),
                ))
            },
            |name| server.remove_prompt(name),
        );
    }

    /// The served resources and templates in step with the host's.
    fn sync_resources(
        &self,
        served: &mut Served,
        host: &Arc<Host>,
        server: &Server,
        (resources, templates): (&[HostResource], &[HostTemplate]),
    ) {
        served.resources.in_step(
            "resource",
            wanted(resources, |r| {
                let definition = serde_json::to_string(&r.definition);
                (r.uri.clone(), digest(&r.server, definition))
            }),
            |r| {
                let exchange = self.exchanges.of_server(&r.server);
                let upstream = Upstreamed::new(&r.server, exchange, &self.policy);
                server.add_resource(resource(host, r, upstream))
            },
            |uri| server.remove_resource(uri),
        );
        served.templates.in_step(
            "resource template",
            wanted(templates, |t| {
                let definition = serde_json::to_string(&t.definition);
                (t.uri_template.clone(), digest(&t.server, definition))
            }),
            |t| {
                let exchange = self.exchanges.of_server(&t.server);
                let upstream = Upstreamed::new(&t.server, exchange, &self.policy);
                server.add_resource_template(template(host, t, upstream))
            },
            |uri_template| server.remove_resource_template(uri_template),
        );
    }
}

/// The facts the rules read of every prompt, resource and template the host lists, by kind and
/// served name, URI or URI template.
fn offer_facts(
    prompts: &[HostPrompt],
    resources: &[HostResource],
    templates: &[HostTemplate],
) -> HashMap<(RuleKind, String), Arc<ToolFacts>> {
    let annotations = |annotations: Option<Value>| match annotations {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let prompts = prompts.iter().map(|p| ToolFacts {
        kind: RuleKind::Prompt,
        name: p.qualified.clone(),
        upstream: p.server.clone(),
        title: p.definition.title.clone(),
        description: p.definition.description.clone(),
        annotations: serde_json::Map::new(),
    });
    let resources = resources.iter().map(|r| ToolFacts {
        kind: RuleKind::Resource,
        name: r.uri.clone(),
        upstream: r.server.clone(),
        title: r.definition.title.clone(),
        description: r.definition.description.clone(),
        annotations: annotations(
            r.definition
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        ),
    });
    let templates = templates.iter().map(|t| ToolFacts {
        kind: RuleKind::Template,
        name: t.uri_template.clone(),
        upstream: t.server.clone(),
        title: t.definition.title.clone(),
        description: t.definition.description.clone(),
        annotations: annotations(
            t.definition
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        ),
    });
    prompts
        .chain(resources)
        .chain(templates)
        .map(|facts| ((facts.kind, facts.name.clone()), Arc::new(facts)))
        .collect()
}

/// Each of `items` by its name or URI, with a digest of what it is made from.
fn wanted<T>(items: &[T], key: impl Fn(&T) -> (String, u64)) -> BTreeMap<String, (u64, &T)> {
    items
        .iter()
        .map(|item| {
            let (key, digest) = key(item);
            (key, (digest, item))
        })
        .collect()
}

/// Whether the server offers a kind; when it does not and the upstreams have some, says so
/// once.
fn offered(said: &mut bool, offers: bool, kind: &str, upstream: usize) -> bool {
    if !offers && upstream > 0 && !*said {
        *said = true;
        tracing::warn!(
            "the upstreams offer {kind}, and the gateway's server does not: they are not passed through (build it with offer_{kind})"
        );
    }
    offers
}

impl Kind {
    /// Brings the served items of one kind in step with `wanted` (by name, with digest): gone
    /// or changed ones removed, new or changed ones added in order of their names.
    fn in_step<T>(
        &mut self,
        kind: &str,
        wanted: BTreeMap<String, (u64, T)>,
        add: impl Fn(T) -> toolwire_server::Result<()>,
        remove: impl Fn(&str) -> toolwire_server::Result<()>,
    ) {
        self.served.retain(|key, digest| {
            let keep = wanted.get(key).is_some_and(|(d, _)| d == digest);
            if !keep {
                if let Err(error) = remove(key) {
                    tracing::warn!(%key, %error, "a {kind} no longer listed upstream could not be removed");
                }
            }
            keep
        });
        self.refused.retain(|key, _| wanted.contains_key(key));
        for (key, (digest, item)) in wanted {
            if self.served.contains_key(&key) || self.refused.get(&key) == Some(&digest) {
                continue;
            }
            match add(item) {
                Ok(()) => {
                    self.refused.remove(&key);
                    self.served.insert(key, digest);
                }
                Err(error) => {
                    tracing::warn!(%key, %error, "{key} is not served: the gateway's server refuses this {kind}");
                    self.refused.insert(key, digest);
                }
            }
        }
    }
}

/// What a served item is made from: its upstream and its definition (as JSON).
fn digest(server: &str, definition: serde_json::Result<String>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    server.hash(&mut hasher);
    definition.unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}
