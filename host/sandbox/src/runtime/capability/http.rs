//! Outgoing HTTP (wasi:http) under the network policy.
//!
//! Every request is checked against the grants before anything connects; the
//! host then resolves the name itself, checks every address, and connects to
//! exactly the checked addresses (no second lookup, so no DNS-rebinding
//! window). TLS verifies the original host name. Redirects are never
//! followed. Response bodies are capped and every wait ends at the call's
//! deadline.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Limited};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::timeout;
use wasmtime::component::Linker;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpHooks,
};

use tracing::Instrument;

use super::{Capability, Preparing};
use crate::result::CallError;
use crate::runtime::FIELD_SIZE_LIMIT;
use crate::runtime::asks::{Asks, CallAsks};
use crate::runtime::deadline::CallDeadline;
use crate::runtime::denials::{DenialKind, Denials};
use crate::runtime::net::NetworkPolicy;
use crate::runtime::store::CallState;
use crate::spans;
use wasm_agent_policy::{ValidPolicy, default_port};

type IoFuture = Box<dyn Future<Output = Result<(), HttpError>> + Send>;
type SendFuture =
    Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), HttpError>> + Send>;

/// Largest read buffer of a response (its head must fit in it).
const RESPONSE_HEAD_BUFFER: usize = 64 * 1024;
/// Most headers a response may have.
const MAX_RESPONSE_HEADERS: usize = 100;

/// What outgoing HTTP is allowed for the calls of one component.
pub(in crate::runtime) struct HttpConfig {
    /// The network grants.
    network: NetworkPolicy,
    max_response: u64,
    max_requests: u32,
    /// The policy whose credential headers go out with matching requests.
    credentials: Arc<ValidPolicy>,
}

/// Outgoing wasi:http of one call: wasmtime's context and the hooks that
/// hold every request to the policy.
pub struct OutgoingHttp {
    pub(in crate::runtime) ctx: WasiHttpCtx,
    pub(in crate::runtime) hooks: PolicyHooks,
}

impl OutgoingHttp {
    /// Makes a kept store's HTTP this call's: its deadline, its `ask`
    /// grants and a fresh request count.
    pub(in crate::runtime) fn renew(&mut self, deadline: CallDeadline, asks: CallAsks) {
        self.hooks.deadline = deadline;
        self.hooks.asks.begin(asks);
        self.hooks.sent = 0;
    }
}

impl Capability for OutgoingHttp {
    type Config = HttpConfig;

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }

    fn configure(policy: &Arc<ValidPolicy>) -> HttpConfig {
        HttpConfig {
            network: NetworkPolicy::new(policy.network.clone()),
            max_response: policy.max_response.bytes(),
            max_requests: policy.max_requests,
            credentials: policy.clone(),
        }
    }

    fn prepare(config: &HttpConfig, call: &Preparing<'_>) -> Result<Self, CallError> {
        let mut ctx = WasiHttpCtx::new();
        ctx.set_field_size_limit(FIELD_SIZE_LIMIT);
        Ok(Self {
            ctx,
            hooks: PolicyHooks {
                policy: config.network.clone(),
                denials: call.denials.clone(),
                deadline: call.deadline.clone(),
                max_response: config.max_response,
                max_requests: config.max_requests,
                sent: 0,
                credentials: config.credentials.clone(),
                asks: call.asks.clone(),
            },
        })
    }
}

/// The wasi:http hooks of one call.
pub struct PolicyHooks {
    pub(in crate::runtime) policy: NetworkPolicy,
    pub(in crate::runtime) denials: Denials,
    pub(in crate::runtime) deadline: CallDeadline,
    pub(in crate::runtime) max_response: u64,
    pub(in crate::runtime) max_requests: u32,
    pub(in crate::runtime) sent: u32,
    /// The policy whose credential headers go out with matching requests.
    pub(in crate::runtime) credentials: Arc<ValidPolicy>,
    /// The call's `ask` grants.
    pub(in crate::runtime) asks: Asks,
}

/// A request's URI as denials, records and logs show it: without user
/// information and query (where credentials and signed links travel), and
/// with credentials by shape in its path redacted.
fn shown_uri(uri: &http::Uri) -> String {
    let mut shown = String::new();
    if let Some(scheme) = uri.scheme_str() {
        shown.push_str(scheme);
        shown.push_str("://");
    }
    shown.push_str(uri.host().unwrap_or_default());
    if let Some(port) = uri.port_u16() {
        shown.push(':');
        shown.push_str(&port.to_string());
    }
    shown.push_str(uri.path());
    wasm_agent_redact::text(&shown).into_owned()
}

fn refuse(error: HttpError) -> SendFuture {
    Box::new(async move { Err(error) })
}

impl WasiHttpHooks for PolicyHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _io: IoFuture,
    ) -> SendFuture {
        let uri = request.uri().clone();
        let attempt = format!("{} {}", request.method(), shown_uri(&uri));
        let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
        let (Some(host), Some(port)) = (
            uri.host()
                .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()),
            uri.port_u16().or_else(|| default_port(&scheme)),
        ) else {
            return refuse(HttpError::HttpRequestUriInvalid);
        };
        let span = spans::http_request(request.method().as_str(), &scheme, &host, port, uri.path());
        if self.sent >= self.max_requests {
            let reason = format!(
                "the call already made {} requests, its limit (max_requests)",
                self.max_requests
            );
            spans::failed(&span, "max_requests", &reason);
            self.denials
                .record(DenialKind::MaxRequests, attempt, reason);
            return refuse(HttpError::HttpRequestDenied);
        }
        self.sent += 1;
        // A destination the policy asks about is asked about (in the
        // request's future) instead of refused here.
        let mut ask = None;
        if let Err(reason) = self.policy.check_destination(&scheme, &host, port) {
            match self.asks.pattern_for(&scheme, &host, port) {
                Some(pattern) => ask = Some((pattern, self.asks.clone())),
                None => {
                    spans::failed(&span, "capability_denied", &reason);
                    self.denials.record(DenialKind::Network, attempt, reason);
                    return refuse(HttpError::HttpRequestDenied);
                }
            }
        }
        let mut request = request;
        // The call's trace goes out only where the policy grants it.
        if self.credentials.propagate_trace
            && let Some(parent) = wasm_agent_telemetry::context::traceparent_of(&span)
            && let Ok(value) = http::HeaderValue::try_from(parent)
        {
            request
                .headers_mut()
                .insert(wasm_agent_telemetry::context::TRACEPARENT, value);
        }
        for entry in self.credentials.credential_headers() {
            if !entry.target.applies(&scheme, &host) {
                if entry.target.hosts.matches(&host) {
                    tracing::debug!(target: "wasm_agent::network", request = %attempt, "credential headers are not sent over {scheme}");
                }
                continue;
            }
            for (name, value) in &entry.headers {
                tracing::debug!(target: "wasm_agent::network", request = %attempt, header = %name, "added a host-side header");
                request.headers_mut().insert(name.clone(), value.clone());
            }
        }
        let mut target = Target {
            attempt: attempt.clone(),
            scheme,
            host,
            port,
            policy: self.policy.clone(),
            denials: self.denials.clone(),
            deadline: self.deadline.clone(),
            options: options.unwrap_or_default(),
        };
        let max_response = self.max_response;
        Box::new(async move {
            if let Some((pattern, asks)) = ask {
                let (scheme, host, port) = (&target.scheme, &target.host, target.port);
                match asks
                    .destination(scheme, host, port, &pattern, &target.denials)
                    .await
                {
                    Ok(grant) => target.policy = target.policy.with(grant),
                    Err(reason) => {
                        spans::failed(&span, "capability_denied", &reason);
                        target.denials.record(DenialKind::Network, attempt, reason);
                        return Err(HttpError::HttpRequestDenied);
                    }
                }
            }
            let started = Instant::now();
            let result = target.send(request).instrument(span.clone()).await;
            match &result {
                Ok((response, _)) => {
                    let status = response.status().as_u16();
                    span.record("http.response.status_code", status);
                    tracing::info!(
                        target: "wasm_agent::network",
                        request = %attempt,
                        status,
                        bytes = response.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).unwrap_or("?"),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "allowed"
                    );
                }
                Err(error) => {
                    spans::failed(&span, "network", &error.to_string());
                    tracing::info!(target: "wasm_agent::network", request = %attempt, "failed: {error}");
                }
            }
            let (response, io) = result?;
            let limit = usize::try_from(max_response).unwrap_or(usize::MAX);
            let response = response.map(|body| {
                Limited::new(body, limit)
                    .map_err(move |e| match e.downcast::<HttpError>() {
                        Ok(inner) => *inner,
                        Err(_) => HttpError::HttpResponseBodySize(Some(max_response)),
                    })
                    .boxed_unsync()
            });
            Ok((response, io))
        })
    }
}

/// A checked destination of one request.
struct Target {
    attempt: String,
    scheme: String,
    host: String,
    port: u16,
    policy: NetworkPolicy,
    denials: Denials,
    deadline: CallDeadline,
    options: RequestOptions,
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

impl Target {
    fn remaining(&self) -> Duration {
        self.deadline.remaining()
    }

    /// A timeout the guest asked for, never past the call's deadline.
    fn bounded(&self, asked: Option<Duration>) -> Duration {
        let remaining = self.remaining();
        asked.map_or(remaining, |asked| asked.min(remaining))
    }

    async fn send(
        self,
        mut request: http::Request<WasiBody>,
    ) -> Result<(http::Response<WasiBody>, IoFuture), HttpError> {
        let addresses = self.resolve().await?;
        let connect_timeout = self.bounded(self.options.connect_timeout);
        let tcp = timeout(connect_timeout, TcpStream::connect(&addresses[..]))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused => HttpError::ConnectionRefused,
                _ => HttpError::Connect(e),
            })?;
        let stream: Box<dyn Stream> = if self.scheme == "https" {
            let name = rustls::pki_types::ServerName::try_from(self.host.clone())?;
            let tls = tokio_rustls::TlsConnector::from(tls_config()?).connect(name, tcp);
            Box::new(
                timeout(connect_timeout, tls)
                    .await
                    .map_err(|_| HttpError::ConnectionTimeout)?
                    .map_err(HttpError::Tls)?,
            )
        } else {
            Box::new(tcp)
        };
        // The response head is host memory too: bounded like header sets.
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(RESPONSE_HEAD_BUFFER)
            .max_headers(MAX_RESPONSE_HEADERS)
            .handshake(TokioIo::new(stream))
            .await?;
        let worker = wasmtime_wasi::runtime::spawn(connection);
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_string();
        *request.uri_mut() = http::Uri::builder()
            .path_and_query(path)
            .build()
            .map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let first_byte = self.bounded(self.options.first_byte_timeout);
        let response = timeout(first_byte, sender.send_request(request))
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)??;
        let response = response.map(|body| body.map_err(HttpError::from).boxed_unsync());
        let io: IoFuture = Box::new(async move { worker.await.map_err(HttpError::from) });
        Ok((response, io))
    }

    /// Resolves the host and checks every address; the request goes only to
    /// these addresses.
    async fn resolve(&self) -> Result<Vec<SocketAddr>, HttpError> {
        let literal = self.host.parse().ok();
        let addresses: Vec<SocketAddr> = match literal {
            Some(ip) => vec![SocketAddr::new(ip, self.port)],
            None => timeout(
                self.remaining(),
                tokio::net::lookup_host((self.host.as_str(), self.port)),
            )
            .await
            .map_err(|_| HttpError::DnsTimeout)?
            .map_err(|e| HttpError::DnsError {
                rcode: Some(e.to_string()),
                info_code: None,
            })?
            .collect(),
        };
        if addresses.is_empty() {
            return Err(HttpError::DestinationNotFound);
        }
        for address in &addresses {
            if let Err(reason) = self.policy.check_address(&self.scheme, *address) {
                let reason = match literal {
                    Some(_) => reason,
                    None => format!("{} resolves to {}; {reason}", self.host, address.ip()),
                };
                self.denials
                    .record(DenialKind::Network, self.attempt.clone(), reason);
                return Err(HttpError::DestinationIpProhibited);
            }
        }
        self.denials.allowed(&self.attempt);
        Ok(addresses)
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, HttpError> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|builder| Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| HttpError::InternalError(Some(e)))
}
