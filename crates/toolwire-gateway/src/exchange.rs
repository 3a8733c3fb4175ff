//! The credential of a call made upstream for a caller, where the upstream's configuration
//! asks for RFC 8693 token exchange (`"oauth": {"tokenExchange": …}`): the caller's own access
//! token is traded at the upstream's authorization server for a token for that upstream,
//! which acts for the caller and names the gateway's client as the actor. The caller's token
//! itself never goes upstream (the spec forbids token passthrough, A-15), and a caller
//! without a token (a gateway without `gateway.auth`, or on stdio) is refused: the call is
//! never made in the gateway's own name instead.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use toolwire_client::auth::{ClientIdentity, TokenExchange};
use toolwire_host::{HostConfig, Transport};
use toolwire_protocol::CallToolResult;
use toolwire_server::RequestContext;

/// The exchange of each upstream that has one, by the upstream's name; replaced whole by a
/// reload.
#[derive(Debug, Default)]
pub(crate) struct Exchanges {
    exchanges: arc_swap::ArcSwap<HashMap<String, Arc<TokenExchange>>>,
    /// Plain `http:` authorization servers allowed anywhere (development only).
    insecure_http: bool,
}

impl Exchanges {
    /// The exchanges `config` asks for; plain `http:` authorization servers allowed anywhere
    /// with `insecure_http` (development only).
    pub(crate) fn of(config: &HostConfig, insecure_http: bool) -> Exchanges {
        Exchanges {
            exchanges: arc_swap::ArcSwap::from_pointee(exchanges_of(config, insecure_http)),
            insecure_http,
        }
    }

    /// Replaces the exchanges with those `config` asks for (a reload).
    pub(crate) fn reload(&self, config: &HostConfig) {
        self.exchanges
            .store(Arc::new(exchanges_of(config, self.insecure_http)));
    }

    /// The exchange of the upstream `server`, if it has one.
    pub(crate) fn of_server(&self, server: &str) -> Option<Arc<TokenExchange>> {
        self.exchanges.load().get(server).cloned()
    }

    /// The names of the upstreams that exchange tokens.
    pub(crate) fn servers(&self) -> Vec<String> {
        let mut names: Vec<String> = self.exchanges.load().keys().cloned().collect();
        names.sort();
        names
    }
}

/// The exchanges `config` asks for, by upstream.
fn exchanges_of(config: &HostConfig, insecure_http: bool) -> HashMap<String, Arc<TokenExchange>> {
    {
        let mut exchanges = HashMap::new();
        for server in &config.servers {
            let Transport::Http { url, oauth, .. } = &server.transport else {
                continue;
            };
            let (Some(settings), Some(client_id), Some(issuer)) =
                (&oauth.token_exchange, &oauth.client_id, &oauth.issuer)
            else {
                continue;
            };
            let client = ClientIdentity::new(issuer, client_id, oauth.client_secret.clone());
            let mut exchange = TokenExchange::new(url, client).allow_insecure_http(insecure_http);
            if let Some(resource) = &settings.resource {
                exchange = exchange.resource(resource);
            }
            if let Some(audience) = &settings.audience {
                exchange = exchange.audience(audience);
            }
            if let Some(scope) = &settings.scope {
                exchange = exchange.scope(scope);
            }
            exchanges.insert(server.name.clone(), Arc::new(exchange));
        }
        exchanges
    }
}

/// The bearer token for a request about `name` (a tool, prompt or resource) at `upstream` for
/// the caller of `ctx`: exchanged for the caller's own, or what the caller is told instead.
pub(crate) async fn bearer_for(
    exchange: &TokenExchange,
    upstream: &str,
    name: &str,
    ctx: &RequestContext,
) -> Result<String, String> {
    let Some(subject) = ctx.access_token() else {
        return Err(format!(
            "The request for {name} was not made: the upstream server {upstream} is called \
             with a token exchanged for each caller's own access token (RFC 8693), and this \
             request came without one (the gateway checks no tokens on this transport, or has \
             no gateway.auth). It is never made in the gateway's own name instead."
        ));
    };
    exchange.token_for(subject).await.map_err(|error| {
        tracing::warn!(%upstream, %error, "token exchange failed");
        format!(
            "The request for {name} was not made: the upstream server {upstream} needs a token \
             exchanged for yours, and {error}"
        )
    })
}

/// Makes a request upstream (`make`, given the bearer token to send, if any) for the caller of
/// `ctx`: with a token exchanged for the caller's where the upstream has an `exchange`, and
/// once more with a newly exchanged one when the upstream refuses the first (`refused`: HTTP
/// 401), since a cached token may have been revoked or outlived the upstream's keys. `Err` is
/// what the caller is told when no token could be got.
pub(crate) async fn with_exchanged<T, Fut>(
    exchange: Option<&TokenExchange>,
    (upstream, name): (&str, &str),
    ctx: &RequestContext,
    mut make: impl FnMut(Option<String>) -> Fut,
    refused: impl Fn(&T) -> bool,
) -> Result<T, String>
where
    Fut: Future<Output = T>,
{
    let Some(exchange) = exchange else {
        return Ok(make(None).await);
    };
    let bearer = bearer_for(exchange, upstream, name, ctx).await?;
    let got = make(Some(bearer.clone())).await;
    let Some(subject) = ctx.access_token().filter(|_| refused(&got)) else {
        return Ok(got);
    };
    tracing::info!(%upstream, "the upstream refused a token exchanged for the caller's; exchanging again");
    exchange.refused(subject, &bearer);
    let bearer = bearer_for(exchange, upstream, name, ctx).await?;
    Ok(make(Some(bearer)).await)
}

/// The tool call result for a refusal of [`bearer_for`].
pub(crate) fn refused(why: String) -> CallToolResult {
    CallToolResult::error(why)
}
