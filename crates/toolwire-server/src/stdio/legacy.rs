//! The legacy side of the stdio transport: a connection that begins with a legacy `initialize`
//! (2025-11-25 and earlier) becomes a legacy session. Its requests without a 2026-07-28 `_meta`
//! run with what it declared at `initialize`, list changes and updates of subscribed resources
//! are sent on it, and the server's own requests to the client (input for a handler) are
//! answered on it.

use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::legacy::InitializeParams;
use toolwire_protocol::{ErrorObject, RawMessage, RequestId};

use super::Connection;
use crate::legacy::{LegacyCall, LegacyStep, Peer, empty_result, read_initialize};
use crate::request::followed::Following;
use crate::request::outbound::{Frame, Outbound};
use crate::request::outcome::Final;
use crate::server::Server;
use crate::server::visibility::SeenTools;
use crate::state::sessions::SessionRecord;
use crate::tools::catalog::{insufficient_scope, permits};
use crate::tools::visibility::Follower;

/// A legacy client's session on this connection.
pub(super) struct LegacyConnection {
    session: Arc<Mutex<SessionRecord>>,
    peer: Arc<Peer>,
    /// The session's subscriptions, counted as followed here while the connection lasts.
    following: Following,
}

impl LegacyConnection {
    fn session(&self) -> std::sync::MutexGuard<'_, SessionRecord> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection is closing: every wait for the client's answers ends.
    pub(super) fn close(&self) {
        self.peer.close();
    }
}

impl Connection {
    /// A legacy `initialize`: the connection becomes a legacy session, told about list changes
    /// and subscribed resources from now on.
    pub(super) fn legacy_initialize(
        &mut self,
        id: &RequestId,
        params: Option<&RawValue>,
    ) -> Result<Final, ErrorObject> {
        if self.legacy.is_some() {
            return Err(ErrorObject::invalid_request(
                "this connection is already initialized",
            ));
        }
        let params: InitializeParams = read_initialize(params)?;
        let result = self.server.initialize_result(&params);
        tracing::debug!(version = %result.protocol_version, client = ?params.client_info, "legacy client initialized over stdio");
        let follower = Follower {
            principal: self.caller.principal.clone(),
            scopes: self.caller.scopes.clone(),
            claims: None,
            client: params.client_info.clone(),
        };
        let session = SessionRecord::new(
            "stdio".into(),
            result.protocol_version.clone(),
            params.capabilities,
            params.client_info,
            self.caller.principal.as_deref().map(str::to_owned),
        );
        let legacy = LegacyConnection {
            session: Arc::new(Mutex::new(session)),
            peer: Arc::new(Peer::default()),
            following: self.server.followers().hold(Default::default()),
        };
        self.tasks.spawn(notify_changes(
            self.server.clone(),
            (
                legacy.session.clone(),
                SeenTools::new(&self.server, follower),
            ),
            self.tx.clone(),
            self.closing.clone(),
        ));
        self.legacy = Some(legacy);
        Ok(Final::result(id, &result))
    }

    /// A request without a 2026-07-28 `_meta`: a legacy session's, or refused with `modern`
    /// (the reason a 2026-07-28 request would be refused) if the connection is not one.
    pub(super) fn legacy_request(
        &mut self,
        id: RequestId,
        method: &str,
        params: Option<&RawValue>,
        modern: ErrorObject,
    ) -> Result<Option<Final>, ErrorObject> {
        let Some(legacy) = &self.legacy else {
            return Err(modern);
        };
        match self.server.legacy_step(method, params)? {
            LegacyStep::Initialize => {
                return Err(ErrorObject::invalid_request(
                    "this connection is already initialized",
                ));
            }
            LegacyStep::Ping => {}
            LegacyStep::SetLevel(level) => legacy.session().log_level = Some(level),
            LegacyStep::Subscribe(uri) => {
                let needed = self.server.resource_scopes(&uri);
                if !permits(self.caller.scopes.as_deref(), &needed) {
                    return Err(insufficient_scope("resource", &uri, &needed));
                }
                let mut session = legacy.session();
                session.subscriptions.insert(uri);
                legacy.following.set(session.subscriptions.clone());
            }
            LegacyStep::Unsubscribe(uri) => {
                let mut session = legacy.session();
                session.subscriptions.remove(&uri);
                legacy.following.set(session.subscriptions.clone());
            }
            LegacyStep::Served => {
                let session = legacy.session().clone();
                let peer = legacy.peer.clone();
                self.check_unused(&id)?;
                let cancel = CancellationToken::new();
                let generation = self.track(&id, &cancel);
                let call = LegacyCall {
                    session,
                    scopes: self.caller.scopes.clone(),
                    claims: None,
                    token: None,
                    address: None,
                    peer,
                    outbound: Some(self.tx.clone()),
                    cancel: cancel.clone(),
                    closing: self.closing.clone(),
                };
                let (server, method) = (self.server.clone(), method.to_owned());
                let params = params.map(|p| p.to_owned());
                let request_id = id.clone();
                let work = Box::pin(async move {
                    server
                        .run_legacy(&request_id, &method, params.as_deref(), call)
                        .await
                });
                self.spawn(id, generation, cancel, work);
                return Ok(None);
            }
        }
        Ok(Some(empty_result(&id)))
    }

    /// A response from the client: the answer to one of the server's requests in a legacy
    /// session (B-09: a 2026-07-28 server sends no requests, so otherwise it is ignored).
    pub(super) fn response(&self, raw: &RawMessage<'_>) {
        let (Some(legacy), Some(id)) = (&self.legacy, raw.request_id()) else {
            // B-09
            tracing::warn!("ignoring a JSON-RPC response to no request of this server");
            return;
        };
        let answer = match (&raw.error, raw.result) {
            (Some(error), _) => Err(error.clone()),
            (None, Some(result)) => Ok(result.to_owned()),
            (None, None) => Err(ErrorObject::invalid_request("a response without a result")),
        };
        if !legacy.peer.answer(&id, answer) {
            tracing::debug!(%id, "a response to no waiting request");
        }
    }
}

/// Sends a legacy session the list changes and updates of the resources it subscribed to,
/// until the connection closes.
async fn notify_changes(
    server: Server,
    (session, mut seen): (Arc<Mutex<SessionRecord>>, SeenTools),
    tx: Outbound,
    closing: CancellationToken,
) {
    let mut changes = server.subscribe_changes();
    loop {
        let change = tokio::select! {
            _ = closing.cancelled() => return,
            change = changes.recv() => change,
        };
        if matches!(
            change,
            Err(tokio::sync::broadcast::error::RecvError::Closed)
        ) {
            return;
        }
        // A change of tools it cannot see is not the session's.
        if change
            .as_ref()
            .is_ok_and(|change| !seen.is_news(&server, change))
        {
            continue;
        }
        let subscriptions = session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .subscriptions
            .clone();
        for json in crate::legacy::notifications_for(&server, &change, &subscriptions) {
            let frame = Frame {
                json,
                last: false,
                error_code: None,
                cancel: closing.clone(),
                charge: None,
            };
            if !tx.send(frame).await {
                return;
            }
        }
    }
}
