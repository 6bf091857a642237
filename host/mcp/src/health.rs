//! `GET /healthz` (the process answers) and `GET /readyz` (it should get
//! traffic: tools loaded, session store reachable, not stopping), for load
//! balancers and orchestrators. They need no token and reveal nothing but
//! which check failed.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};

use super::gate::{Body, plain};
use super::server::McpServer;

/// The liveness path.
pub const HEALTH_PATH: &str = "/healthz";
/// The readiness path.
pub const READY_PATH: &str = "/readyz";

/// Longest a readiness check waits for the session store.
const STORE_CHECK: Duration = Duration::from_secs(2);

/// The answer to a health or readiness request; `None` for other requests.
pub(crate) async fn answer<B>(request: &Request<B>, server: &McpServer) -> Option<Response<Body>> {
    let path = request.uri().path();
    if path != HEALTH_PATH && path != READY_PATH {
        return None;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Some(plain(StatusCode::METHOD_NOT_ALLOWED, "use GET"));
    }
    if path == HEALTH_PATH {
        return Some(plain(StatusCode::OK, "ok"));
    }
    Some(match not_ready(server).await {
        None => plain(StatusCode::OK, "ready"),
        Some(why) => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("not ready: {why}"),
        ),
    })
}

/// Why the server should get no traffic now, if it should not.
async fn not_ready(server: &McpServer) -> Option<&'static str> {
    if server.drain().is_stopping() {
        return Some("the server is stopping");
    }
    if !server.tools_are_loaded() {
        return Some("tools are still loading");
    }
    let store = server.host().session_store();
    match tokio::time::timeout(STORE_CHECK, store.check()).await {
        Ok(Ok(())) => None,
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness: the session store does not answer");
            Some("the session store does not answer")
        }
        Err(_) => Some("the session store does not answer"),
    }
}
