//! One connection to a server: the started process (stdio) or the HTTP
//! session, `initialize`, and what the server sends unasked (progress,
//! `list_changed`). A watcher notes when the connection ends and why.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    InitializeRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::service::{
    ClientCacheConfig, NotificationContext, Peer, RequestContext, RoleClient, RunningService,
    RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, watch};
use wasm_agent_agent::{Progress, ProgressSink};
use wasm_agent_sandbox::ask::Asking;

use crate::McpClientError;
use crate::spec::{INHERITED_ENV, ServerSpec, Transport};

/// The most of a server's stderr kept, to say why it stopped.
const STDERR_TAIL: usize = 2048;

/// A progress report's message is cut to this many characters.
const MAX_PROGRESS_MESSAGE: usize = 256;
/// A call's progress is passed on at most this often (the last report
/// before its end may be dropped; its answer says how it ended).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// A call's progress token on one connection (tokens start afresh on each).
pub(crate) type ProgressKey = (u64, ProgressToken);

/// Where one call's progress goes, and when it last went there.
struct Followed {
    sink: ProgressSink,
    last: Option<Instant>,
}

/// What the server sends unasked, shared by every connection to it.
#[derive(Default)]
pub(crate) struct Listener {
    /// Where progress of each call in flight goes.
    progress: Mutex<HashMap<ProgressKey, Followed>>,
    /// Woken when the server says its tool list changed.
    pub(crate) list_changed: Notify,
    /// How many times the server said so, and how many of those the list
    /// taken last follows: the list is stale while they differ.
    pub(crate) changes: std::sync::atomic::AtomicU64,
    pub(crate) listed_through: std::sync::atomic::AtomicU64,
    /// Who the server's questions go to, if anyone.
    pub(crate) asking: Option<Asking>,
    /// The server's name in the config, which its questions are shown under.
    pub(crate) server: String,
}

impl Listener {
    /// For the server named `server` in the config, its questions going to
    /// `asking`.
    pub(crate) fn new(server: &str, asking: Option<Asking>) -> Self {
        Self {
            asking,
            server: server.to_string(),
            ..Self::default()
        }
    }

    pub(crate) fn follow(&self, key: ProgressKey, sink: ProgressSink) {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, Followed { sink, last: None });
    }

    pub(crate) fn unfollow(&self, key: &ProgressKey) {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// The sink for a report on `key`, unless one went there too recently.
    fn due(&self, key: &ProgressKey) -> Option<ProgressSink> {
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let followed = progress.get_mut(key)?;
        let now = Instant::now();
        if followed
            .last
            .is_some_and(|last| now.duration_since(last) < PROGRESS_INTERVAL)
        {
            return None;
        }
        followed.last = Some(now);
        Some(followed.sink.clone())
    }
}

/// The handler rmcp calls; one per connection, sharing the [`Listener`].
pub(crate) struct Handler {
    listener: Arc<Listener>,
    generation: u64,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let key = (self.generation, params.progress_token.clone());
        if let Some(sink) = self.listener.due(&key) {
            let message = params
                .message
                .as_deref()
                .map(|m| m.chars().take(MAX_PROGRESS_MESSAGE).collect());
            sink.report(Progress {
                progress: params.progress,
                total: params.total,
                message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        use std::sync::atomic::Ordering;
        self.listener.changes.fetch_add(1, Ordering::SeqCst);
        self.listener.list_changed.notify_one();
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(asking) = &self.listener.asking else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let _ = context;
        Ok(crate::asking::answer(asking, &self.listener.server, request).await)
    }

    fn get_info(&self) -> InitializeRequestParams {
        // The server may ask the person only when someone can answer.
        let capabilities = match self.listener.asking {
            Some(_) => serde_json::from_value(serde_json::json!({"elicitation": {"form": {}}}))
                .unwrap_or_default(),
            None => ClientCapabilities::default(),
        };
        InitializeRequestParams::new(
            capabilities,
            Implementation::new("wasm-agent", env!("CARGO_PKG_VERSION")),
        )
        // Sessions with notifications on them, which every server speaks.
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// A live connection.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    /// Which start of the server this is (0 the first).
    pub(crate) generation: u64,
    /// `NAME VERSION` as the server introduced itself.
    pub(crate) server: String,
    /// `Some(why)` once the connection ended.
    ended: watch::Receiver<Option<String>>,
    stop: Mutex<Option<RunningServiceCancellationToken>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop_service();
    }
}

impl Connection {
    /// Whether the connection ended.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.borrow().is_some() || self.peer.is_transport_closed()
    }

    /// Stops the service and waits up to `wait` for the watcher to see the
    /// end (a started server is killed if it has not exited by then).
    pub(crate) async fn close(&self, wait: Duration) {
        self.stop_service();
        let _ = self.why_ended(wait).await;
    }

    fn stop_service(&self) {
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(stop) = stop {
            stop.cancel();
        }
    }

    /// The connection an initialized `service` is (its watcher, which
    /// reports on `ended`, is the caller's).
    async fn opened(
        service: &RunningService<RoleClient, Handler>,
        generation: u64,
        ended: watch::Receiver<Option<String>>,
    ) -> Self {
        let peer = service.peer().clone();
        // Lists are always asked afresh (and what is dropped not kept).
        peer.set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        Self {
            server: introduced(&peer),
            peer,
            generation,
            ended,
            stop: Mutex::new(Some(service.cancellation_token())),
        }
    }

    /// Why it ended, waiting up to `wait` for the watcher to find out.
    pub(crate) async fn why_ended(&self, wait: Duration) -> String {
        let mut ended = self.ended.clone();
        let found = tokio::time::timeout(wait, ended.wait_for(Option::is_some)).await;
        match found {
            Ok(Ok(why)) => why.clone().unwrap_or_default(),
            _ => "the connection closed".into(),
        }
    }
}

/// Connects to `spec`'s server and runs `initialize` (without a deadline:
/// the caller bounds it).
pub(crate) async fn connect(
    spec: &ServerSpec,
    listener: Arc<Listener>,
    generation: u64,
) -> Result<Connection, McpClientError> {
    let failed = |reason: String| McpClientError::Connect {
        server: spec.label(),
        target: spec.transport.describe(),
        reason,
    };
    let (ended_tx, ended) = watch::channel(None);
    let handler = Handler {
        listener,
        generation,
    };
    match &spec.transport {
        Transport::Command { program, args, env } => {
            let mut command = tokio::process::Command::new(program);
            command
                .args(args)
                .env_clear()
                .envs(INHERITED_ENV.iter().filter_map(|name| {
                    std::env::var_os(name).map(|value| (name.to_string(), value))
                }))
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Its own process group: Ctrl-C at the terminal cancels the
                // run, and the run tells the server; it does not kill it.
                .process_group(0)
                .kill_on_drop(true);
            let mut child = command.spawn().map_err(|error| McpClientError::Start {
                server: spec.label(),
                command: spec.transport.describe(),
                reason: error.to_string(),
            })?;
            let (Some(stdin), Some(stdout), Some(stderr)) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take())
            else {
                return Err(failed("its standard streams could not be opened".into()));
            };
            let (tail, reading) = keep_tail(stderr);
            let service = match handler.serve((stdout, stdin)).await {
                Ok(service) => service,
                Err(error) => {
                    let status =
                        match tokio::time::timeout(Duration::from_secs(1), child.wait()).await {
                            Ok(Ok(status)) => format!(" ({status})"),
                            _ => String::new(),
                        };
                    let _ = tokio::time::timeout(Duration::from_millis(500), reading).await;
                    let said = last_words(&tail);
                    let error = root_cause(&error);
                    return Err(failed(format!("initialize failed{status}: {error}{said}")));
                }
            };
            let connection = Connection::opened(&service, generation, ended).await;
            tokio::spawn(async move {
                let quit = service.waiting().await;
                let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await
                {
                    Ok(Ok(status)) => format!("it exited ({status})"),
                    _ => {
                        let _ = child.start_kill();
                        format!("the connection closed ({quit:?})")
                    }
                };
                // What it wrote last, once its stderr is read to the end.
                let _ = tokio::time::timeout(Duration::from_millis(500), reading).await;
                let _ = ended_tx.send(Some(format!("{status}{}", last_words(&tail))));
            });
            Ok(connection)
        }
        Transport::Http { url, bearer } => {
            // The host's TLS provider, as for every other HTTPS client here.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = bearer {
                config = config.auth_header(token.clone());
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = handler.serve(transport).await.map_err(|error| {
                failed(format!("initialize failed: {}", initialize_failure(&error)))
            })?;
            let connection = Connection::opened(&service, generation, ended).await;
            tokio::spawn(async move {
                let quit = service.waiting().await;
                let _ = ended_tx.send(Some(format!("the session ended ({quit:?})")));
            });
            Ok(connection)
        }
    }
}

/// `NAME VERSION` from the server's `initialize` answer.
fn introduced(peer: &Peer<RoleClient>) -> String {
    peer.peer_info()
        .and_then(|info| info.server_info.clone())
        .map(|implementation| format!("{} {}", implementation.name, implementation.version))
        .unwrap_or_else(|| "unnamed".into())
}

type Tail = Arc<Mutex<VecDeque<u8>>>;

/// Reads the server's stderr to its end, keeping the last [`STDERR_TAIL`]
/// bytes (a server that floods it costs nothing more).
fn keep_tail(mut stderr: tokio::process::ChildStderr) -> (Tail, tokio::task::JoinHandle<()>) {
    let tail: Tail = Arc::default();
    let kept = tail.clone();
    let reading = tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stderr.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.extend(&buffer[..read]);
            let excess = kept.len().saturating_sub(STDERR_TAIL);
            kept.drain(..excess);
        }
    });
    (tail, reading)
}

/// `; it said: LAST LINE` from what stderr held, escaped; empty when nothing.
fn last_words(tail: &Tail) -> String {
    let bytes: Vec<u8> = tail
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    let last = text.lines().rev().find(|line| !line.trim().is_empty());
    match last {
        Some(line) => format!("; its last words on stderr: {}", line.trim().escape_debug()),
        None => String::new(),
    }
}

/// Why `initialize` over HTTP failed, as its innermost cause (rmcp's
/// transport errors do not name their causes as sources: look inside).
fn initialize_failure(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let rmcp::service::ClientInitializeError::TransportError { error, .. } = error else {
        return root_cause(error);
    };
    match error
        .error
        .downcast_ref::<StreamableHttpError<rmcp_reqwest::Error>>()
    {
        Some(StreamableHttpError::Client(client)) => root_cause(client),
        Some(other) => root_cause(other),
        None => root_cause(&*error.error),
    }
}

/// The innermost cause of `error`, on one line and with no credentials: what
/// went wrong (`Connection refused`), not the layers it passed through.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    let text = wasm_agent_redact::text(&cause.to_string()).into_owned();
    wasm_agent_sandbox::text::one_line(&text).into_owned()
}
