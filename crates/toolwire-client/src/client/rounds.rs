//! `input_required` rounds from the client's side (M-11…M-14): the server's input requests
//! are answered by the handlers, concurrently and under the call's timeout, and the request is
//! sent again with a new id, the same params, the answers and the state echoed verbatim.
//! Results of such rounds are never cached (K-04).

use std::collections::HashMap;

use serde_json::Value;
use toolwire_protocol::{InputRequest, InputRequests, InputResponse};

use crate::client::{Client, RpcOptions};
use crate::error::{Error, Result};

impl Client {
    /// A request that may answer `input_required`: the requests are answered by the handlers
    /// and the request retried with a new id, the same params, the answers and the state
    /// echoed verbatim (M-11…M-14); results of such rounds are never cached (K-04).
    pub(crate) async fn rpc_rounds(
        &self,
        method: &str,
        params: Value,
        options: &RpcOptions,
    ) -> Result<Value> {
        let max = self.inner.config.max_rounds;
        let mut next = params.clone();
        for _ in 0..=max {
            let result = self.rpc(method, next, options).await?;
            if result["resultType"] != "input_required" {
                return Ok(result);
            }
            let requests: InputRequests = match result.get("inputRequests") {
                Some(r) => serde_json::from_value(r.clone())
                    .map_err(|e| Error::InvalidResponse(format!("inputRequests: {e}")))?,
                None => InputRequests::new(),
            };
            next = params.clone();
            if !requests.is_empty() {
                // The handlers run under the call's timeout and cancellation like the exchanges
                // do: a handler that never finishes must not hold the call forever.
                let answers = self.bounded(options, self.answer(requests)).await?;
                next["inputResponses"] = serde_json::to_value(answers).expect("answers serialize");
            }
            // Echo the state exactly, and only when there is one (M-12).
            if let Some(state) = result.get("requestState").and_then(Value::as_str) {
                next["requestState"] = Value::String(state.to_owned());
            }
        }
        Err(Error::TooManyRounds(max))
    }

    /// Answers every input request of a round, concurrently.
    async fn answer(&self, requests: InputRequests) -> Result<HashMap<String, InputResponse>> {
        let handlers = self.inner.config.handlers.clone();
        let answers = requests.into_iter().map(|(key, request)| {
            let handlers = handlers.clone();
            async move {
                let response = match request {
                    InputRequest::Elicit(params) => {
                        InputResponse::Elicit(handlers.elicit(params).await?)
                    }
                    InputRequest::CreateMessage(params) => match &handlers.sample {
                        Some(h) => InputResponse::CreateMessage(Box::new(h(*params).await?)),
                        None => {
                            return Err(Error::Input("sampling without a sampling handler".into()));
                        }
                    },
                    InputRequest::ListRoots(_) => match &handlers.roots {
                        Some(h) => InputResponse::ListRoots(h().await?),
                        None => return Err(Error::Input("roots without a roots handler".into())),
                    },
                    other => {
                        return Err(Error::Input(format!(
                            "unsupported input request {}",
                            other.method()
                        )));
                    }
                };
                Ok((key, response))
            }
        });
        futures::future::try_join_all(answers)
            .await
            .map(|pairs| pairs.into_iter().collect())
    }
}
