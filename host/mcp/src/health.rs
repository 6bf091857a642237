//! `GET /healthz` (the process answers) and `GET /readyz` (it should get
//! traffic: tools loaded, session store reachable, not stopping), for load
//! balancers and orchestrators, and `GET /metrics` (Prometheus) where the
//! server has metrics. They need no token; the probes reveal nothing but
//! which check failed.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use wasm_agent_metrics::Metrics;

use super::body::{Body, plain};
use super::server::McpServer;

/// The liveness path.
pub const HEALTH_PATH: &str = "/healthz";
/// The readiness path.
pub const READY_PATH: &str = "/readyz";
/// The Prometheus path.
pub const METRICS_PATH: &str = "/metrics";
/// What `/metrics` answers in.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Longest a readiness check waits for the session store.
const STORE_CHECK: Duration = Duration::from_secs(2);

/// The answer to a health, readiness or metrics request (metrics only
/// when `metrics` is given); `None` for other requests.
pub(crate) async fn answer<B>(
    request: &Request<B>,
    server: &McpServer,
    metrics: Option<&Metrics>,
) -> Option<Response<Body>> {
    let path = request.uri().path();
    let is_metrics = path == METRICS_PATH && metrics.is_some();
    if path != HEALTH_PATH && path != READY_PATH && !is_metrics {
        return None;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Some(plain(StatusCode::METHOD_NOT_ALLOWED, "use GET"));
    }
    if path == HEALTH_PATH {
        return Some(plain(StatusCode::OK, "ok"));
    }
    if let (true, Some(metrics)) = (is_metrics, metrics) {
        let mut response = plain(StatusCode::OK, "");
        *response.body_mut() = Full::new(Bytes::from(metrics.render())).boxed();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(OPENMETRICS),
        );
        return Some(response);
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
