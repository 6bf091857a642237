//! [`RemoteServer`]: one server's connection (started again when it stops,
//! up to `max_restarts` times), its tool list (listed again on
//! `list_changed`) and its calls (deadline, progress, cancellation).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wasm_agent_agent::{ProgressSink, ToolOutput};
use wasm_agent_sandbox::CallContext;
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use wasm_agent_sandbox::ask::Asking;

use crate::connection::{Connection, Listener, ProgressKey, connect};
use crate::listing::{RemoteToolInfo, list};
use crate::spec::ServerSpec;
use crate::{McpClientError, humanize, output};

/// A changed list is taken again at most this often.
const RELIST_INTERVAL: Duration = Duration::from_secs(1);

/// A server whose tools an agent may use. Cheap to clone.
#[derive(Clone)]
pub struct RemoteServer {
    inner: Arc<Inner>,
}

struct Inner {
    spec: ServerSpec,
    listener: Arc<Listener>,
    slot: tokio::sync::Mutex<Slot>,
    tools: RwLock<Arc<Vec<RemoteToolInfo>>>,
    /// Bumped with each new list.
    listed: watch::Sender<u64>,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Default)]
struct Slot {
    live: Option<Arc<Connection>>,
    restarts: u32,
    /// Why the last connection ended or the last start failed.
    last: Option<String>,
    /// Set by [`RemoteServer::close`]: nothing is started again.
    closed: bool,
}

impl RemoteServer {
    /// Starts or connects to the server and lists its tools, within the
    /// spec's `connect_timeout`.
    pub async fn connect(spec: ServerSpec) -> Result<Self, McpClientError> {
        Self::connect_asking(spec, None).await
    }

    /// [`connect`](Self::connect), the server's questions (elicitation, or
    /// input it requires before a call goes on) going to `asking`: declared
    /// to the server only when there is someone to ask.
    pub async fn connect_asking(
        spec: ServerSpec,
        asking: Option<Asking>,
    ) -> Result<Self, McpClientError> {
        let listener = Arc::new(Listener::new(&spec.name, asking));
        let (connection, tools) = connect_and_list(&spec, listener.clone(), 0).await?;
        tracing::info!(
            server = %spec.name,
            implementation = %connection.server,
            tools = tools.len(),
            "connected to MCP server"
        );
        let inner = Arc::new(Inner {
            listener,
            slot: tokio::sync::Mutex::new(Slot {
                live: Some(Arc::new(connection)),
                ..Slot::default()
            }),
            tools: RwLock::new(Arc::new(tools)),
            listed: watch::channel(0).0,
            stop: CancellationToken::new(),
            spec,
        });
        tokio::spawn(follow_list_changes(
            Arc::downgrade(&inner),
            inner.listener.clone(),
            inner.stop.clone(),
        ));
        Ok(Self { inner })
    }

    /// What it was configured as.
    pub fn spec(&self) -> &ServerSpec {
        &self.inner.spec
    }

    /// Its tools as last listed.
    pub fn tools(&self) -> Arc<Vec<RemoteToolInfo>> {
        self.inner
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The version of `tool` (its name on the server) as the server lists
    /// it now: after the server said its list changed, once it is listed
    /// again (waiting at most `connect_timeout`). `None` if it is gone, or
    /// if the list could not be taken again since it changed.
    pub async fn current_version(&self, tool: &str) -> Option<String> {
        let listener = &self.inner.listener;
        let stale = || {
            listener.changes.load(Ordering::SeqCst) > listener.listed_through.load(Ordering::SeqCst)
        };
        let deadline = tokio::time::Instant::now() + self.inner.spec.connect_timeout;
        while stale() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if stale() {
            return None;
        }
        self.tools()
            .iter()
            .find(|info| info.name == tool)
            .map(|info| info.version.clone())
    }

    /// Changes each time the list is taken again and differs.
    pub fn list_versions(&self) -> watch::Receiver<u64> {
        self.inner.listed.subscribe()
    }

    /// Calls `tool` (its name on the server) with `arguments`. The call
    /// ends with the server's answer, at the deadline, or when `context` is
    /// cancelled (the server is then told, with `notifications/cancelled`);
    /// a cancelled run sends nothing, also while a restart is under way.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        context: &CallContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput, CallError> {
        let label = self.inner.spec.label();
        let cancelled = || {
            CallError::new(
                ErrorKind::Cancelled,
                "the run was cancelled before the tool finished",
            )
        };
        let connection = tokio::select! {
            biased;
            () = context.cancellation.cancelled() => return Err(cancelled()),
            live = self.live() => live.map_err(|error| {
                CallError::new(ErrorKind::Failed, format!("{tool} cannot run: {error}"))
            })?,
        };
        if context.cancellation.is_cancelled() {
            return Err(cancelled());
        }
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let spec = &self.inner.spec;
        let options = PeerRequestOptions::with_timeout(spec.timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(spec.max_call_time);
        let handle = match connection
            .peer
            .send_cancellable_request(request, options)
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(&connection, tool, error).await),
        };
        let key = (connection.generation, handle.progress_token.clone());
        self.inner.listener.follow(key.clone(), progress);
        let mut in_flight = InFlight {
            listener: self.inner.listener.clone(),
            key,
            tell: Some((connection.peer.clone(), handle.id.clone())),
        };
        let response = handle.await_response();
        tokio::pin!(response);
        let answer = tokio::select! {
            biased;
            answer = &mut response => answer,
            () = context.cancellation.cancelled() => {
                in_flight.tell().await;
                // rmcp ends the request once the server is told; waiting for
                // that lets it clean up after it.
                let _ = tokio::time::timeout(Duration::from_secs(1), response).await;
                return Err(cancelled());
            }
        };
        in_flight.tell = None;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => output::convert(result, &label, tool),
            Ok(_) => Err(CallError::new(
                ErrorKind::Failed,
                format!(
                    "{label} answered tools/call for {tool} with something other than a result \
                     (tasks and input requests are not supported)"
                ),
            )),
            Err(error) => Err(self.failed(&connection, tool, error).await),
        }
    }

    /// Ends the connection for good: a started server's stdin is closed
    /// and it gets a moment to exit before it is killed; an HTTP session
    /// is ended. Later calls fail.
    pub async fn close(&self) {
        let live = {
            let mut slot = self.inner.slot.lock().await;
            slot.closed = true;
            slot.live.take()
        };
        if let Some(connection) = live {
            connection.close(Duration::from_secs(3)).await;
        }
    }

    /// The call's error for a failed request.
    async fn failed(&self, connection: &Connection, tool: &str, error: ServiceError) -> CallError {
        let label = self.inner.spec.label();
        let (kind, message) = match error {
            ServiceError::Timeout { timeout } => {
                let which = if timeout == self.inner.spec.timeout {
                    "timeout: no answer or progress for that long"
                } else {
                    "max_call_time"
                };
                let after = humanize(timeout);
                let message = format!(
                    "{label} did not finish {tool} within {after} ({which}); the call was cancelled"
                );
                (ErrorKind::Timeout, message)
            }
            ServiceError::McpError(error) => {
                let kind = if error.code == rmcp::model::ErrorCode::INVALID_PARAMS {
                    ErrorKind::InvalidArguments
                } else {
                    ErrorKind::Failed
                };
                let said = error.message.escape_debug();
                (
                    kind,
                    format!("{label} refused {tool}: {said} (error {})", error.code.0),
                )
            }
            // HTTP: this request failed; the session goes on.
            ServiceError::TransportSend(error) if !connection.has_ended() => (
                ErrorKind::Failed,
                format!("{label} could not be sent {tool}: {}", error.error),
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let why = connection.why_ended(Duration::from_secs(2)).await;
                let slot = self.inner.slot.lock().await;
                let next = if slot.closed || slot.restarts >= self.inner.spec.max_restarts {
                    "it is not started again (max_restarts)"
                } else {
                    "it is started again for the next call"
                };
                let message = format!("{label} stopped during the call to {tool}: {why}; {next}");
                (ErrorKind::Failed, message)
            }
            other => (ErrorKind::Failed, format!("{label}, {tool}: {other}")),
        };
        CallError::new(kind, message)
    }

    /// The live connection; a new one (and a new list) after the last
    /// ended, while restarts remain.
    async fn live(&self) -> Result<Arc<Connection>, McpClientError> {
        let mut slot = self.inner.slot.lock().await;
        if let Some(live) = &slot.live
            && !live.has_ended()
        {
            return Ok(live.clone());
        }
        let spec = &self.inner.spec;
        if let Some(ended) = slot.live.take() {
            slot.last = Some(ended.why_ended(Duration::from_millis(500)).await);
        }
        let last = slot.last.clone().unwrap_or_else(|| "it was closed".into());
        if slot.closed || slot.restarts >= spec.max_restarts {
            return Err(McpClientError::GaveUp {
                server: spec.label(),
                restarts: slot.restarts,
                last,
            });
        }
        slot.restarts += 1;
        tracing::warn!(server = %spec.name, restart = slot.restarts, "MCP server stopped ({last}); starting it again");
        let generation = u64::from(slot.restarts);
        let listener = self.inner.listener.clone();
        let (connection, tools) = match connect_and_list(spec, listener, generation).await {
            Ok(connected) => connected,
            Err(error) => {
                slot.last = Some(error.to_string());
                return Err(error);
            }
        };
        let connection = Arc::new(connection);
        slot.live = Some(connection.clone());
        self.inner.take_list(&slot, &connection, tools);
        Ok(connection)
    }
}

impl Inner {
    /// Takes `tools`, listed on `from`, unless another connection has taken
    /// its place since (`slot` is held, so none can meanwhile).
    fn take_list(&self, slot: &Slot, from: &Arc<Connection>, tools: Vec<RemoteToolInfo>) {
        if !slot
            .live
            .as_ref()
            .is_some_and(|live| Arc::ptr_eq(live, from))
        {
            return;
        }
        let mut current = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        if **current != tools {
            *current = Arc::new(tools);
            self.listed.send_modify(|version| *version += 1);
        }
    }
}

/// Lists the tools again when the server says they changed, at most once
/// every [`RELIST_INTERVAL`].
async fn follow_list_changes(inner: Weak<Inner>, listener: Arc<Listener>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = listener.list_changed.notified() => {}
            () = stop.cancelled() => return,
        }
        let Some(inner) = inner.upgrade() else { return };
        let live = inner.slot.lock().await.live.clone();
        let Some(connection) = live.filter(|c| !c.has_ended()) else {
            continue;
        };
        let (spec, within) = (&inner.spec, inner.spec.connect_timeout);
        let seen = listener.changes.load(Ordering::SeqCst);
        match tokio::time::timeout(within, list(spec, &connection)).await {
            Ok(Ok(tools)) => {
                tracing::info!(server = %spec.name, tools = tools.len(), "MCP server's tools changed");
                let slot = inner.slot.lock().await;
                inner.take_list(&slot, &connection, tools);
                listener.listed_through.store(seen, Ordering::SeqCst);
            }
            Ok(Err(error)) => tracing::warn!(server = %spec.name, "listing tools again: {error}"),
            Err(_) => tracing::warn!(
                server = %spec.name,
                "listing tools again took over {}",
                humanize(within)
            ),
        }
        drop(inner);
        tokio::select! {
            () = tokio::time::sleep(RELIST_INTERVAL) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Connects and lists, within the spec's `connect_timeout`.
async fn connect_and_list(
    spec: &ServerSpec,
    listener: Arc<Listener>,
    generation: u64,
) -> Result<(Connection, Vec<RemoteToolInfo>), McpClientError> {
    let attempt = async {
        let connection = connect(spec, listener, generation).await?;
        let tools = list(spec, &connection).await?;
        Ok((connection, tools))
    };
    tokio::time::timeout(spec.connect_timeout, attempt)
        .await
        .map_err(|_| McpClientError::ConnectTimeout {
            server: spec.label(),
            target: spec.transport.describe(),
            after: spec.connect_timeout,
        })?
}

/// A call in flight: when dropped, its progress stops being followed and,
/// still armed, the server is told it was given up on (the run was
/// cancelled, or the call's future was dropped).
struct InFlight {
    listener: Arc<Listener>,
    key: ProgressKey,
    tell: Option<(Peer<RoleClient>, RequestId)>,
}

impl InFlight {
    /// Tells the server now (bounded), so it knows before this returns.
    async fn tell(&mut self) {
        if let Some((peer, id)) = self.tell.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), cancel_request(&peer, id)).await;
        }
    }
}

async fn cancel_request(peer: &Peer<RoleClient>, id: RequestId) {
    let reason = "the agent's run was cancelled".to_string();
    let _ = peer
        .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason)))
        .await;
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.listener.unfollow(&self.key);
        let Some((peer, id)) = self.tell.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { cancel_request(&peer, id).await });
        }
    }
}
