//! [`RemoteServer`]: one server's connection (started again when it stops,
//! up to `max_restarts` times), its tool list (listed again on
//! `list_changed`) and its calls (deadline, progress, cancellation).

use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    PaginatedRequestParams, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wasm_agent_agent::{ProgressSink, ToolOutput};
use wasm_agent_sandbox::CallContext;
use wasm_agent_sandbox::registry::Annotations;
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::connection::{Connection, Listener, connect};
use crate::spec::ServerSpec;
use crate::{McpClientError, humanize, output};

/// At most this many tools are taken from one server.
pub const MAX_TOOLS: usize = 1000;
/// At most this many `tools/list` pages are read.
const MAX_PAGES: usize = 100;
/// A tool whose input schema is larger than this (as JSON) is left out.
const MAX_SCHEMA_BYTES: usize = 256 << 10;
/// Descriptions are cut to this many characters.
const MAX_DESCRIPTION_CHARS: usize = 4096;

/// A tool as the server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteToolInfo {
    /// Its name on the server.
    pub name: String,
    /// What it does (cut to 4096 characters).
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
    /// Its hints, with MCP's defaults where the server gave none (a tool
    /// that does not say otherwise may destroy data and reach the world).
    pub annotations: Annotations,
    /// Changes with the server's version and the tool's definition.
    pub version: String,
}

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
}

impl RemoteServer {
    /// Starts or connects to the server and lists its tools, within the
    /// spec's `connect_timeout`.
    pub async fn connect(spec: ServerSpec) -> Result<Self, McpClientError> {
        let listener = Arc::new(Listener::default());
        let (connection, tools) = connect_and_list(&spec, listener.clone()).await?;
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
                restarts: 0,
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

    /// Changes each time the list is taken again and differs.
    pub fn list_versions(&self) -> watch::Receiver<u64> {
        self.inner.listed.subscribe()
    }

    /// Calls `tool` (its name on the server) with `arguments`. The call
    /// ends with the server's answer, at the deadline, or when `context` is
    /// cancelled (the server is then told, with `notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        context: &CallContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput, CallError> {
        let label = self.inner.spec.label();
        let connection = self.live().await.map_err(|error| {
            CallError::new(ErrorKind::Failed, format!("{tool} cannot run: {error}"))
        })?;
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
        let token = handle.progress_token.clone();
        self.inner.listener.follow(token.clone(), progress);
        let mut guard = TellIfDropped(Some((connection.peer.clone(), handle.id.clone())));
        let answer = tokio::select! {
            answer = handle.await_response() => Some(answer),
            () = context.cancellation.cancelled() => None,
        };
        self.inner.listener.unfollow(&token);
        let Some(answer) = answer else {
            guard.tell().await;
            return Err(CallError::new(
                ErrorKind::Cancelled,
                "the run was cancelled before the tool finished",
            ));
        };
        guard.0 = None;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => output::convert(result, &label, tool),
            Ok(_) => Err(CallError::new(
                ErrorKind::Failed,
                format!(
                    "{label} answered tools/call for {tool} with something other than a result (tasks and input requests are not supported)"
                ),
            )),
            Err(error) => Err(self.failed(&connection, tool, error).await),
        }
    }

    /// Ends the connection: a started server's stdin is closed and it gets
    /// a moment to exit before it is killed; an HTTP session is ended.
    pub async fn close(&self) {
        let live = self.inner.slot.lock().await.live.take();
        if let Some(connection) = live {
            connection.close(Duration::from_secs(3)).await;
        }
    }

    /// The call's error for a failed request.
    async fn failed(&self, connection: &Connection, tool: &str, error: ServiceError) -> CallError {
        let label = self.inner.spec.label();
        match error {
            ServiceError::Timeout { timeout } => CallError::new(
                ErrorKind::Timeout,
                format!(
                    "{label} did not finish {tool} within {} ({}); the call was cancelled",
                    humanize(timeout),
                    if timeout == self.inner.spec.timeout {
                        "timeout: no answer or progress for that long"
                    } else {
                        "max_call_time"
                    }
                ),
            ),
            ServiceError::McpError(error) => {
                let kind = if error.code == rmcp::model::ErrorCode::INVALID_PARAMS {
                    ErrorKind::InvalidArguments
                } else {
                    ErrorKind::Failed
                };
                CallError::new(
                    kind,
                    format!(
                        "{label} refused {tool}: {} (error {})",
                        error.message.escape_debug(),
                        error.code.0
                    ),
                )
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let why = connection.why_ended(Duration::from_secs(2)).await;
                CallError::new(
                    ErrorKind::Failed,
                    format!(
                        "{label} stopped during the call to {tool}: {why}; it is started again \
                         for the next call"
                    ),
                )
            }
            other => CallError::new(ErrorKind::Failed, format!("{label}, {tool}: {other}")),
        }
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
        let last = match slot.live.take() {
            Some(ended) => ended.why_ended(Duration::from_millis(500)).await,
            None => "it could not be started".into(),
        };
        if slot.restarts >= spec.max_restarts {
            return Err(McpClientError::GaveUp {
                server: spec.label(),
                restarts: slot.restarts,
                last,
            });
        }
        slot.restarts += 1;
        tracing::warn!(server = %spec.name, restart = slot.restarts, "MCP server stopped ({last}); starting it again");
        let (connection, tools) = connect_and_list(spec, self.inner.listener.clone()).await?;
        let connection = Arc::new(connection);
        slot.live = Some(connection.clone());
        drop(slot);
        self.inner.replace_tools(tools);
        Ok(connection)
    }
}

impl Inner {
    fn replace_tools(&self, tools: Vec<RemoteToolInfo>) {
        let mut current = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        if **current != tools {
            *current = Arc::new(tools);
            self.listed.send_modify(|version| *version += 1);
        }
    }
}

/// Lists the tools again each time the server says they changed.
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
        let listed =
            tokio::time::timeout(inner.spec.connect_timeout, list(&inner.spec, &connection)).await;
        match listed {
            Ok(Ok(tools)) => {
                tracing::info!(server = %inner.spec.name, tools = tools.len(), "MCP server's tools changed");
                inner.replace_tools(tools);
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %inner.spec.name, "listing tools again: {error}")
            }
            Err(_) => {
                tracing::warn!(server = %inner.spec.name, "listing tools again took over {}", humanize(inner.spec.connect_timeout))
            }
        }
    }
}

/// Connects and lists, within the spec's `connect_timeout`.
async fn connect_and_list(
    spec: &ServerSpec,
    listener: Arc<Listener>,
) -> Result<(Connection, Vec<RemoteToolInfo>), McpClientError> {
    let attempt = async {
        let connection = connect(spec, listener).await?;
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

/// Every page of `tools/list`, bounded.
async fn list(
    spec: &ServerSpec,
    connection: &Connection,
) -> Result<Vec<RemoteToolInfo>, McpClientError> {
    let failed = |reason: String| McpClientError::Connect {
        server: spec.label(),
        target: spec.transport.describe(),
        reason,
    };
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = connection
            .peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|error| failed(format!("tools/list failed: {error}")))?;
        for tool in page.tools {
            if tools.len() == MAX_TOOLS {
                tracing::warn!(server = %spec.name, "more than {MAX_TOOLS} tools; the rest are left out");
                return Ok(tools);
            }
            if let Some(info) = describe(spec, &connection.server, tool) {
                tools.push(info);
            }
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    tracing::warn!(server = %spec.name, "tools/list went on past {MAX_PAGES} pages; the rest are left out");
    Ok(tools)
}

/// Our view of one listed tool; `None` (with a warning) for one too large.
fn describe(spec: &ServerSpec, server: &str, tool: rmcp::model::Tool) -> Option<RemoteToolInfo> {
    let input_schema = Value::Object((*tool.input_schema).clone());
    let schema_text = input_schema.to_string();
    if schema_text.len() > MAX_SCHEMA_BYTES {
        tracing::warn!(server = %spec.name, tool = %tool.name, "left out: its input schema is over {MAX_SCHEMA_BYTES} bytes");
        return None;
    }
    let description: String = tool
        .description
        .as_deref()
        .unwrap_or_default()
        .chars()
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    let hints = tool.annotations.as_ref();
    let hint = |pick: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| hints.and_then(pick);
    let read_only = hint(|a| a.read_only_hint).unwrap_or(false);
    let annotations = Annotations {
        read_only,
        // MCP's defaults: a tool may destroy data unless it is read-only or
        // says it does not, and reaches the open world unless it says not.
        destructive: !read_only && hint(|a| a.destructive_hint).unwrap_or(true),
        idempotent: hint(|a| a.idempotent_hint).unwrap_or(false),
        open_world: hint(|a| a.open_world_hint).unwrap_or(true),
    };
    let mut sha = Sha256::new();
    for part in [server, &tool.name, &description, &schema_text] {
        sha.update(part.as_bytes());
        sha.update([0]);
    }
    Some(RemoteToolInfo {
        name: tool.name.to_string(),
        description,
        input_schema,
        annotations,
        version: hex::encode(&sha.finalize()[..12]),
    })
}

/// Tells the server a call was given up on, when dropped still armed (the
/// run was cancelled, or the call's future was dropped).
struct TellIfDropped(Option<(Peer<RoleClient>, RequestId)>);

impl TellIfDropped {
    /// Tells the server now (bounded), so it knows before this returns.
    async fn tell(&mut self) {
        if let Some((peer, id)) = self.0.take() {
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

impl Drop for TellIfDropped {
    fn drop(&mut self) {
        let Some((peer, id)) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { cancel_request(&peer, id).await });
        }
    }
}
