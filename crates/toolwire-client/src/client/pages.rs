//! Paginated lists (tools, prompts, resources, templates) walked with opaque cursors (K-12,
//! K-14) under a budget for the whole list: items, bytes and time (`ListLimit`), so a server
//! that paginates forever cannot hold a client or its memory.

use serde_json::Value;
use toolwire_protocol::methods::{ListPrompts, ListResourceTemplates, ListResources, Method};
use toolwire_protocol::{ListResult, PaginatedParams, Prompt, Resource, ResourceTemplate};

use crate::client::{Client, RpcOptions};
use crate::error::{Error, ListLimit, Result};

impl Client {
    /// Every resource, all pages.
    pub async fn list_resources(&self) -> Result<Vec<Resource>> {
        self.walk_all::<ListResources, _>().await
    }

    /// Every resource template, all pages.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        self.walk_all::<ListResourceTemplates, _>().await
    }

    /// Every prompt, all pages.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>> {
        self.walk_all::<ListPrompts, _>().await
    }

    /// The items of every page of the list `M`.
    async fn walk_all<M, T>(&self) -> Result<Vec<T>>
    where
        M: Method<Params = PaginatedParams, Result = ListResult<T>>,
    {
        let pages = self.walk::<M, T>().await?;
        Ok(pages.into_iter().flat_map(|p| p.items).collect())
    }

    /// Walks a paginated list: cursors are opaque and only an absent `nextCursor` ends it
    /// (K-14); it stops with an error on a repeated cursor (no progress) and past the list
    /// bounds (items, bytes, time, 10,000 pages; `ListLimit`); an invalid-cursor error restarts
    /// it from the first page once (K-12).
    pub(crate) async fn walk<M, T>(&self) -> Result<Vec<ListResult<T>>>
    where
        M: Method<Params = PaginatedParams, Result = ListResult<T>>,
    {
        let method = M::METHOD;
        let limit = self.inner.config.list_timeout;
        tokio::time::timeout(limit, self.walk_pages::<M, T>())
            .await
            .unwrap_or_else(|_| {
                Err(Error::ListTooLarge {
                    method: method.to_owned(),
                    limit: ListLimit::Time(limit),
                })
            })
    }

    async fn walk_pages<M, T>(&self) -> Result<Vec<ListResult<T>>>
    where
        M: Method<Params = PaginatedParams, Result = ListResult<T>>,
    {
        let method = M::METHOD;
        const MAX_PAGES: usize = 10_000;
        let config = &self.inner.config;
        let too_large = |limit| Error::ListTooLarge {
            method: method.to_owned(),
            limit,
        };
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        let mut restarted = false;
        let (mut items, mut bytes) = (0usize, 0usize);
        for _ in 0..MAX_PAGES {
            let params = crate::client::params(&PaginatedParams {
                cursor: cursor.clone(),
                ..Default::default()
            });
            let page = match self.rpc(method, &params, &RpcOptions::default()).await {
                Err(Error::Rpc(e)) if e.code == -32602 && cursor.is_some() && !restarted => {
                    // K-12
                    tracing::warn!(method, message = %e.message, "the server refused a cursor; listing again from the first page");
                    restarted = true;
                    cursor = None;
                    seen.clear();
                    pages.clear();
                    (items, bytes) = (0, 0);
                    continue;
                }
                page => page?,
            };
            bytes = bytes.saturating_add(json_len(&page));
            if bytes > config.max_list_bytes {
                return Err(too_large(ListLimit::Bytes(config.max_list_bytes)));
            }
            let page = crate::client::rpc::read_result::<M>(page)?;
            items = items.saturating_add(page.items.len());
            if items > config.max_list_items {
                return Err(too_large(ListLimit::Items(config.max_list_items)));
            }
            let next = page.next_cursor.clone();
            pages.push(page);
            match next {
                None => return Ok(pages),
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(Error::InvalidResponse(format!(
                        "{method}: the server repeated a cursor"
                    )));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(too_large(ListLimit::Pages(MAX_PAGES)))
    }
}

/// The length of `value` as compact JSON, counted without building the text.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_compact_text() {
        for value in [
            json!(null),
            json!({"tools": [{"name": "é", "description": "a \"quoted\"\nline"}]}),
            json!([1, 2.5, -3, true, "\u{1b}[2J"]),
        ] {
            assert_eq!(json_len(&value), value.to_string().len(), "{value}");
        }
    }
}
