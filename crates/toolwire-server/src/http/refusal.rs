//! An HTTP request refused before its method runs, and the status of an error reply.

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use toolwire_protocol::{
    ErrorObject, HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY, PARSE_ERROR, RequestId, UNSUPPORTED_PROTOCOL_VERSION,
};

use crate::request::outcome::Final;

/// An early refusal: status and JSON-RPC error, and a `WWW-Authenticate` challenge for an
/// OAuth refusal.
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) id: Option<RequestId>,
    pub(super) error: ErrorObject,
    /// Boxed: refusals travel in `Result`s on the hot path and should stay small.
    pub(super) challenge: Option<Box<HeaderValue>>,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, id: Option<&RequestId>, error: ErrorObject) -> Self {
        Refusal {
            status,
            id: id.cloned(),
            error,
            challenge: None,
        }
    }

    pub(super) fn with_challenge(mut self, challenge: HeaderValue) -> Self {
        self.challenge = Some(Box::new(challenge));
        self
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = json_response(
            self.status,
            Final::error(self.id.as_ref(), &self.error).json,
        );
        if let Some(challenge) = self.challenge {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, *challenge);
        }
        response
    }
}

/// The refusal of a body that did not arrive within `limit` ([`HttpConfig::body_timeout`](super::HttpConfig::body_timeout)):
/// 408, and hyper closes the connection, the rest of the body unread.
pub(super) fn body_too_slow(limit: Duration) -> Refusal {
    let error = ErrorObject::invalid_request(format!(
        "the request body did not arrive within {} ms",
        limit.as_millis()
    ));
    Refusal::new(StatusCode::REQUEST_TIMEOUT, None, error)
}

pub(super) fn json_response(status: StatusCode, json: String) -> Response {
    let mut response = Response::new(Body::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The status of an error response (E-04, E-07, H-11); `None` is success. Other codes, such as
/// -32602 for an unknown tool or cursor, travel with 200.
pub(super) fn status_for(code: Option<i64>) -> StatusCode {
    match code {
        None => StatusCode::OK,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            PARSE_ERROR
            | INVALID_REQUEST
            | HEADER_MISMATCH
            | MISSING_REQUIRED_CLIENT_CAPABILITY
            | UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(_) => StatusCode::OK,
    }
}
