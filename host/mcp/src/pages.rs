//! Pages served beside `/mcp` under a path of their own (the operator
//! console), by `serve_http` and `serve_health` alike. The server checks
//! `Host` and `Origin` as for `/mcp` before a request reaches them; who may
//! see them is theirs to check.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;

/// The body of a page's response.
pub type PageBody = BoxBody<Bytes, Infallible>;

/// Pages answering every request under [`prefix`](Pages::prefix).
#[async_trait::async_trait]
pub trait Pages: Send + Sync + std::fmt::Debug {
    /// The path they answer under (`/console`): that path and everything
    /// below it.
    fn prefix(&self) -> &str;

    /// Answers `request`, whose `Host` and `Origin` passed the server's checks.
    async fn answer(&self, request: Request<Incoming>) -> Response<PageBody>;
}

/// Whether `path` is `prefix` or below it.
pub(crate) fn owns(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
