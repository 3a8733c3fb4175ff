//! The gateway: the host that reaches the upstream servers, the server that serves their
//! tools, prompts and resources downstream, and the task that keeps the second in step with
//! the first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use toolwire_host::{Host, HostConfig, HostError, HostOptions};
use toolwire_server::{Server, ServerBuilder};

use crate::discovery::{Downstream, Listing, Search};
use crate::exchange::Exchanges;
use crate::hold::Holds;
use crate::mirror::Mirror;
use crate::observe::{GatewayMetrics, Upstreams, UpstreamsReady};
use crate::offers::Offers;
use crate::options::GatewayOptions;
use crate::policy::Policy;
use crate::relay::Unrelayable;
use crate::rules::Rules;
use crate::starting::Starting;
use crate::watch::Watched;
use toolwire_client::Asked;
use toolwire_protocol::{
    ElicitRequestParams, InputRequest, InputResponse, METHOD_CREATE_MESSAGE, METHOD_ELICIT,
    METHOD_LIST_ROOTS,
};

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The host that reaches the upstream servers could not start (its audit log, pins or
    /// rules).
    #[error(transparent)]
    Host(#[from] HostError),
    /// A rule does not compile.
    #[error(transparent)]
    Rules(#[from] crate::rules::RuleError),
    /// The downstream server could not be built.
    #[error(transparent)]
    Server(#[from] toolwire_server::Error),
    /// The configuration has `approval.ask` rules: a gateway has no person to ask.
    #[error(
        "approval.ask in {}: a gateway has no person to ask; allow or deny these calls instead",
        .0.join(", ")
    )]
    AskRules(Vec<String>),
    /// The discovery settings cannot be used with these upstreams.
    #[error(transparent)]
    Discovery(#[from] crate::discovery::DiscoveryError),
}

/// Many upstream servers' tools served as one server's.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) host: Arc<Host>,
    pub(crate) server: Server,
    pub(crate) mirror: Mirror,
    pub(crate) offers: Offers,
    /// The token exchanges of the upstreams that call for their callers with one.
    pub(crate) exchanges: Arc<Exchanges>,
    /// Each upstream's `trust` setting, by name: whether its annotations may be relied on.
    pub(crate) trusted: ArcSwap<HashMap<String, bool>>,
    /// The rules, which a reload replaces.
    pub(crate) policy: Arc<Policy>,
    /// The discovery modes and the search index.
    pub(crate) search: Arc<Search>,
    /// The held calls, whose bounds a reload replaces.
    pub(crate) holds: Arc<Holds>,
    /// The task following each upstream, by name, stopped when it is removed or changed.
    pub(crate) follows: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// Held while a reload is applied, one at a time.
    pub(crate) reloading: Mutex<()>,
    /// The task following upstream changes, stopped with the gateway.
    pub(crate) watching: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The upstreams whose first try has not ended, and whether the start stopped waiting.
    pub(crate) starting: Arc<Starting>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Connects to every server of `config` at once and serves their tools on the server
    /// `server` builds, which the caller set up with its downstream settings (sign-in, limits,
    /// output guard, audit) and serves over HTTP or stdio ([`Gateway::server`]). Returns once
    /// every upstream has answered or failed, or after [`GatewayOptions::start_wait`]: one
    /// still starting then ([`Gateway::starting`]) is served when it answers; one that failed
    /// is retried in the background. The host keeps each upstream's last good list while it
    /// fails.
    ///
    /// Their prompts and resources are served too (`prefix__name`, `toolwire://PREFIX/URI`)
    /// when `server` offers them (built with `offer_prompts()` and `offer_resources()`). The
    /// server's output guard sees only tool results: leave the host's
    /// [`clean_offers`](HostOptions::clean_offers) on so that prompts and resources are
    /// cleaned.
    ///
    /// The handlers of upstreams' questions in `host` are replaced: a 2026-07-28 upstream's
    /// questions go to the caller (the gateway declares upstream, on each request, what the
    /// caller can answer), and so do a 2025-11-25 upstream's requests during a call, the call
    /// held meanwhile ([`GatewayOptions::hold_ttl`]); such a request that belongs to no call
    /// the gateway can tell (on stdio, with several calls in flight) is refused, the call
    /// ending with an error result that names the upstream.
    ///
    /// `server` is made to offer the tasks extension: a 2026-07-28 upstream's tool becomes the
    /// caller's task when that upstream makes the call a task (for a caller that declared the
    /// extension), the gateway following the upstream task (its status, its questions relayed,
    /// cancelled upstream when the caller cancels); a call the upstream answers at once stays
    /// a plain call.
    pub async fn start(
        config: &HostConfig,
        host: HostOptions,
        server: ServerBuilder,
        options: GatewayOptions,
    ) -> Result<Gateway, GatewayError> {
        let asking = asking(config);
        if !asking.is_empty() {
            return Err(GatewayError::AskRules(asking));
        }
        let rules = match options.rules {
            Some(rules) => rules,
            None => Rules::compile(&crate::rules::RulesConfig::default())?,
        };
        let policy = Arc::new(Policy::new(rules));
        let discovery = crate::discovery::chosen(options.discovery, config)?;
        let search = Arc::new(Search::new(discovery, policy.clone(), config));
        // The tools of 2026-07-28 upstreams may run as tasks (they are listed after the
        // server is built): the extension is declared from the start. The rules decide each
        // caller's list, even when there are none yet: a reload may bring some (without rules
        // the check lets every tool through at once).
        let ready = UpstreamsReady::default();
        let observed = Arc::new(std::sync::OnceLock::new());
        let server = server
            .offer_tasks()
            .readiness(ready.clone())
            .tool_visibility(Listing(search.clone()))
            .build()?;
        let unrelayable = Arc::new(Unrelayable::default());
        let holds = Arc::new(Holds::new(options.hold_ttl, options.max_held));
        let host = Arc::new(Host::new(
            config,
            relaying(host, &unrelayable, &holds).keep_last_list(true),
        )?);
        let trusted = ArcSwap::from_pointee(trusted_of(config));
        let names = config.servers.iter().map(|s| s.name.clone()).collect();
        let exchanges = Arc::new(Exchanges::of(config, options.oauth_insecure_http));
        let gateway = Gateway {
            inner: Arc::new(Inner {
                host,
                server,
                mirror: Mirror::new(
                    options.settings,
                    policy.clone(),
                    (unrelayable, holds.clone()),
                    exchanges.clone(),
                    observed.clone(),
                ),
                policy: policy.clone(),
                search,
                holds,
                follows: Mutex::default(),
                reloading: Mutex::new(()),
                offers: Offers::new(exchanges.clone(), policy.clone()),
                exchanges,
                trusted,
                watching: Mutex::new(None),
                starting: Arc::new(Starting::new(names)),
            }),
        };
        gateway.inner.serve_search_tools()?;
        ready.set(gateway.inner.upstreams());
        gateway.observe(&observed);
        gateway.begin(config, options.start_wait).await;
        Ok(gateway)
    }

    /// Counts the upstream calls in the server's metrics, when it keeps them.
    fn observe(&self, observed: &std::sync::OnceLock<GatewayMetrics>) {
        if let Some(metrics) = self.inner.server.metrics() {
            self.inner.search.observe(metrics);
            if let Some(registered) = GatewayMetrics::register(metrics, self.inner.upstreams()) {
                let _ = observed.set(registered);
            }
        }
    }

    /// Starts each upstream's follower and the watch, then waits up to `wait` for every
    /// upstream's first try before serving what there is.
    async fn begin(&self, config: &HostConfig, wait: Duration) {
        // Each upstream's follower makes its first try, each on its own.
        for server in &config.servers {
            self.inner.follow(&server.name);
        }
        let gateway: Weak<Inner> = Arc::downgrade(&self.inner);
        let watching = tokio::spawn(crate::watch::watch(gateway));
        *self
            .inner
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(watching);
        self.inner.starting.wait(wait).await;
        self.sync();
    }

    /// The upstreams whose calls go with a token exchanged for each caller's own
    /// (`"oauth": {"tokenExchange": …}`), by name: their callers must present access tokens,
    /// which the downstream server must hand to the gateway
    /// ([`OAuth::token_to_handlers`](toolwire_server::http::OAuth::token_to_handlers)).
    pub fn exchanging(&self) -> Vec<String> {
        self.inner.exchanges.servers()
    }

    /// The tools the upstreams list that the gateway does not serve, and why: one a legacy
    /// upstream runs only as a task, one whose definition the downstream server refuses.
    /// (Those hidden by a server's `tools` filter or by a rule are in the host's
    /// [`ServerStatus::hidden`](toolwire_host::ServerStatus) and the policy.)
    pub fn unserved(&self) -> Vec<crate::mirror::Unserved> {
        self.inner.mirror.unserved()
    }

    /// The upstreams still on their first try (started and not yet listed, nor failed), by
    /// name: their tools are served once they answer.
    pub fn starting(&self) -> Vec<String> {
        self.inner.starting.names()
    }

    /// The downstream server: serve it over HTTP or stdio.
    pub fn server(&self) -> &Server {
        &self.inner.server
    }

    /// The host that reaches the upstream servers: their status, pins and tools.
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    /// Brings the served tools, prompts and resources in step with the host's lists now (the
    /// gateway does this by itself whenever an upstream's list changes).
    pub fn sync(&self) {
        self.inner.sync();
    }

    /// Approves the changed definition of the tool served as `qualified` (after an operator
    /// reviewed it): it is served again. `false` if no listed tool has that name.
    pub fn approve_change(&self, qualified: &str) -> Result<bool, GatewayError> {
        let approved = self.inner.host.approve_change(qualified)?;
        self.sync();
        Ok(approved)
    }

    /// [`Gateway::approve_change`] of exactly the definition the operator reviewed, by its
    /// hash ([`Host::approve_reviewed`](toolwire_host::Host::approve_reviewed)): `false`,
    /// approving nothing, when it is no longer the one listed.
    pub fn approve_reviewed(&self, qualified: &str, reviewed: &str) -> Result<bool, GatewayError> {
        let approved = self.inner.host.approve_reviewed(qualified, reviewed)?;
        self.sync();
        Ok(approved)
    }

    /// Approves the changed definition of `server`'s prompt, resource or template (`kind`,
    /// named as the upstream lists it) that the operator reviewed, by its hash
    /// ([`Host::approve_offer`](toolwire_host::Host::approve_offer)): it is served again.
    /// `false`, approving nothing, when it is not the one waiting.
    pub async fn approve_offer_reviewed(
        &self,
        server: &str,
        kind: toolwire_host::OfferKind,
        name: &str,
        reviewed: &str,
    ) -> Result<bool, GatewayError> {
        let approved = self
            .inner
            .host
            .approve_offer(server, kind, name, Some(reviewed))
            .await?;
        self.sync();
        Ok(approved)
    }

    /// Stops following the upstreams and closes every connection (stdio servers stop).
    pub async fn close(&self) {
        let watching = self
            .inner
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(watching) = watching {
            watching.abort();
        }
        let follows = std::mem::take(&mut *lock(&self.inner.follows));
        for follow in follows.values() {
            follow.abort();
        }
        self.inner.host.close().await;
    }
}

impl Inner {
    /// Brings the served tools, prompts and resources in step with the host's lists.
    pub(crate) fn sync(&self) {
        let trusted = self.trusted.load();
        self.mirror.sync(&self.host, &self.server, |server| {
            trusted.get(server).copied().unwrap_or(false)
        });
        let (generation, served) = self.mirror.served_definitions();
        self.search.update(generation, served);
        self.offers
            .sync(&self.host, &self.server, &self.mirror.looped());
        // The list is no fresher than the stalest upstream list it is made of.
        let shortest = self
            .host
            .servers()
            .into_iter()
            .filter_map(|s| s.list_ttl)
            .min();
        self.server.cap_list_ttl(shortest);
    }

    /// Serves the search tools when some caller may be given them (and no longer when none
    /// may).
    pub(crate) fn serve_search_tools(self: &Arc<Self>) -> Result<(), toolwire_server::Error> {
        let weak: Weak<Inner> = Arc::downgrade(self);
        crate::discovery::serve_tools(&self.server, &self.search, weak)
    }

    /// Starts following `upstream` (its first try, then its changes), replacing any
    /// follower it had.
    pub(crate) fn follow(self: &Arc<Self>, upstream: &str) {
        let gateway: Weak<Inner> = Arc::downgrade(self);
        let task = tokio::spawn(crate::watch::follow(gateway, upstream.to_owned()));
        if let Some(old) = lock(&self.follows).insert(upstream.to_owned(), task.abort_handle()) {
            old.abort();
        }
    }

    /// Stops following `upstream`.
    pub(crate) fn unfollow(&self, upstream: &str) {
        if let Some(old) = lock(&self.follows).remove(upstream) {
            old.abort();
        }
    }

    /// Notes that `upstream`'s first try has ended (its tools, if it answered, are served).
    pub(crate) fn tried(&self, upstream: &str) {
        if self.starting.tried(upstream) {
            let status = self.host.servers().into_iter().find(|s| s.name == upstream);
            if let Some(toolwire_host::ServerState::Connected { tools }) = status.map(|s| s.state) {
                tracing::info!(
                    %upstream,
                    tools,
                    "the upstream answered after the gateway started: its tools are served now"
                );
            }
        }
    }

    /// What the gateway's metrics and readiness read of it.
    fn upstreams(&self) -> Upstreams {
        Upstreams::of(&self.host, &self.starting)
    }
}

impl Downstream for Inner {
    fn downstream(&self) -> &Server {
        &self.server
    }
}

impl Watched for Inner {
    fn host(&self) -> &Host {
        &self.host
    }

    fn server(&self) -> &Server {
        &self.server
    }

    fn withholds(&self) -> bool {
        self.mirror.withholds()
    }

    fn sync(&self) {
        Inner::sync(self);
    }

    fn tried(&self, upstream: &str) {
        Inner::tried(self, upstream);
    }
}

/// Each upstream's `trust` setting, by name.
pub(crate) fn trusted_of(config: &HostConfig) -> HashMap<String, bool> {
    config
        .servers
        .iter()
        .map(|s| (s.name.clone(), s.trust))
        .collect()
}

/// The lock of `mutex`, whether or not a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The approver of a gateway's host: a call no approval rule decides goes ahead (the
/// gateway's own rules have decided it); there is no person behind a gateway to ask, so
/// `approval.ask` rules are refused when it starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPerson;

impl toolwire_host::Approver for NoPerson {
    fn approve<'a>(
        &'a self,
        request: toolwire_host::ApprovalRequest<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = toolwire_host::Answer> + Send + 'a>>
    {
        let answer = match request.reason {
            toolwire_host::Reason::Default => {
                toolwire_host::Answer::AllowedBy("the gateway (no approval rule matches)".into())
            }
            reason => toolwire_host::Answer::Deny(format!(
                "{} asks for a person's approval ({reason}), and a gateway has no person to ask",
                request.qualified
            )),
        };
        Box::pin(std::future::ready(answer))
    }
}

/// The host's options with handlers of upstreams' questions: a question a legacy upstream
/// asks during a call the gateway can tell (the request it came during is one of a call's,
/// [`Asked`]) goes to that call, to be held for its caller; any other is refused, noting
/// which upstream asked. A 2026-07-28 upstream's questions never reach them (its rounds are
/// relayed to the caller). With them the gateway's client declares every input capability
/// upstream, so that an upstream asks rather than refuses: whether the caller can answer is
/// checked downstream, against what the caller declared (M-05).
fn relaying(host: HostOptions, unrelayable: &Arc<Unrelayable>, holds: &Arc<Holds>) -> HostOptions {
    let elicit = Relay::new(unrelayable, holds, METHOD_ELICIT);
    let url = elicit.clone();
    let sample = Relay::new(unrelayable, holds, METHOD_CREATE_MESSAGE);
    let roots = Relay::new(unrelayable, holds, METHOD_LIST_ROOTS);
    host.on_elicit(move |server, params| {
        let question = elicit.question(&server, InputRequest::Elicit(params));
        async move {
            match question?.await {
                Some(InputResponse::Elicit(answer)) => Ok(answer),
                _ => Ok(toolwire_client::declined()),
            }
        }
    })
    .on_elicit_url(move |server, params| {
        let question = url.question(
            &server,
            InputRequest::Elicit(ElicitRequestParams::Url(params)),
        );
        async move {
            match question?.await {
                Some(InputResponse::Elicit(answer)) => Ok(answer),
                _ => Ok(toolwire_client::declined()),
            }
        }
    })
    .on_sample(move |server, params| {
        let question = sample.question(&server, InputRequest::CreateMessage(Box::new(params)));
        let unanswered = sample.unanswered(&server);
        async move {
            match question?.await {
                Some(InputResponse::CreateMessage(answer)) => Ok(*answer),
                _ => Err(unanswered),
            }
        }
    })
    .on_roots(move |server| {
        // Asked outside any call (as server-filesystem and server-everything ask when they
        // start): the gateway's own roots, which are none; the upstream keeps its own.
        let outside = Asked::current().related.is_none();
        let question = (!outside)
            .then(|| roots.question(&server, InputRequest::ListRoots(Default::default())));
        let unanswered = roots.unanswered(&server);
        async move {
            let Some(question) = question else {
                tracing::debug!(upstream = %server, "roots/list outside any call: none");
                return Ok(Default::default());
            };
            match question?.await {
                Some(InputResponse::ListRoots(answer)) => Ok(answer),
                _ => Err(unanswered),
            }
        }
    })
}

/// Where the handler of one kind of question sends it.
#[derive(Clone)]
struct Relay {
    unrelayable: Arc<Unrelayable>,
    holds: Arc<Holds>,
    method: &'static str,
}

type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Option<InputResponse>> + Send>>;

impl Relay {
    fn new(unrelayable: &Arc<Unrelayable>, holds: &Arc<Holds>, method: &'static str) -> Relay {
        Relay {
            unrelayable: unrelayable.clone(),
            holds: holds.clone(),
            method,
        }
    }

    /// The caller's answer to `request`, which `server` asks now, when it asks during a call
    /// the gateway can tell (`None` when unanswered in time); the refusal otherwise.
    fn question(
        &self,
        server: &str,
        request: InputRequest,
    ) -> Result<Answer, toolwire_client::Error> {
        let asked = Asked::current();
        let to = asked.related.and_then(|id| {
            self.holds
                .waiting(server, toolwire_client::Sent::new(asked.connection, id))
        });
        let Some(to) = to else {
            return Err(self.unrelayable.refuse(server, self.method));
        };
        let holds = self.holds.clone();
        Ok(Box::pin(async move { holds.ask(to, request).await }))
    }

    /// What `server` is told of a question its caller did not answer.
    fn unanswered(&self, server: &str) -> toolwire_client::Error {
        toolwire_client::Error::Input(format!(
            "{} from the upstream {server}: the caller did not answer within {:?}, or could \
             not (it did not declare the capability), or the call ended",
            self.method,
            self.holds.ttl()
        ))
    }
}

/// The servers whose configuration (or the file's top) has `approval.ask` rules.
pub(crate) fn asking(config: &HostConfig) -> Vec<String> {
    let mut asking: Vec<String> = config
        .servers
        .iter()
        .filter(|s| !s.approval.ask.is_empty())
        .map(|s| format!("server \"{}\"", s.name))
        .collect();
    if !config.approval.ask.is_empty() {
        asking.insert(0, "the top of the file".into());
    }
    asking
}
