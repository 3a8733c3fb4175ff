//! The methods that are one request each, typed from the protocol crate's [`Method`]s:
//! `server/discover`, `resources/read` and `prompts/get` (with `input_required` rounds), and
//! `completion/complete`. A new request method goes here (or in its own file when it needs more
//! than one request, like the lists in `pages.rs` and the tools in `tools.rs`).

use serde_json::Value;
use toolwire_protocol::methods::{Complete, Discover, GetPrompt, MetaParams, Method, ReadResource};
use toolwire_protocol::{
    CompleteParams, CompleteResult, CompletionArgument, CompletionReference, DiscoverResult,
    GetPromptParams, GetPromptResult, ReadResourceParams, ReadResourceResult, RequestMeta,
};

use crate::client::rpc::read_result;
use crate::client::{Client, RpcOptions, params as params_value};
use crate::error::Result;

impl Client {
    /// Sends any method the protocol crate types, by its type: `params` without `_meta` (the
    /// client writes it for each attempt, B-15), the typed result. One request through the
    /// request path (timeouts, version negotiation, re-issue, fallback), and no more: no
    /// `input_required` rounds, header mirroring or output checks, which the dedicated methods
    /// ([`call_tool`](Client::call_tool), [`read_resource`](Client::read_resource), …) add.
    pub async fn send<M: Method>(&self, params: &M::Params) -> Result<M::Result> {
        let options = RpcOptions {
            name: M::mcp_name(params).map(str::to_owned),
            ..Default::default()
        };
        self.call::<M>(params, &options).await
    }

    /// `server/discover` (V-04: optional; any request works without it). For a legacy server
    /// the answer is made from its `initialize` result.
    pub async fn discover(&self) -> Result<DiscoverResult> {
        self.call::<Discover>(&MetaParams::default(), &RpcOptions::default())
            .await
    }

    /// Reads a resource, answering input requests on the way.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let options = RpcOptions {
            name: Some(uri.to_owned()),
            ..Default::default()
        };
        let params = ReadResourceParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        let result = self
            .rpc_rounds(ReadResource::METHOD, params_value(&params), &options)
            .await?;
        read_result::<ReadResource>(result)
    }

    /// Renders a prompt, answering input requests on the way.
    pub async fn get_prompt(&self, name: &str, arguments: Value) -> Result<GetPromptResult> {
        let options = RpcOptions {
            name: Some(name.to_owned()),
            ..Default::default()
        };
        // The arguments go as given: `GetPromptParams` holds string values only, and a caller's
        // other values are the server's to refuse.
        let mut params = params_value(&GetPromptParams {
            name: name.to_owned(),
            ..Default::default()
        });
        params["arguments"] = arguments;
        let result = self.rpc_rounds(GetPrompt::METHOD, params, &options).await?;
        read_result::<GetPrompt>(result)
    }

    /// Completion values for a prompt argument or template variable.
    pub async fn complete(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
    ) -> Result<CompleteResult> {
        let params = CompleteParams {
            meta: RequestMeta::default(),
            reference,
            argument,
            context: None,
        };
        self.call::<Complete>(&params, &RpcOptions::default()).await
    }
}
