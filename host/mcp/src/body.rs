//! HTTP bodies: the boxed body type every response uses, plain-text and
//! JSON responses, and a request's body read within its limits.

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

/// A request's whole body, at most `max` bytes and within `timeout`; else
/// the refusal that says which limit it passed.
pub(crate) async fn read_body(
    body: hyper::body::Incoming,
    max: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, Box<Response<Body>>> {
    let collected = http_body_util::Limited::new(body, max).collect();
    let refusal = |status, message: String| Err(Box::new(plain(status, &message)));
    match tokio::time::timeout(timeout, collected).await {
        Err(_) => refusal(
            StatusCode::REQUEST_TIMEOUT,
            format!("request timeout: the body took longer than {timeout:?}"),
        ),
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(error))
            if error
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("payload too large: bodies are limited to {max} bytes"),
            )
        }
        Ok(Err(error)) => refusal(
            StatusCode::BAD_REQUEST,
            format!("cannot read the body: {error}"),
        ),
    }
}
