//! What an operator sees of a running server: Prometheus metrics (`metrics`), traces (`trace`:
//! a span per request, its parent the caller's) and the health endpoints (`health`), served on
//! the MCP address
//! ([`HttpConfig::admin_endpoints`](crate::http::HttpConfig::admin_endpoints)) or on an admin
//! address of their own ([`admin_router`], [`serve_admin`]).

mod health;
pub(crate) mod metrics;
pub(crate) mod trace;

pub use health::{
    HEALTHZ_PATH, METRICS_CONTENT_TYPE, METRICS_PATH, NotReady, Observed, READYZ_PATH, Readiness,
    admin_router, serve_admin,
};
pub(crate) use health::{healthz, metrics as metrics_endpoint, readyz};
pub use metrics::{
    CLIENT_OPERATION_DURATION, DURATION_BUCKETS, Metrics, MetricsError, OTHER, RefusalReason,
    SERVER_OPERATION_DURATION, UNKNOWN_TOOL, error_label,
};
