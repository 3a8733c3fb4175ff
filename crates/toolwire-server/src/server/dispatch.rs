//! Running a request on a server: admitting it, checking its version, running its method with
//! its span and metrics around it, and the list pages every list method shares. Reading the
//! frame and its `_meta` is the request floor's (`request/frame.rs`).

use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ErrorObject, MessageKind, RawMessage, RequestId, RequestMeta, ResultMeta, ResultType,
};

use crate::observe::trace;
use crate::request::context::RequestContext;
use crate::request::cursor::ListKind;
use crate::request::frame::{read_frame, read_meta};
use crate::request::outbound::Outbound;
use crate::request::outcome::Final;
use crate::request::route::SUPPORTED_VERSIONS;
use crate::request::route::{Route, legacy_initialize, removed_method_error};
use crate::server::Server;
use crate::tools::catalog::{Entry, Snapshot, permits};

/// A list result page, its items spliced from their pre-serialized definitions.
struct ListPage<'a, T> {
    field: &'static str,
    items: &'a [Arc<T>],
    next_cursor: Option<String>,
    ttl_ms: u64,
    cache_scope: toolwire_protocol::CacheScope,
    meta: Option<&'a ResultMeta>,
}

impl<T: Entry> Serialize for ListPage<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("resultType", &ResultType::Complete)?;
        let items: Vec<&RawValue> = self.items.iter().map(|t| t.listed()).collect();
        map.serialize_entry(self.field, &items)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry("nextCursor", cursor)?;
        }
        map.serialize_entry("ttlMs", &self.ttl_ms)?;
        map.serialize_entry("cacheScope", &self.cache_scope)?;
        if let Some(meta) = self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}
impl Server {
    /// The transport-independent request checks: `_meta`, version, method and params.
    pub(crate) fn admit(
        &self,
        method: &str,
        raw: &RawMessage<'_>,
    ) -> Result<(RequestMeta, Route), ErrorObject> {
        let meta = read_meta(raw.params)
            .map_err(|e| legacy_initialize(method, raw.params).unwrap_or(e))?;
        self.check_version(&meta)?;
        let route =
            Route::parse(method, raw.params).map_err(|e| removed_method_error(method, e))?;
        Ok((meta, route))
    }

    /// [`Server::handle_message`]: one message in memory, what would be written out.
    pub(crate) async fn handle_in_memory(&self, message: &[u8]) -> Vec<String> {
        let max_depth = self.config().max_json_depth;
        let raw = match read_frame(message, max_depth) {
            Ok(raw) => raw,
            Err(e) => return vec![Final::error(e.id.as_ref(), &e.error).json],
        };
        let id = match raw.kind() {
            Ok(MessageKind::Request(id)) => id,
            Ok(_) => return Vec::new(),
            Err(why) => {
                return vec![
                    Final::error(
                        raw.request_id().as_ref(),
                        &ErrorObject::invalid_request(why),
                    )
                    .json,
                ];
            }
        };
        let method = raw.method.as_deref().unwrap_or_default();
        let (meta, route) = match self.admit(method, &raw) {
            Ok(admitted) => admitted,
            Err(error) => return vec![Final::error(Some(&id), &error).json],
        };
        let (tx, mut rx) = mpsc::channel(64);
        let cancel = CancellationToken::new();
        let ctx = RequestContext::new(
            id.clone(),
            meta,
            cancel,
            self.shutdown_token(),
            Some(Outbound::new(tx)),
            self.config().logging,
        );
        let finisher = ctx.clone();
        let mut work = std::pin::pin!(self.run(&id, route, ctx));
        let mut out = Vec::new();
        let done = loop {
            tokio::select! {
                biased;
                Some(frame) = rx.recv() => out.push(frame.json),
                done = &mut work => break done,
            }
        };
        finisher.finish().await;
        while let Ok(frame) = rx.try_recv() {
            out.push(frame.json);
        }
        out.extend(done.map(|f| f.json));
        out
    }

    /// -32022 unless the request's version is one this server implements (V-02).
    pub(crate) fn check_version(&self, meta: &RequestMeta) -> Result<(), ErrorObject> {
        if SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_str()) {
            Ok(())
        } else {
            Err(ErrorObject::unsupported_version(
                SUPPORTED_VERSIONS,
                &meta.protocol_version,
            ))
        }
    }

    /// Runs a call to its final message, inside the request's span (see `observe::trace`);
    /// `None` when the request ended without one (a listen stream the client cancelled). With
    /// metrics, its duration is recorded (O-01).
    pub(crate) async fn run(
        &self,
        id: &RequestId,
        call: Route,
        ctx: RequestContext,
    ) -> Option<Final> {
        use tracing::Instrument as _;
        // Labels resolved before the call, recorded after it: no future of its own around the
        // method's, which would make every request's future larger.
        let observed = self.metrics().map(|_| {
            let tool = match &call {
                Route::CallTool(c) => self.registry().snapshot().get(&c.name).cloned(),
                _ => None,
            };
            crate::observe::metrics::Observation::start(&call, tool, &ctx)
        });
        let span = trace::request_span(id, &call, ctx.meta(), ctx.incoming());
        let done = if span.is_disabled() {
            self.answer(id, call, ctx).await
        } else {
            let done = self.answer(id, call, ctx).instrument(span.clone()).await;
            trace::finish(&span, done.as_ref());
            done
        };
        if let (Some(metrics), Some(observed)) = (self.metrics(), observed) {
            observed.finish(metrics, done.as_ref());
        }
        done
    }

    /// [`Server::run`] without the span and the metrics. `tools/call` runs inline, and so do
    /// the methods answered without waiting (discovery and the lists); the rest run boxed: a
    /// future is as large as its largest branch, and the call's is the one every request of a
    /// tool server pays for (each level of the request path holds it, and it is copied when
    /// boxed).
    async fn answer(&self, id: &RequestId, call: Route, ctx: RequestContext) -> Option<Final> {
        if let Some(done) = self.answer_at_once(id, &call, &ctx) {
            return Some(done);
        }
        match call {
            Route::CallTool(call) => Some(self.audited_call(id, call, ctx).await),
            other => Box::pin(self.answer_waiting(id, other, ctx)).await,
        }
    }

    /// The answer to a method answered without waiting (discovery and the lists); `None` for
    /// any other.
    fn answer_at_once(&self, id: &RequestId, call: &Route, ctx: &RequestContext) -> Option<Final> {
        Some(match call {
            Route::Discover => Final::result(id, self.discover()),
            Route::ListTools { cursor } => self.list_tools(id, cursor.as_deref(), ctx),
            Route::ListPrompts { cursor } => {
                self.list_offered(self.prompts(), id, cursor.as_deref(), ctx)
            }
            Route::ListResources { cursor } => {
                self.list_offered(self.resources(), id, cursor.as_deref(), ctx)
            }
            Route::ListResourceTemplates { cursor } => {
                self.list_offered(self.templates(), id, cursor.as_deref(), ctx)
            }
            _ => return None,
        })
    }

    /// The methods that wait, `tools/call` among them (though [`Server::answer`] runs that one
    /// inline), and through [`Server::answer_at_once`] those that do not.
    async fn answer_waiting(
        &self,
        id: &RequestId,
        call: Route,
        ctx: RequestContext,
    ) -> Option<Final> {
        if let Some(done) = self.answer_at_once(id, &call, &ctx) {
            return Some(done);
        }
        match call {
            Route::CallTool(call) => Some(self.audited_call(id, call, ctx).await),
            Route::Listen { filter } => self.listen(id, filter, ctx).await,
            Route::GetPrompt(get) => Some(self.get_prompt(id, get, ctx).await),
            Route::ReadResource(read) => Some(self.read_resource(id, read, ctx).await),
            Route::Complete(complete) => Some(self.complete(id, complete, ctx).await),
            Route::TasksGet { task_id } => Some(self.task_get(id, &task_id, &ctx).await),
            Route::TasksUpdate {
                task_id,
                input_responses,
            } => Some(self.task_update(id, &task_id, input_responses, &ctx).await),
            Route::TasksCancel { task_id } => Some(self.task_cancel(id, &task_id, &ctx).await),
            // Answered at once, above.
            Route::Discover
            | Route::ListTools { .. }
            | Route::ListPrompts { .. }
            | Route::ListResources { .. }
            | Route::ListResourceTemplates { .. } => None,
        }
    }

    /// One page of a list (`tools/list`, `prompts/list`, …) in registration order, with cache
    /// hints, the same scope on every page (T-04, T-05, K-01, K-10, K-16). With OAuth
    /// (`granted` is the caller's scopes) a caller sees only what its scopes allow (T-03), and
    /// a list that depends on the caller is private (K-10).
    pub(crate) fn list_page<T: Entry>(
        &self,
        id: &RequestId,
        snapshot: &Snapshot<T>,
        cursor: Option<&str>,
        kind: ListKind,
        granted: Option<&[String]>,
    ) -> Final {
        match granted {
            Some(granted) if snapshot.items.iter().any(|t| !t.scopes().is_empty()) => {
                let visible = snapshot.filtered(|t| permits(Some(granted), t.scopes()));
                let scope = toolwire_protocol::CacheScope::Private;
                self.list_page_in(id, &visible, cursor, kind, scope)
            }
            _ => {
                let scope = self.config().cache_scope;
                self.list_page_in(id, snapshot, cursor, kind, scope)
            }
        }
    }

    /// A page of `tools/list`: with a [`ToolVisibility`](crate::ToolVisibility), only the
    /// tools it lists for this caller ([`check_listed`](crate::ToolVisibility::check_listed)),
    /// privately (K-10).
    fn list_tools(&self, id: &RequestId, cursor: Option<&str>, ctx: &RequestContext) -> Final {
        let snapshot = self.registry().snapshot();
        let Some(visibility) = &self.config().tool_visibility else {
            return self.list_page(id, &snapshot, cursor, ListKind::Tools, ctx.scopes());
        };
        let check = visibility.check_listed(crate::tools::visibility::Viewer::of(ctx));
        let visible =
            snapshot.filtered(|t| permits(ctx.scopes(), t.scopes()) && check(&t.name).is_none());
        let scope = toolwire_protocol::CacheScope::Private;
        self.list_page_in(id, &visible, cursor, ListKind::Tools, scope)
    }

    /// [`Server::list_page`] with the given `cacheScope`.
    pub(crate) fn list_page_in<T: Entry>(
        &self,
        id: &RequestId,
        snapshot: &Snapshot<T>,
        cursor: Option<&str>,
        kind: ListKind,
        cache_scope: toolwire_protocol::CacheScope,
    ) -> Final {
        let config = self.config();
        match snapshot.page(cursor, kind, config.page_size, self.cursors()) {
            Err(error) => Final::error(Some(id), &error),
            Ok((items, next_cursor)) => Final::result(
                id,
                &ListPage {
                    field: kind.field(),
                    items,
                    next_cursor,
                    ttl_ms: self.list_ttl_ms(),
                    cache_scope,
                    meta: self.result_meta(),
                },
            ),
        }
    }
}
