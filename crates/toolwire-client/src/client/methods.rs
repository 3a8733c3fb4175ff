//! The methods that are one request each, typed from the protocol crate's [`Method`]s:
//! `server/discover`, `resources/read` and `prompts/get` (with `input_required` rounds), and
//! `completion/complete`. A new request method goes here (or in its own file when it needs more
//! than one request, like the lists in `pages.rs` and the tools in `tools.rs`).

use serde_json::Value;
use toolwire_protocol::methods::{Complete, Discover, GetPrompt, MetaParams, Method, ReadResource};
use toolwire_protocol::{
    CompleteParams, CompleteResult, CompletionArgument, CompletionContext, CompletionReference,
    DiscoverResult, GetPromptParams, GetPromptResult, ReadResourceParams, ReadResourceResult,
    RequestMeta,
};

use crate::CallOptions;
use crate::client::rpc::read_result;
use crate::client::{Client, RpcOptions, params as params_value};
use crate::error::{Error, Result};

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
        self.read_resource_with(uri, CallOptions::default()).await
    }

    /// Reads a resource with options: a timeout, a cancellation, and for a relay the answers
    /// to the previous round ([`CallOptions::answers`]) or one round only
    /// ([`CallOptions::relay_input`]: the server's questions come back as
    /// [`Error::InputRequired`](crate::Error::InputRequired)).
    pub async fn read_resource_with(
        &self,
        uri: &str,
        options: CallOptions,
    ) -> Result<ReadResourceResult> {
        let options = options.into_rpc(uri);
        let params = ReadResourceParams {
            uri: uri.to_owned(),
            ..Default::default()
        };
        let result = self
            .rpc_rounds(ReadResource::METHOD, &params_value(&params), &options)
            .await?;
        relayed(&result)?;
        read_result::<ReadResource>(result)
    }

    /// Renders a prompt, answering input requests on the way.
    pub async fn get_prompt(&self, name: &str, arguments: Value) -> Result<GetPromptResult> {
        self.get_prompt_with(name, arguments, CallOptions::default())
            .await
    }

    /// Renders a prompt with options, as [`Client::read_resource_with`] reads a resource.
    pub async fn get_prompt_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<GetPromptResult> {
        let options = options.into_rpc(name);
        // The arguments go as given: `GetPromptParams` holds string values only, and a caller's
        // other values are the server's to refuse.
        let mut params = params_value(&GetPromptParams {
            name: name.to_owned(),
            ..Default::default()
        });
        params["arguments"] = arguments;
        let result = self
            .rpc_rounds(GetPrompt::METHOD, &params, &options)
            .await?;
        relayed(&result)?;
        read_result::<GetPrompt>(result)
    }

    /// Completion values for a prompt argument or template variable.
    pub async fn complete(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
    ) -> Result<CompleteResult> {
        self.complete_with(reference, argument, None, CallOptions::default())
            .await
    }

    /// Completion values with the other arguments' values already given (`context`) and
    /// options: a timeout, a cancellation, a bearer token for this request
    /// ([`CallOptions::bearer`]). Answers and input relaying do not apply: a completion has
    /// no `input_required` rounds.
    pub async fn complete_with(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
        context: Option<CompletionContext>,
        options: CallOptions,
    ) -> Result<CompleteResult> {
        let params = CompleteParams {
            meta: RequestMeta::default(),
            reference,
            argument,
            context,
        };
        let options = RpcOptions {
            // The header names what the method's own rule names, if anything.
            name: Complete::mcp_name(&params).map(str::to_owned),
            ..options.into_rpc("")
        };
        self.call::<Complete>(&params, &options).await
    }
}

/// A relayed round's `input_required` result as [`Error::InputRequired`] (only a request made
/// with [`CallOptions::relay_input`] gets one back: the others answer every round).
fn relayed(result: &Value) -> Result<()> {
    if !crate::client::rounds::is_input_required(result) {
        return Ok(());
    }
    let input = serde_json::from_value(result.clone())
        .map_err(|e| Error::InvalidResponse(format!("input_required: {e}")))?;
    Err(Error::InputRequired(Box::new(input)))
}
