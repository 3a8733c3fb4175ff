//! Messages the server starts. A 2026-07-28 server sends only notifications tied to a request
//! (progress, logs) or to a subscription; a legacy server may also send requests (`ping`,
//! `elicitation/create`, `sampling/createMessage`, `roots/list`) and unsolicited notifications
//! (list changes). Requests are answered with the same handlers that answer MRTR input requests;
//! list changes invalidate the caches (K-09) and reach legacy subscriptions.

use std::sync::Weak;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolwire_protocol::legacy::METHOD_PING;
use toolwire_protocol::methods::{CreateMessage, Elicit, ListRoots, Method};
use toolwire_protocol::{
    CreateMessageParams, ElicitRequestParams, LoggingLevel, LoggingMessageParams,
    NOTIFICATION_CANCELLED, NOTIFICATION_MESSAGE, NOTIFICATION_PROGRESS,
    NOTIFICATION_TOOLS_LIST_CHANGED,
};

use crate::client::{Client, Inner};
use crate::error::{Error, Result};
use crate::input::Asked;
use crate::state::Era;
use crate::transport::Outgoing;
use crate::transport::stdio::Incoming;

/// Consumes the stdio messages that belong to no request, for as long as the client lives.
pub(crate) fn serve_stdio(client: &Client, mut incoming: mpsc::Receiver<Incoming>) {
    let weak: Weak<Inner> = std::sync::Arc::downgrade(&client.inner);
    tokio::spawn(async move {
        while let Some((message, related)) = incoming.recv().await {
            let Some(inner) = weak.upgrade() else { break };
            Client { inner }.incoming_for(message, related);
        }
    });
}

/// Sends a server log message to `tracing` at a matching level.
pub(crate) fn trace_log(log: &LoggingMessageParams) {
    let logger = log.logger.as_deref().unwrap_or("");
    match log.level {
        LoggingLevel::Debug => tracing::debug!(logger, data = %log.data, "server log"),
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(logger, data = %log.data, "server log");
        }
        LoggingLevel::Warning => tracing::warn!(logger, data = %log.data, "server log"),
        _ => tracing::error!(logger, level = %log.level, data = %log.data, "server log"),
    }
}

impl Client {
    /// Handles a message the server started that belongs to no request of ours.
    pub(crate) fn incoming(&self, message: Value) {
        self.incoming_for(message, None);
    }

    /// Handles a message the server started, which came for request `related` (on that
    /// request's own response stream, or as the one request in flight on stdio): a server
    /// request's handler is told so ([`Asked`]).
    pub(crate) fn incoming_for(&self, message: Value, related: Option<i64>) {
        let Some(method) = message["method"].as_str() else {
            return;
        };
        if message.get("id").is_some() {
            if !self.is_legacy() {
                // 2026-07-28 servers send no requests (V-15); answering would put a response
                // where none belongs.
                tracing::warn!(%method, "ignoring a request from a 2026-07-28 server");
                return;
            }
            let client = self.clone();
            tokio::spawn(async move { client.answer_server_request(message, related).await });
            return;
        }
        match method {
            NOTIFICATION_TOOLS_LIST_CHANGED => self.invalidate_tools(),
            NOTIFICATION_MESSAGE => {
                if let Ok(log) = serde_json::from_value(message["params"].clone()) {
                    trace_log(&log);
                }
                return;
            }
            NOTIFICATION_CANCELLED | NOTIFICATION_PROGRESS => return,
            _ => {}
        }
        // Legacy subscriptions see unsolicited notifications; nobody listening is fine.
        let _ = self.inner.events.send(message);
    }

    /// Answers a legacy server's request with the input handlers.
    async fn answer_server_request(&self, request: Value, related: Option<i64>) {
        let id = request["id"].clone();
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        // A handler that never finishes must not keep the server's request open forever: the
        // client's timeout bounds it, as it bounds the handlers of MRTR rounds.
        let timeout = self.inner.config.timeout;
        let asked = Asked::scoped(
            Asked {
                related,
                connection: self.connection(),
            },
            self.server_request_result(&method, params),
        );
        let outcome = tokio::time::timeout(timeout, asked)
            .await
            .unwrap_or_else(|_| {
                Err((
                    -32603,
                    format!("the client's handler did not answer within {timeout:?}"),
                ))
            });
        let response = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                tracing::warn!(%method, %message, "refused the server's request");
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        let era = self.state().era.clone();
        let (version, session) = self.wire_identity(&era);
        let out = Outgoing {
            id: None,
            method: "",
            body: response.to_string(),
            name: None,
            mirrored: &[],
            version: Some(&version),
            session: session.as_deref(),
            legacy: true,
            bearer: None,
            trace: None,
        };
        if let Err(error) = self.inner.transport.send(&out).await {
            if self.is_closed() {
                // Closed while the handler ran (a server asks for roots as it starts, and a
                // short command is done by then): nobody is left to answer.
                tracing::debug!(%method, %error, "the client closed before the server's request was answered");
            } else {
                tracing::warn!(%method, %error, "could not answer the server's request");
            }
        }
    }

    async fn server_request_result(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, (i64, String)> {
        let handlers = &self.inner.config.handlers;
        let invalid = |e: serde_json::Error| (-32602, format!("invalid params: {e}"));
        let failed = |e: Error| (-32603, e.to_string());
        let unsupported = || (-32601, format!("this client does not handle {method}"));
        let result: Result<Value, (i64, String)> = match method {
            METHOD_PING => Ok(json!({})),
            Elicit::METHOD => {
                let params: ElicitRequestParams =
                    serde_json::from_value(params).map_err(invalid)?;
                if let Some(refusal) = handlers.undeclared(&params) {
                    // An undeclared mode is invalid params in the legacy era (M-15, Q-04).
                    return Err((-32602, refusal.to_string()));
                }
                handlers
                    .elicit(params)
                    .await
                    .map(|r| json!(r))
                    .map_err(failed)
            }
            CreateMessage::METHOD => {
                let handler = handlers.sample.as_ref().ok_or_else(unsupported)?;
                let params: CreateMessageParams =
                    serde_json::from_value(params).map_err(invalid)?;
                handler(params).await.map(|r| json!(r)).map_err(failed)
            }
            ListRoots::METHOD => {
                let handler = handlers.roots.as_ref().ok_or_else(unsupported)?;
                handler().await.map(|r| json!(r)).map_err(failed)
            }
            _ => Err(unsupported()),
        };
        result
    }

    /// Whether the session is a legacy one.
    pub(crate) fn is_legacy(&self) -> bool {
        matches!(self.state().era, Era::Legacy(_))
    }
}
