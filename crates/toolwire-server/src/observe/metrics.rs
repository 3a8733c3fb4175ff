//! Prometheus metrics of a server (O-01…O-04): the operation duration histogram of the
//! OpenTelemetry semantic conventions for MCP, and Toolwire's own counters and gauges, in one
//! [`prometheus::Registry`] that [`Metrics::encode`] writes in the text format 0.0.4.
//!
//! Cardinality is bounded by construction (O-02): a label value is a method this server
//! implements, a tool that is registered (any other name is `_unknown`), a protocol version
//! this crate knows (else `_other`), a JSON-RPC error code this crate knows (else `_other`),
//! or one of a fixed set of reasons and operations. Nothing a caller writes freely becomes a
//! label value.
//!
//! The per-request cost is a few atomic additions (O-03): a successful operation's series is
//! resolved once, on its first use, into a cell of a fixed table (method × transport ×
//! version, and per registered tool transport × version), so the hot path hashes no labels
//! and allocates nothing. Errors resolve their series by label, which is a hash lookup.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use toolwire_protocol::legacy::LEGACY_VERSIONS;
use toolwire_protocol::methods::{self as m, Method as _};

use crate::request::context::RequestContext;
use crate::request::incoming::Transport;
use crate::request::outcome::Final;
use crate::request::route::Route;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

/// The name of the server's operation histogram (semantic conventions: `mcp.server.operation.duration`).
pub const SERVER_OPERATION_DURATION: &str = "mcp_server_operation_duration_seconds";

/// The name of a client's operation histogram (semantic conventions:
/// `mcp.client.operation.duration`), for a gateway's calls to its upstreams.
pub const CLIENT_OPERATION_DURATION: &str = "mcp_client_operation_duration_seconds";

/// The label value of a tool name that is not registered, and of anything else not known.
pub const UNKNOWN_TOOL: &str = "_unknown";

/// The label value of a protocol version or error code outside the known set.
pub const OTHER: &str = "_other";

/// The buckets (seconds) of the operation histograms: the semantic conventions' boundaries
/// (10 ms to 300 s), with four below them, since a tool served in process answers in
/// microseconds.
pub const DURATION_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
];

/// The methods that get a series, in the order of [`Method`]'s discriminants.
const METHODS: [&str; 13] = [
    m::Discover::METHOD,
    m::ListTools::METHOD,
    m::CallTool::METHOD,
    m::Listen::METHOD,
    m::ListPrompts::METHOD,
    m::GetPrompt::METHOD,
    m::ListResources::METHOD,
    m::ListResourceTemplates::METHOD,
    m::ReadResource::METHOD,
    m::Complete::METHOD,
    m::GetTask::METHOD,
    m::UpdateTask::METHOD,
    m::CancelTask::METHOD,
];

/// The protocol versions that get a label value of their own; others are [`OTHER`].
const VERSIONS: [&str; 5] = [
    toolwire_protocol::PROTOCOL_VERSION,
    LEGACY_VERSIONS[0],
    LEGACY_VERSIONS[1],
    LEGACY_VERSIONS[2],
    LEGACY_VERSIONS[3],
];

/// Versions known plus [`OTHER`].
const VERSION_CELLS: usize = VERSIONS.len() + 1;

/// A method a server implements, by its index among the label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Method(usize);

impl Method {
    pub(crate) const DISCOVER: Method = Method(0);
    pub(crate) const LIST_TOOLS: Method = Method(1);
    pub(crate) const CALL_TOOL: Method = Method(2);
    pub(crate) const LISTEN: Method = Method(3);
    pub(crate) const LIST_PROMPTS: Method = Method(4);
    pub(crate) const GET_PROMPT: Method = Method(5);
    pub(crate) const LIST_RESOURCES: Method = Method(6);
    pub(crate) const LIST_TEMPLATES: Method = Method(7);
    pub(crate) const READ_RESOURCE: Method = Method(8);
    pub(crate) const COMPLETE: Method = Method(9);
    pub(crate) const TASKS_GET: Method = Method(10);
    pub(crate) const TASKS_UPDATE: Method = Method(11);
    pub(crate) const TASKS_CANCEL: Method = Method(12);

    /// Its name, the label value.
    pub(crate) fn name(self) -> &'static str {
        METHODS[self.0]
    }
}

/// How an operation ended, for its `error.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// A result: `error_type` empty.
    Ok,
    /// A `CallToolResult` with `isError`: `tool_error`.
    ToolError,
    /// A JSON-RPC error with this code.
    Error(i64),
}

/// Why a call was refused, the label of `toolwire_refusals_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// A tool's rate limit (quota) for the caller was used up.
    RateLimit,
    /// The HTTP flood limit of the client's address was reached.
    Flood,
    /// The caller lacks an OAuth scope that what it addresses needs.
    Scope,
    /// No usable access token.
    Auth,
    /// A gateway rule refused the call.
    Policy,
    /// A gateway tool's definition changed since it was approved (pinned).
    Pin,
}

impl RefusalReason {
    const ALL: [RefusalReason; 6] = [
        RefusalReason::RateLimit,
        RefusalReason::Flood,
        RefusalReason::Scope,
        RefusalReason::Auth,
        RefusalReason::Policy,
        RefusalReason::Pin,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::RateLimit => "rate_limit",
            RefusalReason::Flood => "flood",
            RefusalReason::Scope => "scope",
            RefusalReason::Auth => "auth",
            RefusalReason::Policy => "policy",
            RefusalReason::Pin => "pin",
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// A kind of call to the shared store, the label of the store counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum StoreCall {
    /// One command.
    Command = 0,
    /// A pipeline or transaction.
    Pipeline = 1,
    /// A server-side script (a compare-and-swap).
    Script = 2,
    /// A readiness check.
    Ping = 3,
}

/// The kinds of change of the output guard, in the order of [`Metrics::count_guard`].
const GUARD_ACTIONS: [&str; 5] = [
    "controls_removed",
    "secrets_redacted",
    "media_refused",
    "links_removed",
    "truncated",
];

const STORE_CALLS: [&str; 4] = ["command", "pipeline", "script", "ping"];

/// A metrics family that could not be registered: its name is taken in the registry, or is
/// not a valid Prometheus name.
#[derive(Debug, thiserror::Error)]
#[error("metrics family {name}: {source}")]
pub struct MetricsError {
    name: String,
    #[source]
    source: prometheus::Error,
}

/// A server's metrics: a Prometheus registry with the server's families in it. Cheap to
/// clone; clones share the registry. Give it to [`crate::ServerBuilder::metrics`]; serve it
/// with [`crate::observe::admin_router`] or [`crate::http::HttpConfig::admin_endpoints`].
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

struct Inner {
    registry: Registry,
    operations: HistogramVec,
    /// Successful operations of methods other than `tools/call`, by method × transport × version.
    fast: Vec<Cells>,
    /// `tools/call` of a name that is not registered.
    unknown_tool: ToolSeries,
    refusals: [IntCounter; 6],
    guard_actions: [IntCounter; 5],
    store_round_trips: [IntCounter; 4],
    store_failures: [IntCounter; 4],
    listen_streams: IntGauge,
    tasks: IntGauge,
}

/// Lazily resolved series of successful operations: transport × version.
type Cells = [[OnceLock<Histogram>; VERSION_CELLS]; 2];

/// One tool's resolved series, kept with the registered tool.
pub(crate) struct ToolSeries {
    name: Arc<str>,
    cells: Cells,
}

impl ToolSeries {
    pub(crate) fn new(name: &str) -> Self {
        ToolSeries {
            name: name.into(),
            cells: Default::default(),
        }
    }
}

impl std::fmt::Debug for ToolSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSeries")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Makes families and registers them in one registry, naming the one that fails.
struct Family<'a>(&'a Registry);

impl Family<'_> {
    fn add<C: prometheus::core::Collector + Clone + 'static>(
        &self,
        name: &str,
        make: impl FnOnce(&str) -> prometheus::Result<C>,
    ) -> Result<C, MetricsError> {
        let failed = |source| MetricsError {
            name: name.into(),
            source,
        };
        let family = make(name).map_err(failed)?;
        self.0.register(Box::new(family.clone())).map_err(failed)?;
        Ok(family)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with the server's families (none of them has a sample yet).
    pub fn new() -> Metrics {
        Metrics::with_registry(Registry::new())
            .expect("the server's own families have valid, distinct names")
    }

    /// The server's families in `registry`, beside what is already there; fails if one of
    /// their names is taken.
    pub fn with_registry(registry: Registry) -> Result<Metrics, MetricsError> {
        let family = Family(&registry);
        let operations = family.add(SERVER_OPERATION_DURATION, |name| {
            HistogramVec::new(
                HistogramOpts::new(
                    name,
                    "Duration of MCP requests as the server saw them, from the request admitted to its final message",
                )
                .buckets(DURATION_BUCKETS.to_vec()),
                &[
                    "mcp_method_name",
                    "gen_ai_tool_name",
                    "error_type",
                    "mcp_protocol_version",
                    "network_transport",
                ],
            )
        })?;
        let counters = |name: &str, help: &str, label: &str| {
            family.add(name, |name| {
                IntCounterVec::new(Opts::new(name, help), &[label])
            })
        };
        let refusals = counters(
            "toolwire_refusals_total",
            "Requests and calls refused, by reason",
            "reason",
        )?;
        let guard_actions = counters(
            "toolwire_output_guard_actions_total",
            "Tool results the output guard changed, by what it changed",
            "action",
        )?;
        let round_trips = counters(
            "toolwire_store_round_trips_total",
            "Calls to the shared state store, by kind of call",
            "operation",
        )?;
        let failures = counters(
            "toolwire_store_failures_total",
            "Calls to the shared state store that failed or timed out, by kind of call",
            "operation",
        )?;
        let gauge = |name: &str, help: &str| family.add(name, |name| IntGauge::new(name, help));
        let listen_streams = gauge(
            "toolwire_listen_streams",
            "Open subscriptions/listen streams on this instance",
        )?;
        let tasks = gauge("toolwire_tasks", "Tasks running on this instance")?;
        Ok(Metrics {
            inner: Arc::new(Inner {
                operations,
                fast: (0..METHODS.len()).map(|_| Cells::default()).collect(),
                unknown_tool: ToolSeries::new(UNKNOWN_TOOL),
                refusals: RefusalReason::ALL.map(|r| refusals.with_label_values(&[r.as_str()])),
                guard_actions: GUARD_ACTIONS.map(|a| guard_actions.with_label_values(&[a])),
                store_round_trips: STORE_CALLS.map(|op| round_trips.with_label_values(&[op])),
                store_failures: STORE_CALLS.map(|op| failures.with_label_values(&[op])),
                listen_streams,
                tasks,
                registry,
            }),
        })
    }

    /// The registry, for families of your own (a gateway registers its upstreams' here).
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Every family of the registry in the Prometheus text format 0.0.4.
    pub fn encode(&self) -> String {
        let families = self.inner.registry.gather();
        let mut text = String::new();
        if let Err(error) = prometheus::TextEncoder::new().encode_utf8(&families, &mut text) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        text
    }

    /// Counts a refusal under its reason (a gateway counts `policy` and `pin` refusals here).
    pub fn count_refusal(&self, reason: RefusalReason) {
        self.inner.refusals[reason.index()].inc();
    }

    /// Counts what the output guard changed in one result: each kind of change once.
    pub(crate) fn count_guard(&self, report: &crate::safety::output::Report) {
        let kinds = [
            report.controls > 0,
            report.secrets > 0,
            report.media > 0,
            report.links > 0,
            report.truncated,
        ];
        for (counter, changed) in self.inner.guard_actions.iter().zip(kinds) {
            if changed {
                counter.inc();
            }
        }
    }

    /// Counts a call to the shared store, and whether it failed.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn count_store_call(&self, call: StoreCall, failed: bool) {
        self.inner.store_round_trips[call as usize].inc();
        if failed {
            self.inner.store_failures[call as usize].inc();
        }
    }

    /// The open listen streams gauge, held up while the returned guard lives.
    pub(crate) fn listen_stream(&self) -> GaugeGuard {
        GaugeGuard::up(self.inner.listen_streams.clone())
    }

    /// The running tasks gauge, held up while the returned guard lives.
    pub(crate) fn task(&self) -> GaugeGuard {
        GaugeGuard::up(self.inner.tasks.clone())
    }

    /// Records one operation that took `took`. `tool` is the registered tool's series for
    /// `tools/call` (`None`: an unknown name); `version` the index of the request's protocol
    /// version ([`version_index`]).
    pub(crate) fn observe(
        &self,
        method: Method,
        tool: Option<&ToolSeries>,
        version: usize,
        transport: Transport,
        ended: Ended,
        took: Duration,
    ) {
        let tool = (method == Method::CALL_TOOL).then(|| tool.unwrap_or(&self.inner.unknown_tool));
        let seconds = took.as_secs_f64();
        let cells = match tool {
            Some(tool) => &tool.cells,
            None => &self.inner.fast[method.0],
        };
        if ended == Ended::Ok {
            cells[transport as usize][version]
                .get_or_init(|| self.series(method, tool, version, transport, ""))
                .observe(seconds);
            return;
        }
        let error = match ended {
            Ended::ToolError => "tool_error",
            Ended::Error(code) => error_label(code),
            Ended::Ok => "",
        };
        self.series(method, tool, version, transport, error)
            .observe(seconds);
    }

    fn series(
        &self,
        method: Method,
        tool: Option<&ToolSeries>,
        version: usize,
        transport: Transport,
        error: &str,
    ) -> Histogram {
        let tool = tool.map(|t| &*t.name).unwrap_or("");
        let version = VERSIONS.get(version).copied().unwrap_or(OTHER);
        self.inner.operations.with_label_values(&[
            method.name(),
            tool,
            error,
            version,
            transport.as_str(),
        ])
    }
}

/// A gauge held up by one while it lives.
pub(crate) struct GaugeGuard(IntGauge);

impl GaugeGuard {
    fn up(gauge: IntGauge) -> Self {
        gauge.inc();
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One operation being measured: its labels, resolved before it runs, and when it began.
///
/// `T` is the registry's view of the tool a `tools/call` names, whose series it counts in.
pub(crate) struct Observation<T> {
    method: Method,
    tool: Option<Arc<T>>,
    version: usize,
    transport: Transport,
    started: Instant,
}

impl<T: AsRef<ToolSeries>> Observation<T> {
    /// Starts measuring `route`, a call of `tool` if it is a `tools/call` of a registered tool:
    /// from the request admitted (read, checked and parsed) to its final message serialized,
    /// before the transport writes it; a listen stream's duration is its life.
    pub(crate) fn start(route: &Route, tool: Option<Arc<T>>, ctx: &RequestContext) -> Self {
        Observation {
            method: method_of(route),
            tool,
            version: version_index(ctx.protocol_version()),
            transport: ctx.transport(),
            started: Instant::now(),
        }
    }

    /// Records it, ended with `done`.
    pub(crate) fn finish(self, metrics: &Metrics, done: Option<&Final>) {
        let ended = match done {
            Some(Final {
                error_code: Some(code),
                ..
            }) => Ended::Error(*code),
            Some(done) if done.tool_error => Ended::ToolError,
            _ => Ended::Ok,
        };
        let series = self.tool.as_deref().map(AsRef::as_ref);
        let took = self.started.elapsed();
        metrics.observe(
            self.method,
            series,
            self.version,
            self.transport,
            ended,
            took,
        );
    }
}

/// The method of a route, as a label.
fn method_of(route: &Route) -> Method {
    match route {
        Route::Discover => Method::DISCOVER,
        Route::ListTools { .. } => Method::LIST_TOOLS,
        Route::CallTool(_) => Method::CALL_TOOL,
        Route::Listen { .. } => Method::LISTEN,
        Route::ListPrompts { .. } => Method::LIST_PROMPTS,
        Route::GetPrompt(_) => Method::GET_PROMPT,
        Route::ListResources { .. } => Method::LIST_RESOURCES,
        Route::ListResourceTemplates { .. } => Method::LIST_TEMPLATES,
        Route::ReadResource(_) => Method::READ_RESOURCE,
        Route::Complete(_) => Method::COMPLETE,
        Route::TasksGet { .. } => Method::TASKS_GET,
        Route::TasksUpdate { .. } => Method::TASKS_UPDATE,
        Route::TasksCancel { .. } => Method::TASKS_CANCEL,
    }
}

/// The index of a version among the label values; unknown ones share the last.
pub(crate) fn version_index(version: &str) -> usize {
    VERSIONS
        .iter()
        .position(|v| *v == version)
        .unwrap_or(VERSIONS.len())
}

/// The `error_type` label value of a JSON-RPC error code: the codes of JSON-RPC and MCP by
/// themselves, anything else (an upstream's or a handler's own code) as [`OTHER`], so that
/// a peer cannot make series without bound.
pub fn error_label(code: i64) -> &'static str {
    match code {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32002 => "-32002",
        -32020 => "-32020",
        -32021 => "-32021",
        -32022 => "-32022",
        -32042 => "-32042",
        -31429 => "-31429",
        _ => OTHER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_outside_the_known_set_share_one_label() {
        for (code, label) in [
            (-32602, "-32602"),
            (-32603, "-32603"),
            (-32022, "-32022"),
            (-32001, OTHER),
            (12345, OTHER),
            (i64::MIN, OTHER),
        ] {
            assert_eq!(error_label(code), label, "{code}");
        }
    }

    #[test]
    fn versions_outside_the_known_set_share_one_label() {
        for (version, index) in [
            ("2026-07-28", 0),
            ("2024-11-05", 4),
            ("1999-01-01", 5),
            ("", 5),
        ] {
            assert_eq!(version_index(version), index, "{version:?}");
        }
    }

    #[test]
    fn a_success_is_counted_once_under_its_labels() {
        let metrics = Metrics::new();
        let tool = ToolSeries::new("add");
        for _ in 0..3 {
            metrics.observe(
                Method::CALL_TOOL,
                Some(&tool),
                version_index("2026-07-28"),
                Transport::Tcp,
                Ended::Ok,
                Duration::from_micros(20),
            );
        }
        let text = metrics.encode();
        let line = "mcp_server_operation_duration_seconds_count{error_type=\"\",gen_ai_tool_name=\"add\",mcp_method_name=\"tools/call\",mcp_protocol_version=\"2026-07-28\",network_transport=\"tcp\"} 3";
        assert!(text.contains(line), "{text}");
    }

    #[test]
    fn the_method_names_are_the_protocol_ones() {
        use toolwire_protocol::methods::{self as m, Method as _};
        for (method, name) in [
            (Method::DISCOVER, m::Discover::METHOD),
            (Method::LIST_TOOLS, m::ListTools::METHOD),
            (Method::CALL_TOOL, m::CallTool::METHOD),
            (Method::LISTEN, m::Listen::METHOD),
            (Method::LIST_PROMPTS, m::ListPrompts::METHOD),
            (Method::GET_PROMPT, m::GetPrompt::METHOD),
            (Method::LIST_RESOURCES, m::ListResources::METHOD),
            (Method::LIST_TEMPLATES, m::ListResourceTemplates::METHOD),
            (Method::READ_RESOURCE, m::ReadResource::METHOD),
            (Method::COMPLETE, m::Complete::METHOD),
            (Method::TASKS_GET, m::GetTask::METHOD),
            (Method::TASKS_UPDATE, m::UpdateTask::METHOD),
            (Method::TASKS_CANCEL, m::CancelTask::METHOD),
        ] {
            assert_eq!(method.name(), name);
        }
    }
}
