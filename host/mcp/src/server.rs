//! The MCP server: a [`ToolHost`]'s tools behind rmcp's `ServerHandler`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::ListToolsResult;
use rmcp::{ErrorData, RoleServer, ServiceExt};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::answers::StoredAnswers;
use super::calls_runtime::CallsRuntime;
use super::content;
use super::drain::{Drain, SHUTDOWN_GRACE};
use super::handles::SessionHandles;
use super::held::Holds;
use super::identity::Identity;
use super::input_required::Rounds;
use super::paused_scripts::PausedScripts;
use super::state_keys::StateKeys;
use super::tools_changed::{ToolsChanged, ToolsLoading};
use wasm_agent_cache::ResultCache;
use wasm_agent_code_mode::Interpreter;
use wasm_agent_pipeline::{CallSettings, HostTools, Pipeline, PipelineBuilder, ToolSet};
use wasm_agent_sandbox::approval::{Approval, ApprovalHandler};
use wasm_agent_sandbox::ask::{Asker, Asking, DEFAULT_WAIT, SessionAnswers};
use wasm_agent_sandbox::budget::{DEFAULT_REQUEST_CALLS, DEFAULT_REQUEST_RUNS};
use wasm_agent_sandbox::host::ToolHost;

/// How long a `tools/list` or `tools/call` waits for tools still loading
/// by default (see [`McpServerBuilder::loading`]); then it is answered with
/// the tools loaded so far.
pub const LOAD_WAIT: Duration = Duration::from_secs(50);

/// Why a stdio MCP session ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client never completed the MCP handshake.
    #[error("MCP handshake failed")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The server task ended abnormally.
    #[error("MCP server stopped")]
    Stopped(#[source] tokio::task::JoinError),
    /// Stdin or stdout failed.
    #[error("cannot read or write the MCP client's stdio")]
    Io(#[source] std::io::Error),
}

/// Serves a [`ToolHost`]'s tools over MCP. Each connection (stdio, or each
/// HTTP session) gets its own handler from [`McpServer::session`]; they share
/// the host, so tools added, reloaded or removed show up everywhere.
///
/// ```no_run
/// # async fn demo(host: wasm_agent_sandbox::ToolHost) -> Result<(), wasm_agent_mcp::ServeError> {
/// wasm_agent_mcp::McpServer::builder(host).build().serve_stdio().await
/// # }
/// ```
pub struct McpServer {
    shared: Arc<Shared>,
    /// The tool session of this connection's calls.
    pub(crate) session_id: String,
    /// Who this connection's calls are made for.
    pub(crate) identity: Identity,
    /// Set once this connection forwards tool-list changes.
    forwarding: AtomicBool,
    /// What this connection's user answered for the session.
    answers: Arc<SessionAnswers>,
    /// Cancelled when this connection's handler is dropped.
    closed: CancellationToken,
    _close_on_drop: DropGuard,
}

impl Shared {
    /// A digest of the tools `identity` sees (names, descriptions, schemas,
    /// annotations): a tool-list change is told only to callers whose view
    /// it changed.
    fn view(&self, identity: &Identity) -> [u8; 32] {
        use sha2::Digest;
        let listing = self.listing(&identity.who());
        let text = serde_json::to_vec(&listing).unwrap_or_default();
        sha2::Sha256::digest(&text).into()
    }
}

pub(crate) struct Shared {
    pub(crate) host: ToolHost,
    /// False while the host's first components are still loading.
    loaded: watch::Receiver<bool>,
    /// Longest a request waits for them.
    load_wait: Duration,
    /// Set when a listing was answered before they were all in.
    listed_early: Arc<AtomicBool>,
    /// The host's tools with their call settings.
    pub(crate) tools: HostTools,
    /// Code mode's interpreters, in order of preference (empty: off).
    pub(crate) code_mode: Vec<(String, Interpreter)>,
    /// The same, as tools' own calls of tools see them.
    pub(crate) callable: Arc<dyn ToolSet>,
    /// The steps of every call.
    pub(crate) pipeline: Pipeline,
    tools_changed: ToolsChanged,
    pub(crate) ask_wait: Duration,
    pub(crate) offer_session: bool,
    /// Calls in flight, for a graceful stop.
    pub(crate) drain: Drain,
    /// Calls and delegated runs one `tools/call` may cause.
    pub(crate) request_budget: (u32, u32),
    /// The request states of questions asked with a call's answer.
    pub(crate) rounds: Rounds,
    /// Running calls held while their question is asked that way.
    pub(crate) holds: Arc<Holds>,
    /// Scripts stopped while their question is asked that way.
    pub(crate) paused: PausedScripts,
    /// Tool sessions of sessionless callers, by the handles they pass.
    pub(crate) handles: SessionHandles,
    /// The runtime that runs calls which outlive their request (never a
    /// connection's thread).
    pub(crate) calls: CallsRuntime,
}

/// Settings of an [`McpServer`].
pub struct McpServerBuilder {
    host: ToolHost,
    tools_changed: ToolsChanged,
    loaded: watch::Receiver<bool>,
    load_wait: Duration,
    listed_early: Arc<AtomicBool>,
    settings: BTreeMap<String, CallSettings>,
    pipeline: PipelineBuilder,
    ask_wait: Duration,
    offer_session: bool,
    request_budget: (u32, u32),
    state_keys: Option<StateKeys>,
    code_mode: Vec<(String, Interpreter)>,
}

impl McpServerBuilder {
    /// Code mode: clients see one tool, `run_code`, the first of
    /// `interpreters` (tool name and kind) that is loaded, described with
    /// the tools its policy lets it call; those are called from its code
    /// only.
    pub fn code_mode(mut self, interpreters: Vec<(String, Interpreter)>) -> Self {
        self.code_mode = interpreters;
        self
    }

    /// The keys that seal the `requestState` of questions asked with a
    /// call's answer (the sessionless revision). Replicas must share them;
    /// by default a key of this process alone.
    pub fn request_state_keys(mut self, keys: StateKeys) -> Self {
        self.state_keys = Some(keys);
        self
    }

    /// Calls and delegated runs one `tools/call` may cause, by tools calling
    /// tools and agents they delegate to (default
    /// [`DEFAULT_REQUEST_CALLS`], [`DEFAULT_REQUEST_RUNS`]).
    pub fn request_budget(mut self, calls: u32, runs: u32) -> Self {
        self.request_budget = (calls, runs);
        self
    }

    /// The call settings of `tool` (approval, result cache), as every entry
    /// point applies them (default: none).
    pub fn call_settings(mut self, tool: impl Into<String>, settings: CallSettings) -> Self {
        self.settings.insert(tool.into(), settings);
        self
    }

    /// Calls of `tool` need approval when `approval` says so (default: never).
    pub fn requires_approval(mut self, tool: impl Into<String>, approval: Approval) -> Self {
        self.settings.entry(tool.into()).or_default().approval = approval;
        self
    }

    /// Keeps results of `tool` for `ttl` (per tenant and principal; nothing
    /// is cached by default). Only for tools whose result depends on their
    /// arguments alone.
    pub fn cache_ttl(mut self, tool: impl Into<String>, ttl: Duration) -> Self {
        self.settings.entry(tool.into()).or_default().cache_ttl = Some(ttl);
        self
    }

    /// Where cached results are kept (default: this process's memory).
    pub fn result_cache(mut self, cache: Arc<dyn ResultCache>) -> Self {
        self.pipeline = self.pipeline.result_cache(cache);
        self
    }

    /// Who approves calls that need it without asking (the operator's
    /// standing approvals). The default, `DenyAll`, approves none: then a
    /// client that declared elicitation has its user asked, and the calls of
    /// other clients are refused.
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.pipeline = self.pipeline.approval_handler(handler);
        self
    }

    /// At most `calls` calls of one tenant in flight at once; more are
    /// refused as `rate_limited` (see `PipelineBuilder::tenant_calls`).
    pub fn tenant_calls(mut self, calls: Option<usize>) -> Self {
        self.pipeline = self.pipeline.tenant_calls(calls);
        self
    }

    /// Holds every caller to `rules`: it lists, and may call, only the
    /// tools they let it (default: no rules, every tool).
    pub fn access(mut self, rules: Arc<wasm_agent_access::AccessRules>) -> Self {
        self.pipeline = self.pipeline.access(rules);
        self
    }

    /// Holds tenants and principals to `quotas`, counted in `store` (shared
    /// by replicas) or this process's memory (see
    /// `PipelineBuilder::quotas`).
    pub fn quotas(
        mut self,
        quotas: Arc<wasm_agent_access::quota::Quotas>,
        store: Option<Arc<dyn wasm_agent_access::quota::QuotaStore>>,
    ) -> Self {
        self.pipeline = self.pipeline.quotas(quotas, store);
        self
    }

    /// Tells `observer` of every tenant's calls and refusals (metrics per
    /// tenant; see `PipelineBuilder::tenant_observer`).
    pub fn tenant_observer(
        mut self,
        observer: Arc<dyn wasm_agent_access::quota::TenantObserver>,
    ) -> Self {
        self.pipeline = self.pipeline.tenant_observer(observer);
        self
    }

    /// Where the questions of tools answered by operators go (the console).
    pub fn operator_desk(mut self, desk: Arc<dyn wasm_agent_sandbox::ask::OperatorDesk>) -> Self {
        self.pipeline = self.pipeline.operator_desk(desk);
        self
    }

    /// Adds a step to every call's pipeline (after the argument check,
    /// before approval).
    pub fn layer(mut self, layer: Arc<dyn wasm_agent_pipeline::Layer>) -> Self {
        self.pipeline = self.pipeline.layer(layer);
        self
    }

    /// How long a question to the client's user waits for the answer
    /// ([`DEFAULT_WAIT`]); no answer by then denies.
    pub fn ask_wait(mut self, wait: Duration) -> Self {
        self.ask_wait = wait;
        self
    }

    /// Offers the client's user "allow for this session" besides "allow
    /// once" (off by default).
    pub fn offer_session_approval(mut self, offer: bool) -> Self {
        self.offer_session = offer;
        self
    }

    /// How often a long call reports progress to clients that asked (1 s).
    pub fn progress_every(mut self, interval: Duration) -> Self {
        self.pipeline = self.pipeline.progress_every(interval);
        self
    }

    /// Marks the host's tools as still loading (say, compiling in the
    /// background): until the returned handle is done or dropped,
    /// `tools/list` and `tools/call` wait for it, at most the load wait.
    /// If a listing had to be answered before, clients are then told the
    /// tool list changed.
    pub fn loading(&mut self) -> ToolsLoading {
        let (done, loaded) = watch::channel(false);
        self.loaded = loaded;
        ToolsLoading {
            done,
            changed: self.tools_changed.clone(),
            listed_early: self.listed_early.clone(),
        }
    }

    /// Longest a request waits for tools still loading ([`LOAD_WAIT`]).
    pub fn load_wait(mut self, wait: Duration) -> Self {
        self.load_wait = wait;
        self
    }

    /// The server.
    pub fn build(self) -> McpServer {
        let tools = HostTools::new(self.host.clone(), self.settings);
        let keys = self.state_keys.unwrap_or_else(StateKeys::random);
        let store = self.host.session_store().clone();
        let holds = Arc::new(Holds::new(store, keys.clone(), self.ask_wait));
        let handles = SessionHandles::new(keys.clone());
        let paused = PausedScripts::new(
            keys.codec().clone(),
            self.host.session_store().clone(),
            self.ask_wait,
        );
        let rounds = Rounds::new(keys, self.host.session_store().clone(), self.ask_wait);
        McpServer::for_session(Arc::new(Shared {
            host: self.host,
            loaded: self.loaded,
            load_wait: self.load_wait,
            listed_early: self.listed_early,
            callable: Arc::new(tools.clone()),
            tools,
            code_mode: self.code_mode,
            pipeline: self.pipeline.build(),
            tools_changed: self.tools_changed,
            drain: Drain::default(),
            ask_wait: self.ask_wait,
            offer_session: self.offer_session,
            request_budget: self.request_budget,
            rounds,
            holds,
            paused,
            handles,
            calls: CallsRuntime::new(),
        }))
    }
}

impl McpServer {
    /// A builder over `host`.
    pub fn builder(host: ToolHost) -> McpServerBuilder {
        let (tools_changed, _) = broadcast::channel(16);
        McpServerBuilder {
            host,
            tools_changed: ToolsChanged(tools_changed),
            loaded: watch::channel(true).1,
            load_wait: LOAD_WAIT,
            listed_early: Arc::default(),
            settings: BTreeMap::new(),
            pipeline: Pipeline::builder(),
            ask_wait: DEFAULT_WAIT,
            offer_session: false,
            request_budget: (DEFAULT_REQUEST_CALLS, DEFAULT_REQUEST_RUNS),
            state_keys: None,
            code_mode: Vec::new(),
        }
    }

    fn for_session(shared: Arc<Shared>) -> Self {
        let closed = CancellationToken::new();
        let answers = SessionAnswers::new(shared.ask_wait, shared.offer_session);
        Self {
            shared,
            session_id: format!("mcp-{}", uuid::Uuid::new_v4()),
            identity: Identity::default(),
            forwarding: AtomicBool::new(false),
            answers: Arc::new(answers),
            _close_on_drop: closed.clone().drop_guard(),
            closed,
        }
    }

    /// A handler for one more connection, sharing this server's host.
    pub fn session(&self) -> Self {
        Self::for_session(self.shared.clone())
    }

    /// A handler for the HTTP session `session_id` of `identity`: its calls
    /// keep state in that tool session, for that principal and tenant.
    pub(crate) fn for_client(&self, session_id: &str, identity: Identity) -> Self {
        let mut handler = Self::for_session(self.shared.clone());
        handler.session_id = format!("mcp-{session_id}");
        // Answers for the session are known to every replica serving it.
        let stored = StoredAnswers::new(
            self.shared.host.session_store().clone(),
            &identity,
            &handler.session_id,
        );
        let answers = SessionAnswers::new(self.shared.ask_wait, self.shared.offer_session);
        handler.answers = Arc::new(answers.shared(stored));
        handler.identity = identity;
        handler
    }

    /// Questions to this connection's user through `asker`.
    pub(crate) fn asking(&self, asker: Arc<dyn Asker>) -> Asking {
        Asking::new(asker, self.answers.clone())
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn shared_arc(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The call pipeline every `tools/call` takes.
    pub fn pipeline(&self) -> &Pipeline {
        &self.shared.pipeline
    }

    /// The host whose tools are served.
    pub fn host(&self) -> &ToolHost {
        &self.shared.host
    }

    /// The calls in flight of every session, and their graceful stop.
    pub fn drain(&self) -> Drain {
        self.shared.drain.clone()
    }

    /// Whether a call of `tool` may ask this connection's user something:
    /// it needs approval, its policy asks or lets it call other tools, or the
    /// tools are still loading (not known yet).
    pub(crate) fn may_ask(&self, tool: &str) -> bool {
        let who = self.identity.who();
        // A tool the caller may not call is one that does not exist: its
        // call is answered as that of a missing name, in the same form.
        if self.tools_are_loaded() && self.shared.offered(tool, &who).is_none() {
            return false;
        }
        let tool = self.shared.host_name(tool, &who);
        !self.tools_are_loaded()
            || self
                .shared
                .tools
                .settings(tool)
                .is_some_and(|s| !matches!(s.approval, Approval::Never))
            || self.shared.host.may_ask(tool)
    }

    /// Whether the first components are loaded.
    pub(crate) fn tools_are_loaded(&self) -> bool {
        *self.shared.loaded.borrow()
    }

    /// A handle that tells every connected client the tool list changed.
    pub fn tools_changed(&self) -> ToolsChanged {
        self.shared.tools_changed.clone()
    }

    /// Serves one client through rmcp's own service loop on `transport` (any
    /// rmcp transport), until it disconnects or `stop` is cancelled (after a
    /// graceful drain). `serve_lines` is faster on pipes (`make bench`
    /// measures both); this serves the sessionless revision on stdio.
    pub async fn serve_transport<T, E, A>(
        self,
        transport: T,
        stop: CancellationToken,
    ) -> Result<(), ServeError>
    where
        T: rmcp::transport::IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.shared().calls.serve_here();
        let drain = self.drain();
        let running = self
            .serve(transport)
            .await
            .map_err(|e| ServeError::Handshake(Box::new(e)))?;
        let connection = running.cancellation_token();
        let stopper = tokio::spawn(async move {
            stop.cancelled().await;
            drain.stop(SHUTDOWN_GRACE).await;
            connection.cancel();
        });
        let stopped = running.waiting().await;
        stopper.abort();
        stopped.map_err(ServeError::Stopped)?;
        Ok(())
    }

    /// Forwards the tool-list changes `identity` sees to `send` until the
    /// connection closes or sending fails.
    pub(crate) fn forward_tool_changes<F, Fut>(
        &self,
        identity: &Identity,
        send: F,
    ) -> impl Future<Output = ()> + use<F, Fut>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut changes = self.shared.tools_changed.subscribe();
        let closed = self.closed.clone();
        // Only a change of what this caller sees is its to hear of.
        let (shared, identity) = (self.shared.clone(), identity.clone());
        let mut seen = shared.view(&identity);
        async move {
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    change = changes.recv() => match change {
                        // Missed changes are still one change to report.
                        Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                            let view = shared.view(&identity);
                            if view == seen {
                                continue;
                            }
                            seen = view;
                            if !send().await {
                                return;
                            }
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        }
    }

    /// Waits (at most the load wait) for tools still loading; whether they
    /// are all in.
    pub(crate) async fn tools_loaded(&self) -> bool {
        if *self.shared.loaded.borrow() {
            return true;
        }
        let mut loaded = self.shared.loaded.clone();
        let wait = loaded.wait_for(|done| *done);
        matches!(
            tokio::time::timeout(self.shared.load_wait, wait).await,
            Ok(Ok(_))
        )
    }

    /// A `tools/list` of `identity`: every tool it may call, in one page.
    pub(crate) async fn list_tools_request(
        &self,
        cursor: Option<&str>,
        identity: &Identity,
    ) -> Result<ListToolsResult, ErrorData> {
        // Every tool comes in one page, so no cursor was ever handed out.
        if let Some(cursor) = cursor {
            let shown: String = cursor.chars().take(64).collect();
            return Err(ErrorData::invalid_params(
                format!("unknown cursor {shown:?}: this server lists every tool in one page"),
                None,
            ));
        }
        if !self.tools_loaded().await && !self.shared.listed_early.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                load_wait = ?self.shared.load_wait,
                "tools/list answered before every component was compiled (--load-wait); \
                 notifications/tools/list_changed follows once they are"
            );
        }
        let tools = self.shared.listing(&identity.who());
        Ok(ListToolsResult::with_all_items(
            tools.iter().map(content::tool).collect(),
        ))
    }

    /// Forwards tool-list changes to `send` for as long as this connection
    /// lives; call once per connection.
    pub(crate) fn forward_tool_changes_once<F, Fut>(&self, send: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        // A client may repeat the initialized notification; forward changes once.
        if self.forwarding.swap(true, Ordering::Relaxed) {
            return;
        }
        tokio::spawn(self.forward_tool_changes(&self.identity, send));
    }
}
