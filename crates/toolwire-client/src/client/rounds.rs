//! `input_required` rounds from the client's side (M-11…M-14): the server's input requests
//! are answered by the handlers, concurrently and under the call's timeout, and the request is
//! sent again with a new id, the same params, the answers and the state echoed verbatim.
//! Results of such rounds are never cached (K-04). A relay (a gateway) makes one round at a
//! time instead: it gets the `input_required` result back, and sends the answers its own
//! caller gave with the retry ([`RoundAnswers`]).

use std::collections::HashMap;

use serde_json::Value;
use toolwire_protocol::{
    CallToolResult, InputRequest, InputRequests, InputRequiredResult, InputResponse,
    InputResponses, ResultType,
};

use crate::client::answer::Answer;
use crate::client::{Client, RpcOptions};
use crate::error::{Error, Result};

/// The answers to a request's previous round, sent with its retry (M-11, M-12): the answers
/// by the keys of the server's input requests, and its `requestState` exactly as it came.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RoundAnswers {
    /// The answers (`inputResponses`), by the keys of the input requests.
    pub responses: InputResponses,
    /// The server's `requestState`, verbatim (M-12); `None` if it sent none.
    pub state: Option<String>,
}

impl RoundAnswers {
    /// The answers `responses`, and the server's `state` echoed.
    pub fn new(responses: InputResponses, state: Option<String>) -> Self {
        RoundAnswers { responses, state }
    }
}

/// What one round of a tool call ended with ([`Client::call_tool_round`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallRound {
    /// The call's result.
    Complete(Box<CallToolResult>),
    /// The server needs input first: answer its requests and retry with
    /// [`CallOptions::answers`](crate::CallOptions::answers).
    InputRequired(Box<InputRequiredResult>),
}

/// Whether a result is an `input_required` one (M-01).
pub(crate) fn is_input_required(result: &Value) -> bool {
    crate::client::answer::result_type(result) == Some(ResultType::InputRequired)
}

/// `params` with a round's answers and state (M-11, M-12), and without any earlier round's.
fn with_answers(mut params: Value, answers: Option<&RoundAnswers>) -> Value {
    if let Some(object) = params.as_object_mut() {
        object.remove(INPUT_RESPONSES);
        object.remove(REQUEST_STATE);
        if let Some(answers) = answers {
            if !answers.responses.is_empty() {
                object.insert(
                    INPUT_RESPONSES.into(),
                    serde_json::to_value(&answers.responses).expect("answers serialize"),
                );
            }
            // Echo the state exactly, and only when there is one (M-12).
            if let Some(state) = &answers.state {
                object.insert(REQUEST_STATE.into(), Value::String(state.clone()));
            }
        }
    }
    params
}

/// Whether `params` has either member that carries a round's answers.
fn carries_answers(params: &Value) -> bool {
    params.as_object().is_some_and(|members| {
        members.contains_key(INPUT_RESPONSES) || members.contains_key(REQUEST_STATE)
    })
}

/// The params member that carries a round's answers.
const INPUT_RESPONSES: &str = "inputResponses";
/// The params member that echoes the server's state.
const REQUEST_STATE: &str = "requestState";

impl Client {
    /// A request that may answer `input_required`: the requests are answered by the handlers
    /// and the request retried with a new id, the same params, the answers and the state
    /// echoed verbatim (M-11…M-14); results of such rounds are never cached (K-04).
    pub(crate) async fn rpc_rounds(
        &self,
        method: &str,
        params: &Value,
        options: &RpcOptions,
    ) -> Result<Value> {
        self.rpc_rounds_answer(method, params, options)
            .await?
            .into_value()
    }

    /// [`Client::rpc_rounds`], with the last result as the request path checked it, to be read
    /// once into the caller's type.
    pub(crate) async fn rpc_rounds_answer(
        &self,
        method: &str,
        params: &Value,
        options: &RpcOptions,
    ) -> Result<Answer> {
        let max = self.inner.config.max_rounds;
        // The params as given on a first round without answers (nor members that carry them);
        // a copy with this round's answers otherwise.
        let mut next = match &options.answers {
            None if !carries_answers(params) => None,
            answers => Some(with_answers(params.clone(), answers.as_ref())),
        };
        for _ in 0..=max {
            let answer = self
                .rpc_answer(method, next.as_ref().unwrap_or(params), options)
                .await?;
            if !answer.is(&ResultType::InputRequired) || options.relay {
                return Ok(answer);
            }
            let result = answer.into_value()?;
            let requests: InputRequests = match result.get("inputRequests") {
                Some(r) => serde_json::from_value(r.clone())
                    .map_err(|e| Error::InvalidResponse(format!("inputRequests: {e}")))?,
                None => InputRequests::new(),
            };
            let mut answers = RoundAnswers {
                responses: InputResponses::new(),
                state: result
                    .get(REQUEST_STATE)
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            if !requests.is_empty() {
                // The handlers run under the call's timeout and cancellation like the exchanges
                // do: a handler that never finishes must not hold the call forever.
                answers.responses = self
                    .bounded(options, self.answer(requests))
                    .await?
                    .into_iter()
                    .collect();
            }
            next = Some(with_answers(params.clone(), Some(&answers)));
        }
        Err(Error::TooManyRounds(max))
    }

    /// Answers every input request of a round, concurrently.
    pub(crate) async fn answer(
        &self,
        requests: InputRequests,
    ) -> Result<HashMap<String, InputResponse>> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_first_round_strips_answers_the_caller_left_in_its_params() {
        let plain = json!({"name": "t", "arguments": {"a": 1}});
        assert!(!carries_answers(&plain));
        let stale = json!({"name": "t", "requestState": "old", "inputResponses": {}});
        assert!(carries_answers(&stale));
        assert_eq!(with_answers(stale, None), json!({"name": "t"}));
        let answers = RoundAnswers {
            responses: InputResponses::new(),
            state: Some("s1".into()),
        };
        assert_eq!(
            with_answers(plain, Some(&answers)),
            json!({"name": "t", "arguments": {"a": 1}, "requestState": "s1"})
        );
    }
}
