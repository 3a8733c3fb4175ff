//! Which protocol era the server speaks, settled once and cached (V-14):
//!
//! - stdio: a `server/discover` probe first (V-09, V-11). A result or a modern error
//!   (-32020/-32021/-32022, Q-05) means 2026-07-28 (never fall back then); any other error, a
//!   crash or silence until the probe timeout means a legacy server, whatever the error code
//!   (V-10), and the `initialize` handshake follows — unless the server refuses `initialize`
//!   with a modern error too (V-08: a modern server that was only slow to start). A restarted
//!   process is settled again.
//! - HTTP: no probe. The first request goes out as 2026-07-28; a 400 (or 404/405) whose body is
//!   not a modern error means a legacy server (V-12): `initialize`, then the request again. The
//!   era is remembered per origin for the whole process.
//!
//! A legacy session (2025-11-25 and earlier) keeps the version the server chose, its
//! `Mcp-Session-Id` on HTTP, and its `initialize` result, which stands in for `server/discover`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::Value;
use toolwire_protocol::legacy::{Initialize, InitializeParams, NOTIFICATION_INITIALIZED};
use toolwire_protocol::methods::{Discover, MetaParams, Method};
use toolwire_protocol::{Notification, Request, Version2};

use crate::client::rpc::Progress;
use crate::client::{Client, RpcOptions, is_modern_error};
use crate::error::{Error, Result};
use crate::state::{Era, LEGACY_VERSIONS, LegacySession, ServerEra};
use crate::transport::body_of;
use crate::transport::{Failure, Outgoing, Reply, Transport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Modern,
    Legacy,
}

/// The era per HTTP origin, for the whole process (V-14).
static HTTP_ERAS: LazyLock<Mutex<HashMap<String, Known>>> = LazyLock::new(Default::default);

fn http_era(origin: &str) -> Option<Known> {
    HTTP_ERAS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(origin)
        .copied()
}

fn forget_http_era(origin: &str) {
    HTTP_ERAS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(origin);
}

fn remember_http_era(origin: String, era: Known) {
    HTTP_ERAS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(origin, era);
}

impl Client {
    /// The era settled so far (`None` before the first exchange over HTTP).
    pub fn era(&self) -> Option<ServerEra> {
        let state = self.state();
        match &state.era {
            Era::Unknown => None,
            Era::Modern => Some(ServerEra::Modern {
                version: state.version.clone(),
            }),
            Era::Legacy(s) => Some(ServerEra::Legacy {
                version: s.version.clone(),
            }),
        }
    }

    /// The era, when a request need not wait for anything to use it: an HTTP server's, once
    /// settled. `None`: ask [`Client::era_for_request`].
    pub(crate) fn settled_era(&self) -> Option<Era> {
        match &self.inner.transport {
            Transport::Http(_) => {
                let era = self.state().era.clone();
                (!matches!(era, Era::Unknown)).then_some(era)
            }
            Transport::Stdio(_) => None,
        }
    }

    /// The era to send the next request in, settling it first where needed.
    pub(crate) async fn era_for_request(&self) -> Result<Era> {
        match &self.inner.transport {
            Transport::Http(http) => {
                let era = self.state().era.clone();
                if !matches!(era, Era::Unknown) {
                    return Ok(era);
                }
                match http_era(&http.origin()) {
                    Some(Known::Legacy) if self.inner.config.legacy_fallback => {
                        match self.establish_legacy_http(&era).await {
                            Ok(era) => Ok(era),
                            Err(error) => {
                                // The origin spoke legacy before; now it does not: probe again
                                // by sending this request as 2026-07-28 (V-14).
                                tracing::info!(%error, "initialize failed where a legacy server was remembered; trying 2026-07-28");
                                forget_http_era(&http.origin());
                                Ok(Era::Unknown)
                            }
                        }
                    }
                    _ => Ok(era),
                }
            }
            Transport::Stdio(stdio) => {
                let generation = stdio.ensure_running().await?;
                {
                    let state = self.state();
                    if state.generation == generation && !matches!(state.era, Era::Unknown) {
                        return Ok(state.era.clone());
                    }
                }
                let _settling = self.inner.establish.lock().await;
                let generation = stdio.ensure_running().await?;
                let previous = {
                    let state = self.state();
                    if state.generation == generation && !matches!(state.era, Era::Unknown) {
                        return Ok(state.era.clone());
                    }
                    state.era.clone()
                };
                let era = match previous {
                    // The same command spoke legacy before: initialize straight away (V-14).
                    Era::Legacy(_) => match self.initialize().await {
                        Ok(session) => Era::Legacy(session),
                        Err(_) => self.probe_stdio().await?,
                    },
                    _ => self.probe_stdio().await?,
                };
                // The handshake may have restarted the server (a legacy server that died on the
                // probe): record the generation it was settled with.
                let mut state = self.state();
                state.era = era.clone();
                state.generation = stdio.generation();
                Ok(era)
            }
        }
    }

    /// The version header and session id of a request in `era`.
    pub(crate) fn wire_identity(&self, era: &Era) -> (String, Option<String>) {
        match era {
            Era::Legacy(s) => (s.version.clone(), s.session.clone()),
            _ => (self.state().version.clone(), None),
        }
    }

    /// Whether a reply to a request sent in an unsettled HTTP era shows a legacy server: a 400,
    /// 404 or 405 whose body is not a modern error (V-12, Q-05).
    pub(crate) fn is_legacy_signal(&self, era: &Era, reply: &Reply) -> bool {
        if !self.is_legacy_status(era, reply.status) {
            return false;
        }
        let code = reply
            .message
            .error()
            .and_then(|error| error["code"].as_i64())
            .unwrap_or(0);
        let modern = is_modern_error(code) || (reply.status == 404 && code == -32601);
        !modern
    }

    pub(crate) fn is_legacy_status(&self, era: &Era, status: u16) -> bool {
        self.is_http() && matches!(era, Era::Unknown) && matches!(status, 400 | 404 | 405)
    }

    /// Tries to switch an unsettled HTTP client to a legacy session: true when it did. A server
    /// that refuses `initialize` too is taken for a modern one whose reply stands (re-probe on
    /// failure, V-14); with the fallback off, the evidence becomes the error.
    pub(crate) async fn fall_back(&self, era: &Era, evidence: &str) -> Result<bool> {
        if !self.inner.config.legacy_fallback {
            return Err(Error::InvalidResponse(format!(
                "the server does not speak 2026-07-28 ({evidence}) and legacy fallback is off"
            )));
        }
        // V-12
        tracing::info!(%evidence, "the server answered like a legacy (2025-11-25) server; initializing a session");
        match self.establish_legacy_http(era).await {
            Ok(_) => Ok(true),
            Err(error) => {
                tracing::info!(%error, "initialize failed too; staying with 2026-07-28");
                self.confirm_modern(era);
                Ok(false)
            }
        }
    }

    async fn establish_legacy_http(&self, seen: &Era) -> Result<Era> {
        let _settling = self.inner.establish.lock().await;
        let current = self.state().era.clone();
        if !same_era(&current, seen) {
            // Settled (or renewed) by another request meanwhile.
            return Ok(current);
        }
        let session = self.initialize().await?;
        let era = Era::Legacy(session);
        self.state().era = era.clone();
        if let Transport::Http(http) = &self.inner.transport {
            remember_http_era(http.origin(), Known::Legacy);
        }
        Ok(era)
    }

    /// Records that a request sent in an unsettled era got a modern answer.
    pub(crate) fn confirm_modern(&self, era: &Era) {
        if !matches!(era, Era::Unknown) {
            return;
        }
        let mut state = self.state();
        if matches!(state.era, Era::Unknown) {
            state.era = Era::Modern;
            drop(state);
            if let Transport::Http(http) = &self.inner.transport {
                remember_http_era(http.origin(), Known::Modern);
            }
        }
    }

    /// Drops an expired legacy HTTP session so that the next request initializes again.
    pub(crate) fn forget_legacy_session(&self, era: &Era) {
        let mut state = self.state();
        if same_era(&state.era, era) {
            state.era = Era::Unknown;
        }
    }

    /// The stdio probe (V-09): `server/discover`, modern-style.
    async fn probe_stdio(&self) -> Result<Era> {
        let id = self.next_id();
        let params = crate::client::params(&MetaParams::default());
        let body = self.envelope(
            &Era::Unknown,
            id,
            Discover::METHOD,
            &params,
            Progress::Unwanted,
        )?;
        let version = self.state().version.clone();
        let out = Outgoing {
            id: Some(id),
            method: Discover::METHOD,
            body,
            name: None,
            mirrored: &[],
            version: Some(&version),
            session: None,
            legacy: false,
            bearer: None,
            trace: None,
        };
        let options = RpcOptions {
            timeout: Some(self.inner.config.probe_timeout),
            ..Default::default()
        };
        let evidence = match self.exchange(&out, &options).await {
            Ok(reply) => {
                if let Some(result) = reply.message.result() {
                    self.adopt_discovered_version(&result)?;
                    return Ok(Era::Modern);
                }
                let null = Value::Null;
                let error = reply.message.error().unwrap_or(&null);
                if is_modern_error(error["code"].as_i64().unwrap_or(0)) {
                    let error = serde_json::from_value(error.clone())
                        .map_err(|e| Error::InvalidResponse(format!("malformed error: {e}")))?;
                    return self.modern_refusal(error);
                }
                format!("server/discover answered {error}")
            }
            Err(Failure::Error(Error::Timeout(after))) => {
                format!("no answer to server/discover within {after:?}")
            }
            Err(Failure::Lost(why)) => format!("the server died on server/discover: {why}"),
            Err(other) => return Err(other.into_error()),
        };
        if !self.inner.config.legacy_fallback {
            return Err(Error::InvalidResponse(format!(
                "the server does not speak 2026-07-28 ({evidence}) and legacy fallback is off"
            )));
        }
        // V-09
        tracing::info!(%evidence, "taking the server for a legacy (2025-11-25) server; initializing a session");
        match self.initialize().await {
            Ok(session) => Ok(Era::Legacy(session)),
            // A modern server that was slow to answer the probe (a first `npx -y`, a container,
            // a JVM) refuses `initialize` with a modern error naming its versions (V-08, Q-05):
            // that proves the era as well as a discover result would.
            Err(Error::Rpc(error)) if is_modern_error(error.code) => {
                tracing::info!(
                    code = error.code,
                    "the server refused initialize the 2026-07-28 way; it is a modern server"
                );
                self.modern_refusal(error)
            }
            Err(error) => Err(error),
        }
    }

    /// The era a modern error proves (-32020/-32021/-32022, Q-05): 2026-07-28, at a version both
    /// sides speak when the error is -32022 (none in common is the error itself).
    fn modern_refusal(&self, error: toolwire_protocol::ErrorObject) -> Result<Era> {
        if error.code == toolwire_protocol::UNSUPPORTED_PROTOCOL_VERSION {
            let Some(version) = self.mutual_version(&error) else {
                return Err(Error::Rpc(error));
            };
            self.state().version = version;
        }
        Ok(Era::Modern)
    }

    /// Picks our preferred version among those a discover result lists.
    fn adopt_discovered_version(&self, result: &Value) -> Result<()> {
        let Some(supported) = result.get("supportedVersions").and_then(Value::as_array) else {
            return Ok(());
        };
        let supported: Vec<&str> = supported.iter().filter_map(Value::as_str).collect();
        let mut state = self.state();
        if supported.contains(&state.version.as_str()) {
            return Ok(());
        }
        match self
            .inner
            .config
            .versions
            .iter()
            .find(|v| supported.contains(&v.as_str()))
        {
            Some(v) => {
                state.version = v.clone();
                Ok(())
            }
            None => Err(Error::InvalidResponse(format!(
                "the server supports {supported:?}, none of which this client speaks ({:?})",
                self.inner.config.versions
            ))),
        }
    }

    /// The legacy handshake: `initialize`, then `notifications/initialized`.
    async fn initialize(&self) -> Result<Arc<LegacySession>> {
        let id = self.next_id();
        let mut capabilities = self.capabilities();
        // Extensions are declared per request in 2026-07-28 only.
        capabilities.extensions = None;
        let params = InitializeParams {
            protocol_version: LEGACY_VERSIONS[0].to_owned(),
            capabilities,
            client_info: Some(self.inner.config.info.clone()),
            extra: Default::default(),
        };
        let body = body_of(&Request::new(id, Initialize::METHOD, params));
        let out = Outgoing {
            id: Some(id),
            method: Initialize::METHOD,
            body,
            name: None,
            mirrored: &[],
            version: None,
            session: None,
            legacy: true,
            bearer: None,
            trace: None,
        };
        let reply = self
            .exchange(&out, &RpcOptions::default())
            .await
            .map_err(Failure::into_error)?;
        if let Some(error) = reply.message.error() {
            let error = serde_json::from_value(error.clone())
                .map_err(|e| Error::InvalidResponse(format!("malformed error: {e}")))?;
            return Err(Error::Rpc(error));
        }
        let result = reply
            .message
            .result()
            .map(std::borrow::Cow::into_owned)
            .unwrap_or_default();
        let version = result["protocolVersion"].as_str().unwrap_or_default();
        if !LEGACY_VERSIONS.contains(&version) {
            return Err(Error::InvalidResponse(format!(
                "initialize: the server chose protocol version {version:?}, which this client does not speak"
            )));
        }
        let session = Arc::new(LegacySession {
            version: version.to_owned(),
            session: reply.session,
            initialized: result,
            subscribed: Default::default(),
        });
        let initialized = body_of(&Notification {
            jsonrpc: Version2,
            method: NOTIFICATION_INITIALIZED.to_owned(),
            params: None::<Value>,
        });
        self.inner
            .transport
            .send(&Outgoing {
                id: None,
                method: NOTIFICATION_INITIALIZED,
                body: initialized,
                name: None,
                mirrored: &[],
                version: Some(&session.version),
                session: session.session.as_deref(),
                legacy: true,
                bearer: None,
                trace: None,
            })
            .await?;
        tracing::info!(version = %session.version, "legacy session initialized");
        Ok(session)
    }
}

fn same_era(a: &Era, b: &Era) -> bool {
    match (a, b) {
        (Era::Unknown, Era::Unknown) | (Era::Modern, Era::Modern) => true,
        (Era::Legacy(x), Era::Legacy(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::ClientBuilder;

    #[test]
    fn the_default_probe_waits_for_slow_starters() {
        // A first `npx -y`, a container pull or a JVM takes well over 5 s before it reads its
        // first line; the probe's default must outlast such a start (V-09).
        let builder = ClientBuilder::new("x", "1");
        assert!(
            builder.probe_timeout >= Duration::from_secs(30),
            "{:?}",
            builder.probe_timeout
        );
        assert!(
            builder.probe_timeout < builder.timeout,
            "settling fits in a call"
        );
    }
}
