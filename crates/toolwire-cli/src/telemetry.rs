//! Traces exported with OTLP (HTTP/protobuf) by `toolwire serve` and `toolwire gateway`, when
//! an endpoint is configured: `--otlp-endpoint URL`, or the standard variables
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL, used as is) and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, `/v1/traces` added). The SDK reads the other
//! standard settings itself (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` and its argument, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`);
//! `OTEL_SDK_DISABLED=true` turns export off. Nothing configured, nothing is exported and the
//! request spans cost nothing (see `logs`).
//!
//! Only this binary links the OpenTelemetry SDK: the libraries make `tracing` spans and speak
//! the OpenTelemetry API. Spans are batched and sent from the SDK's own thread through the
//! workspace's reqwest, on this process's runtime, and what is still batched is sent when
//! the process stops ([`shutdown`]). The endpoint is shown without the credentials or query a
//! URL may carry.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The exporter, kept for [`shutdown`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The standard variable of the traces URL, used as is.
const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard variable of the collector's base URL.
const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard switch that turns the SDK off.
const DISABLED_ENV: &str = "OTEL_SDK_DISABLED";
/// The standard variable of the service's name; `toolwire` when unset.
const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
/// The path of traces under a collector's base URL (OTLP/HTTP).
const TRACES_PATH: &str = "/v1/traces";
/// How long one export may take before it is given up (the batch is dropped, not retried).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TelemetryError {
    /// The endpoint is not a URL the exporter can send to.
    #[error("{setting}: {shown} is not an http(s) URL of an OTLP collector")]
    Endpoint {
        /// The flag or variable that gave it.
        setting: &'static str,
        /// The endpoint without credentials or query.
        shown: String,
    },
    /// The exporter refused its configuration (a malformed OTEL_* variable).
    #[error("the OTLP exporter cannot start: {0}")]
    Exporter(String),
}

/// Where spans go: from `--otlp-endpoint` (a base URL), else from the standard variables;
/// `None` when nothing asks for export. `var` reads the environment.
fn endpoint(
    flag: Option<&str>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<(&'static str, String)>, TelemetryError> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if set(DISABLED_ENV).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let (setting, url) = match (
        flag.filter(|f| !f.trim().is_empty()),
        set(TRACES_ENDPOINT_ENV),
    ) {
        (Some(base), _) => ("--otlp-endpoint", traces_url(base)),
        (None, Some(url)) => (TRACES_ENDPOINT_ENV, url),
        (None, None) => match set(ENDPOINT_ENV) {
            Some(base) => (ENDPOINT_ENV, traces_url(&base)),
            None => return Ok(None),
        },
    };
    match url::Url::parse(url.trim()) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(Some((setting, parsed.to_string())))
        }
        _ => Err(TelemetryError::Endpoint {
            setting,
            shown: shown(&url),
        }),
    }
}

/// A collector's base URL with the traces path added, as `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
fn traces_url(base: &str) -> String {
    let base = base.trim();
    match base.split_once('?') {
        Some((path, query)) => format!("{}{TRACES_PATH}?{query}", path.trim_end_matches('/')),
        None => format!("{}{TRACES_PATH}", base.trim_end_matches('/')),
    }
}

/// An endpoint as it may be shown: scheme, host, port and path, never a user name, password or
/// query (where tokens are put).
pub(crate) fn shown(endpoint: &str) -> String {
    match url::Url::parse(endpoint.trim()) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => "(an unreadable URL)".into(),
    }
}

/// Export as started: the tracer for the `tracing` layer, and where spans go, to be said once
/// logging is set up.
pub(crate) struct Exporting {
    pub(crate) tracer: SdkTracer,
    /// The endpoint without credentials or query.
    pub(crate) shown: String,
    /// The flag or variable that gave it.
    pub(crate) setting: &'static str,
}

/// Starts exporting when an endpoint is configured, with the W3C trace context and baggage
/// propagators installed; `None` when export is off.
pub(crate) fn start(flag: Option<&str>) -> Result<Option<Exporting>, TelemetryError> {
    let Some((setting, url)) = endpoint(flag, |name| std::env::var(name).ok())? else {
        return Ok(None);
    };
    let client = Reqwest {
        client: reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| TelemetryError::Exporter(e.without_url().to_string()))?,
        runtime: tokio::runtime::Handle::current(),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(client)
        .with_endpoint(url.clone())
        .build()
        // Its message may quote the endpoint: shown without credentials.
        .map_err(|e| TelemetryError::Exporter(e.to_string().replace(&url, &shown(&url))))?;
    let mut resource = Resource::builder();
    if std::env::var_os(SERVICE_NAME_ENV).is_none_or(|v| v.is_empty()) {
        resource = resource.with_service_name("toolwire");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("toolwire");
    install_propagators();
    let _ = PROVIDER.set(provider);
    Ok(Some(Exporting {
        tracer,
        shown: shown(&url),
        setting,
    }))
}

/// A tracer that exports nothing, for JSON logs without a collector: each request span still
/// gets its trace id (the caller's, or a new one) for the log lines, and passes its context on
/// to upstreams, so that the lines of caller, gateway and upstream can be matched.
pub(crate) fn unexported() -> SdkTracer {
    install_propagators();
    SdkTracerProvider::builder().build().tracer("toolwire")
}

/// The W3C trace context and baggage propagators, for reading and writing `_meta`.
fn install_propagators() {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry::propagation::TextMapCompositePropagator::new(vec![
            Box::new(opentelemetry_sdk::propagation::TraceContextPropagator::new()),
            Box::new(opentelemetry_sdk::propagation::BaggagePropagator::new()),
        ]),
    );
}

/// Sends the spans still batched and stops the exporter (on the way out: a signal, the end of
/// stdin). Without export, nothing to do.
pub(crate) async fn shutdown() {
    let Some(provider) = PROVIDER.get().cloned() else {
        return;
    };
    // The SDK waits on its own thread for the last export, which runs on this runtime.
    let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    if let Ok(Err(error)) = done {
        tracing::warn!(target: "toolwire", %error, "the last traces could not be exported");
    }
}

/// The OTLP exporter's HTTP client: the workspace's reqwest, run on this process's runtime
/// (the SDK's batch thread has none of its own).
#[derive(Debug)]
struct Reqwest {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl HttpClient for Reqwest {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let response = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                // Without the URL, which may carry credentials.
                .map_err(|e| Box::new(e.without_url()) as HttpError)?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                headers.extend(response.headers().clone());
            }
            let body = response
                .bytes()
                .await
                .map_err(|e| Box::new(e.without_url()) as HttpError)?;
            answer.body(body).map_err(|e| Box::new(e) as HttpError)
        });
        Box::pin(async move { sent.await.map_err(|e| Box::new(e) as HttpError)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<(&'static str, String)>, TelemetryError> {
        endpoint(flag, |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    /// A flag, the environment, and the setting and URL they give.
    type Case<'a> = (
        Option<&'a str>,
        &'a [(&'a str, &'a str)],
        Option<(&'a str, &'a str)>,
    );

    #[test]
    fn the_endpoint_comes_from_the_flag_then_the_standard_variables() {
        let cases: [Case<'_>; 8] = [
            (None, &[], None),
            (None, &[(ENDPOINT_ENV, " ")], None),
            (
                Some("http://127.0.0.1:4318"),
                &[(TRACES_ENDPOINT_ENV, "http://other/v1/traces")],
                Some(("--otlp-endpoint", "http://127.0.0.1:4318/v1/traces")),
            ),
            (
                None,
                &[(ENDPOINT_ENV, "http://collector:4318/")],
                Some((ENDPOINT_ENV, "http://collector:4318/v1/traces")),
            ),
            (
                None,
                &[
                    (ENDPOINT_ENV, "http://collector:4318"),
                    (TRACES_ENDPOINT_ENV, "https://traces.example/custom"),
                ],
                Some((TRACES_ENDPOINT_ENV, "https://traces.example/custom")),
            ),
            (
                Some("http://c:4318/otlp"),
                &[],
                Some(("--otlp-endpoint", "http://c:4318/otlp/v1/traces")),
            ),
            (Some("http://c:4318"), &[(DISABLED_ENV, "true")], None),
            (
                Some("http://c:4318"),
                &[(DISABLED_ENV, "false")],
                Some(("--otlp-endpoint", "http://c:4318/v1/traces")),
            ),
        ];
        for (flag, vars, want) in cases {
            let got = from(flag, vars).unwrap();
            let got = got.as_ref().map(|(s, u)| (*s, u.as_str()));
            assert_eq!(got, want, "{flag:?} {vars:?}");
        }
    }

    #[test]
    fn a_bad_endpoint_is_refused_without_its_credentials() {
        for bad in [
            "collector:4318",
            "ftp://user:hunter2@collector/",
            "http://user:hunter2@/x?token=hunter2",
        ] {
            let error = from(Some(bad), &[]).unwrap_err().to_string();
            assert!(error.starts_with("--otlp-endpoint: "), "{error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn an_endpoint_is_shown_without_credentials_or_query() {
        assert_eq!(
            shown("https://user:hunter2@collector.example:4318/v1/traces?api_key=hunter2"),
            "https://collector.example:4318/v1/traces"
        );
        assert_eq!(shown("not a url"), "(an unreadable URL)");
    }
}
