//! HTTP bodies of the server's own answers: the boxed body type every
//! response uses, plain-text and JSON responses.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// The body of every response the server makes.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A plain-text response.
pub(crate) fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{message}\n"))).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A JSON response of `message`.
pub(crate) fn json(message: &impl serde::Serialize) -> Response<Body> {
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
