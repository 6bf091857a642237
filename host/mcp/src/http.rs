//! MCP over streamable HTTP at `/mcp`, with the checks a local server needs:
//! `Host` and `Origin` validation against DNS rebinding, an optional bearer
//! token and a request body limit.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::drain::SHUTDOWN_GRACE;
use super::server::McpServer;

/// The path the MCP endpoint answers on.
pub const MCP_PATH: &str = "/mcp";

/// How an HTTP MCP server admits requests.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Accepted `Host` names besides the loopback ones (any port).
    pub hosts: Vec<String>,
    /// Accepted `Origin`s besides loopback ones (`http://localhost:*`, ...).
    /// Requests without an `Origin` (non-browser clients) are accepted.
    pub origins: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// New sessions are refused (503) while this many are open.
    pub max_sessions: usize,
    /// Connections beyond this many wait to be accepted.
    pub max_connections: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            token: None,
            hosts: Vec::new(),
            origins: Vec::new(),
            max_body: 4 << 20,
            max_sessions: 1024,
            max_connections: 4096,
        }
    }
}

/// Requests whose headers take longer than this are dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests queued per session before the client is slowed down.
const SESSION_QUEUE: usize = 256;
/// After the calls in flight have finished, how long connections have to
/// send their last responses before they are dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

type Body = BoxBody<Bytes, Infallible>;

/// Serves MCP on `listener` until `shutdown` is cancelled; then it accepts
/// no more connections or calls, and the calls in flight get
/// [`SHUTDOWN_GRACE`](super::SHUTDOWN_GRACE) to finish and send their results. Every connection and every session runs
/// on its own tasks, so calls run in parallel.
pub async fn serve_http(
    server: McpServer,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .map(String::from)
        .into();
    hosts.extend(options.hosts.iter().cloned());
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .into();
    origins.extend(options.origins.iter().cloned());
    let sessions_stop = CancellationToken::new();
    let drain = server.drain();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body)
        // rmcp's sessions, and the connections, stop only once the calls in
        // flight have finished, so their results still reach the clients.
        .with_cancellation_token(sessions_stop.clone());
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.channel_capacity = SESSION_QUEUE;
    let live_handlers = server.live_handlers();
    let mcp = StreamableHttpService::new(move || Ok(server.session()), Arc::new(sessions), config);
    let gate = Arc::new(Gate {
        token_digest: options.token.as_deref().map(digest),
        live_handlers,
        max_sessions: options.max_sessions,
    });
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => tokio::select! {
                    _ = shutdown.cancelled() => break,
                    accepted = listener.accept() => accepted.map(|a| (a, permit)),
                },
                Err(_) => break,
            },
        };
        let ((stream, peer), permit) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off, go on.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Responses go out in several writes (headers, then event-stream
        // chunks): without this, Nagle holds each later one for the client's
        // delayed ACK, up to 40 ms.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot disable Nagle's algorithm");
        }
        let (mcp, gate) = (mcp.clone(), gate.clone());
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let (mcp, gate) = (mcp.clone(), gate.clone());
            async move {
                Ok::<_, Infallible>(match gate.refuse(&request) {
                    Some(refusal) => refusal,
                    None => mcp.handle(request).await,
                })
            }
        });
        let close = sessions_stop.clone();
        tracker.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%peer, %error, "connection ended");
                    }
                }
                _ = close.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drain.stop(SHUTDOWN_GRACE).await;
    sessions_stop.cancel();
    tracker.close();
    if tokio::time::timeout(CLOSE_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {CLOSE_GRACE:?}; closing them");
    }
}

/// The checks before rmcp sees a request (rmcp checks Host, Origin and size).
struct Gate {
    token_digest: Option<[u8; 32]>,
    /// The server's live handlers: the built one plus one per session.
    live_handlers: Arc<AtomicUsize>,
    max_sessions: usize,
}

impl Gate {
    fn refuse(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        if request.uri().path() != MCP_PATH {
            return Some(plain(
                StatusCode::NOT_FOUND,
                &format!("not found: the MCP endpoint is {MCP_PATH}"),
            ));
        }
        if let Some(expected) = self.token_digest {
            // Digests are compared, so the time taken says nothing about the token.
            if bearer_token(request).map(digest) != Some(expected) {
                return Some(unauthorized());
            }
        }
        let opens_session = request.method() == http::Method::POST
            && !request.headers().contains_key("mcp-session-id");
        let sessions = self.live_handlers.load(Ordering::Relaxed).saturating_sub(1);
        if opens_session && sessions >= self.max_sessions {
            return Some(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many open MCP sessions; close one (DELETE) or try again later",
            ));
        }
        None
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme in any case).
fn bearer_token(request: &Request<Incoming>) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn unauthorized() -> Response<Body> {
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "unauthorized: send the server's token as `Authorization: Bearer <token>`",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{message}\n"))).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
