//! MCP over streamable HTTP at `/mcp`, with the checks a local server needs
//! ([`Gate`]: `Host` and `Origin` validation against DNS rebinding, an
//! optional bearer token) and a request body limit.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connection_threads::ConnectionThreads;
use super::drain::SHUTDOWN_GRACE;
use super::gate::{Gate, LocalAddr};
use super::health;
pub use super::options::{HttpOptions, MCP_PATH};
use super::pages::owns;
use super::server::McpServer;
use super::streamable::Sessions;

/// Requests whose headers take longer than this are dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// After the calls in flight have finished, how long connections have to
/// send their last responses before they are dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Serves MCP on `listener` until `shutdown` is cancelled; then it accepts
/// no more connections or calls, and the calls in flight get
/// [`SHUTDOWN_GRACE`] to finish and send their
/// results. Connections are spread over threads of their own (one per core),
/// each of which runs the calls that finish in their first polls; calls that
/// wait or run on go to the current runtime, so calls run in parallel.
pub async fn serve_http(
    server: McpServer,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) {
    let sessions_stop = CancellationToken::new();
    let drain = server.drain();
    let gate = Arc::new(Gate::new(&options));
    // The sessionless revision goes to rmcp; the gate has checked Host and
    // Origin already.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(options.max_body)
        .with_cancellation_token(sessions_stop.clone());
    let rmcp_server = server.session();
    let probe = Arc::new(server.session());
    let rmcp = StreamableHttpService::new(
        move || Ok(rmcp_server.session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let sessions = Arc::new(Sessions::new(
        server,
        rmcp,
        options.max_sessions,
        options.max_tenant_sessions,
        options.max_body,
        options.idle_session,
    ));
    let expiry = tokio::spawn(sessions.clone().expire_idle());
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let tracker = TaskTracker::new();
    let threads = ConnectionThreads::for_this_machine();
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
        // Registered again on the runtime of the thread that serves it.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "cannot hand a connection over");
                continue;
            }
        };
        let (sessions, gate, probe) = (sessions.clone(), gate.clone(), probe.clone());
        let (metrics, pages) = (options.metrics.clone(), options.pages.clone());
        let local = stream.local_addr().ok().map(LocalAddr);
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            if let Some(local) = local {
                request.extensions_mut().insert(local);
            }
            let (sessions, gate, probe) = (sessions.clone(), gate.clone(), probe.clone());
            let (metrics, pages) = (metrics.clone(), pages.clone());
            async move {
                if let Some(pages) = pages.filter(|p| owns(p.prefix(), request.uri().path())) {
                    return Ok(match gate.refuse_foreign(&request) {
                        Some(refusal) => refusal,
                        None => pages.answer(request).await,
                    });
                }
                // Probes come from load balancers, with their own Host and
                // no token, and learn nothing but which check failed; the
                // metrics (which name the tools) pass the Host check.
                if request.uri().path() == health::METRICS_PATH
                    && let Some(refusal) = gate.refuse_host(&request)
                {
                    return Ok(refusal);
                }
                if let Some(answer) = health::answer(&request, &probe, metrics.as_deref()).await {
                    return Ok::<_, Infallible>(answer);
                }
                if let Some(metadata) = gate.metadata(&request) {
                    return Ok(metadata);
                }
                Ok(match gate.admit(&request).await {
                    Err(refusal) => *refusal,
                    Ok(identity) => sessions.handle(request, identity).await,
                })
            }
        });
        let close = sessions_stop.clone();
        tracker.spawn_on(
            async move {
                let _permit = permit;
                let stream = match tokio::net::TcpStream::from_std(stream) {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "cannot serve a connection");
                        return;
                    }
                };
                serve_connection(stream, service, close, peer).await;
            },
            &threads.next(),
        );
    }
    // Readiness is false from here on; the calls in flight get their grace.
    drain.begin_stop();
    drain.stop(SHUTDOWN_GRACE).await;
    expiry.abort();
    sessions.close_all();
    sessions_stop.cancel();
    sessions.tasks().close();
    tracker.close();
    if tokio::time::timeout(CLOSE_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {CLOSE_GRACE:?}; closing them");
    }
    // Their threads end, and with them any connection still open.
    drop(threads);
}

/// Serves one connection until it ends, or until `close` is cancelled and
/// its last response is sent.
async fn serve_connection<S>(
    stream: tokio::net::TcpStream,
    service: S,
    close: CancellationToken,
    peer: std::net::SocketAddr,
) where
    S: hyper::service::Service<Request<Incoming>, Response = http::Response<super::body::Body>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
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
}

/// Serves only `/healthz`, `/readyz`, (with `options.metrics`)
/// `/metrics` and (with `options.pages`) those pages on `listener` (the `--metrics-addr` of a server whose MCP
/// endpoint is elsewhere or on stdio), until the task is dropped; readiness
/// turns false when `server`'s stop begins. `/metrics` passes the Host check
/// of `options` (loopback names and `options.hosts`), as `/mcp` does.
pub async fn serve_health(server: McpServer, listener: TcpListener, options: HttpOptions) {
    let probe = Arc::new(server);
    let gate = Arc::new(Gate::new(&options));
    let (metrics, pages) = (options.metrics, options.pages);
    let tracker = TaskTracker::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (probe, metrics, gate) = (probe.clone(), metrics.clone(), gate.clone());
        let pages = pages.clone();
        let local = stream.local_addr().ok().map(LocalAddr);
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            if let Some(local) = local {
                request.extensions_mut().insert(local);
            }
            let (probe, metrics, gate) = (probe.clone(), metrics.clone(), gate.clone());
            let pages = pages.clone();
            async move {
                if let Some(pages) = pages.filter(|p| owns(p.prefix(), request.uri().path())) {
                    return Ok::<_, Infallible>(match gate.refuse_foreign(&request) {
                        Some(refusal) => refusal,
                        None => pages.answer(request).await,
                    });
                }
                if request.uri().path() == health::METRICS_PATH
                    && let Some(refusal) = gate.refuse_host(&request)
                {
                    return Ok(refusal);
                }
                Ok::<_, Infallible>(
                    match health::answer(&request, &probe, metrics.as_deref()).await {
                        Some(answer) => answer,
                        None => super::body::plain(
                            http::StatusCode::NOT_FOUND,
                            "not found: this address serves /healthz, /readyz and /metrics",
                        ),
                    },
                )
            }
        });
        tracker.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = connection.await;
        });
    }
}
