//! What an operator sees of the gateway besides the downstream server's own metrics: each
//! upstream's state (`toolwire_upstream_up`, read from the host at each scrape), the latency of
//! calls made upstream (`mcp_client_operation_duration_seconds`), refusals by the gateway's
//! rules (`policy`) and by changed pins (`pin`), and readiness (O-07, O-08).
//!
//! Readiness: the gateway is not ready while an upstream is still on its first try, nor when
//! every configured upstream has failed (it would serve nothing that works). An upstream that
//! fails while others serve only degrades it (`/readyz` answers 200 and lists it under
//! `degraded`; `toolwire_upstream_up` is 0): every instance of a gateway shares its upstreams,
//! so failing readiness for one of several would take every instance out of the load balancer
//! at once and turn a partial outage into a total one. Alert on `toolwire_upstream_up == 0`.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts};
use toolwire_host::{Called, Host, Outcome, ServerState};
use toolwire_server::observe::{
    CLIENT_OPERATION_DURATION, DURATION_BUCKETS, Metrics, NotReady, Readiness, RefusalReason,
    error_label,
};

use crate::starting::Starting;

/// The gateway's families in the downstream server's registry.
pub(crate) struct GatewayMetrics {
    metrics: Metrics,
    calls: HistogramVec,
}

impl GatewayMetrics {
    /// Registers the gateway's families in `metrics`, the upstreams' state read from
    /// `upstreams` at each scrape. `None` (logged) if a name is taken in the registry.
    pub(crate) fn register(metrics: &Metrics, upstreams: Upstreams) -> Option<GatewayMetrics> {
        let made = (|| {
            let calls = HistogramVec::new(
                HistogramOpts::new(
                    CLIENT_OPERATION_DURATION,
                    "Duration of the gateway's calls to its upstream servers",
                )
                .buckets(DURATION_BUCKETS.to_vec()),
                &[
                    "mcp_method_name",
                    "gen_ai_tool_name",
                    "error_type",
                    "upstream",
                ],
            )?;
            metrics.registry().register(Box::new(calls.clone()))?;
            metrics
                .registry()
                .register(Box::new(UpstreamUp::new(upstreams)?))?;
            Ok::<_, prometheus::Error>(calls)
        })();
        match made {
            Ok(calls) => Some(GatewayMetrics {
                metrics: metrics.clone(),
                calls,
            }),
            Err(error) => {
                tracing::error!(%error, "the gateway's metrics could not be registered");
                None
            }
        }
    }

    /// Records a call of `tool` (the name the gateway serves it under: only served tools are
    /// called, so their number bounds the series) made upstream to `upstream`.
    pub(crate) fn observe_call(&self, upstream: &str, tool: &str, called: &Called, took: Duration) {
        let error = match (called.outcome, &called.error) {
            (_, Some(error)) => error_label(error.code),
            (Outcome::Answered, None) if called.result.is_error() => "tool_error",
            (Outcome::Answered | Outcome::InputRequired, None) => "",
            (Outcome::Refused, None) => "refused",
            (Outcome::Unknown, None) => "unknown_tool",
            (Outcome::Unauthorized, None) => "unauthorized",
            (Outcome::Cancelled, None) => "cancelled",
            (_, None) => "unavailable",
        };
        self.calls
            .with_label_values(&["tools/call", tool, error, upstream])
            .observe(took.as_secs_f64());
        if called.outcome == Outcome::Refused {
            // The host refuses only what its pins hold back: a definition changed since it
            // was approved (the gateway's own rules are applied before the host is asked).
            self.metrics.count_refusal(RefusalReason::Pin);
        }
    }

    /// Counts a call the gateway's rules refused.
    pub(crate) fn count_policy_refusal(&self) {
        self.metrics.count_refusal(RefusalReason::Policy);
    }
}

/// The counter of searches answered lexically though an embeddings endpoint is configured
/// (`toolwire_search_lexical_fallbacks_total`, by `reason`: `not_ready` while the tools'
/// vectors are computed, `failed` when the endpoint failed or timed out for the query),
/// registered in `metrics`; `None` (logged) if the name is taken.
pub(crate) fn search_fallbacks(metrics: &Metrics) -> Option<IntCounterVec> {
    let made = (|| {
        let counter = IntCounterVec::new(
            Opts::new(
                "toolwire_search_lexical_fallbacks_total",
                "Searches answered lexically though an embeddings endpoint is configured",
            ),
            &["reason"],
        )?;
        metrics.registry().register(Box::new(counter.clone()))?;
        Ok::<_, prometheus::Error>(counter)
    })();
    made.map_err(|error| {
        tracing::error!(%error, "the search fallback counter could not be registered");
    })
    .ok()
}

/// What the gateway's metrics and readiness read of it: the host that reaches the upstreams
/// and which upstreams are on their first try. Both are held weakly, since the downstream
/// server that holds these checks is the gateway's own; `starting` is the gateway's alone (a
/// served tool's handler may still hold the host), so once the gateway is gone they see nothing.
#[derive(Clone)]
pub(crate) struct Upstreams {
    host: Weak<Host>,
    starting: Weak<Starting>,
}

impl Upstreams {
    /// What the gateway holds of its upstreams: `host` and `starting`.
    pub(crate) fn of(host: &Arc<Host>, starting: &Arc<Starting>) -> Upstreams {
        Upstreams {
            host: Arc::downgrade(host),
            starting: Arc::downgrade(starting),
        }
    }

    /// The host and the upstreams on their first try; `None` when the gateway is gone.
    fn upgrade(&self) -> Option<(Arc<Host>, Arc<Starting>)> {
        Some((self.host.upgrade()?, self.starting.upgrade()?))
    }
}

/// `toolwire_upstream_up{upstream}`: 1 while an upstream is connected and listed, 0 while it
/// failed or has not answered yet; read from the host at each scrape.
struct UpstreamUp {
    upstreams: Upstreams,
    desc: Desc,
}

impl UpstreamUp {
    fn new(upstreams: Upstreams) -> prometheus::Result<Self> {
        let desc = Desc::new(
            "toolwire_upstream_up".into(),
            "Whether an upstream server is connected and its tools listed (1) or not (0)".into(),
            vec!["upstream".into()],
            Default::default(),
        )?;
        Ok(UpstreamUp { upstreams, desc })
    }
}

impl Collector for UpstreamUp {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some((host, _)) = self.upstreams.upgrade() else {
            return Vec::new();
        };
        let opts = Opts::new(self.desc.fq_name.clone(), self.desc.help.clone());
        let Ok(up) = IntGaugeVec::new(opts, &["upstream"]) else {
            return Vec::new();
        };
        for status in host.servers() {
            let connected = matches!(status.state, ServerState::Connected { .. });
            up.with_label_values(&[status.name.as_str()])
                .set(i64::from(connected));
        }
        up.collect()
    }
}

/// The gateway's readiness check, given to the downstream server's builder before the gateway
/// exists, and pointed at it once it does.
#[derive(Clone, Default)]
pub(crate) struct UpstreamsReady(Arc<OnceLock<Upstreams>>);

impl UpstreamsReady {
    /// Points the check at the gateway's upstreams.
    pub(crate) fn set(&self, upstreams: Upstreams) {
        let _ = self.0.set(upstreams);
    }
}

impl Readiness for UpstreamsReady {
    fn check(&self) -> BoxFuture<'_, Vec<NotReady>> {
        Box::pin(async move {
            let Some((host, starting)) = self.0.get().and_then(Upstreams::upgrade) else {
                return vec![NotReady::new("gateway", "the gateway is starting")];
            };
            let starting: Vec<String> = starting.names();
            let statuses = host.servers();
            let any_connected = statuses
                .iter()
                .any(|s| matches!(s.state, ServerState::Connected { .. }));
            let mut parts = Vec::new();
            for status in &statuses {
                let part = format!("upstream:{}", status.name);
                if starting.contains(&status.name) {
                    parts.push(NotReady::new(
                        part,
                        "its first connection and listing have not ended yet",
                    ));
                } else if let ServerState::Failed { error } = &status.state {
                    let reason = format!(
                        "it cannot be reached or listed: {}",
                        toolwire_sanitize::text::clean(error).0
                    );
                    parts.push(if any_connected {
                        NotReady::degraded(part, reason)
                    } else {
                        NotReady::new(part, reason)
                    });
                }
            }
            parts
        })
    }
}
