//! The agent loop: a model chooses tools, the host runs them (sandboxed
//! components, trusted closures, or remote tools such as another MCP
//! server's) and feeds the results back until the model answers.
//!
//! ```no_run
//! use std::sync::Arc;
//! use wasm_agent_agent::{Agent, AgentTool, RunOptions};
//! use wasm_agent_agent::provider::{HttpProvider, ModelSpec};
//! use wasm_agent_policy::Policy;
//! use wasm_agent_sandbox::ToolHost;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let host = ToolHost::builder().build()?;
//! host.load("calculator.wasm", Policy::default()).await?;
//! let model = HttpProvider::new(&"openai:gpt-4o-mini".parse()?, None)?;
//! let agent = Agent::builder("assistant")
//!     .instructions("Answer briefly. Use the calculator for arithmetic.")
//!     .model(Arc::new(model))
//!     .tools(AgentTool::all_from(&host))
//!     .build()?;
//! let output = agent.run("What is 17 * 23?", RunOptions::default()).await?;
//! println!("{} ({} tokens)", output.text, output.usage.total_tokens);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub use wasm_agent_sandbox::approval;
mod bm25;
pub mod code_mode;
pub mod config;
mod context;
mod execute;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod limit;
#[cfg(test)]
mod proptests;
pub mod provider;
pub mod remote;
pub mod router;
mod run;
mod spans;
mod tool;
mod tool_calls;

pub use code_mode::{CodeMode, Interpreter, Language};
pub use context::ToolContext;
pub use limit::OverflowStrategy;
pub use remote::{Progress, ProgressSink, RemoteTool};
pub use router::{LexicalRouter, ModelRouter, RouterError, RouterSettings, ToolRouter};
pub use run::{
    AgentEvent, RunOptions, RunOutput, RunStream, Shortened, StopReason, ToolCallRecord,
};
pub use tool::{AgentTool, ToolOutput, ToolSettings};
pub use wasm_agent_sandbox::approval::{
    Approval, ApprovalHandler, ApprovalRequest, ApprovalRule, ApproveTools, DenyAll,
};

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::provider::{Provider, ProviderError};
use wasm_agent_access::AccessRules;
use wasm_agent_access::quota::{QuotaStore, Quotas};
pub use wasm_agent_cache::{CacheError, CacheKey, MemoryCache, ResultCache};
use wasm_agent_pipeline::Pipeline;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::events::EventBus;
use wasm_agent_sandbox::report::CallAuditor;
use wasm_agent_session::{InMemorySessionStore, SessionStore};

/// How deep agents may hand work to each other.
pub const MAX_DELEGATION_DEPTH: u32 = 4;

/// Why an agent could not be built or a run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A model could not be used (e.g. a bad `--model` or a missing key).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A model request failed (after retries) during a run; `partial` holds
    /// what the run did before: tool calls, tokens, the conversation.
    #[error("{source}")]
    ModelFailed {
        /// Why the request failed.
        source: ProviderError,
        /// The run up to the failure.
        partial: Box<RunOutput>,
    },
    /// The agent has no model.
    #[error("agent {0:?} has no model; call .model(...)")]
    NoModel(String),
    /// A tool that cannot be offered.
    #[error("{0}")]
    BadTool(String),
    /// Two tools with one name.
    #[error("the agent already has a tool named {0:?}")]
    DuplicateTool(String),
    /// Delegation to an agent that is not registered.
    #[error("there is no agent named {name:?} to delegate to; known agents: {known}")]
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: String,
    },
    /// The run stopped without a result (its task panicked or was dropped).
    #[error("the run stopped unexpectedly: {0}")]
    Aborted(String),
    /// Agents handed work on too many times.
    #[error("delegation deeper than {MAX_DELEGATION_DEPTH} agents refused")]
    DelegationTooDeep,
    /// The request this delegation serves has used its budget of runs.
    #[error("{0}")]
    BudgetSpent(String),
}

impl AgentError {
    /// What a run did before it failed, if it got that far.
    pub fn partial(&self) -> Option<&RunOutput> {
        match self {
            AgentError::ModelFailed { partial, .. } => Some(partial),
            _ => None,
        }
    }
}

/// Chooses the tool set of one run from the run context and the agent's tools.
pub type ToolResolver = Arc<dyn Fn(&CallContext, &[AgentTool]) -> Vec<AgentTool> + Send + Sync>;

/// Loop settings.
#[derive(Clone, Copy, Debug)]
struct LoopOptions {
    max_tool_roundtrips: usize,
    parallel_tool_calls: usize,
    max_tokens: Option<u32>,
}

/// An agent: a model, instructions and tools. Cheap to clone; clones share
/// tools, cache and settings, so tools added to one are seen by all.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    instructions: Option<String>,
    model: Arc<dyn Provider>,
    summarizer: Option<Arc<dyn Provider>>,
    tools: RwLock<BTreeMap<String, AgentTool>>,
    resolver: Option<ToolResolver>,
    router: Option<RouterSettings>,
    code_mode: Option<CodeMode>,
    /// The steps every tool call of its runs takes.
    pipeline: Pipeline,
    cache: Arc<dyn ResultCache>,
    sessions: Arc<dyn SessionStore>,
    events: EventBus,
    agents: RwLock<BTreeMap<String, Agent>>,
    dependencies: BTreeMap<String, String>,
    options: LoopOptions,
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    name: String,
    instructions: Option<String>,
    model: Option<Arc<dyn Provider>>,
    summarizer: Option<Arc<dyn Provider>>,
    tools: Vec<AgentTool>,
    resolver: Option<ToolResolver>,
    router: Option<RouterSettings>,
    code_mode: Option<CodeMode>,
    approval: Arc<dyn ApprovalHandler>,
    auditor: Option<Arc<dyn CallAuditor>>,
    access: Arc<AccessRules>,
    quotas: (Arc<Quotas>, Option<Arc<dyn QuotaStore>>),
    cache_capacity: usize,
    cache: Option<Arc<dyn ResultCache>>,
    sessions: Option<Arc<dyn SessionStore>>,
    events: EventBus,
    agents: Vec<Agent>,
    dependencies: BTreeMap<String, String>,
    options: LoopOptions,
}

impl AgentBuilder {
    /// System instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }
    /// The model that drives the loop.
    pub fn model(mut self, model: Arc<dyn Provider>) -> Self {
        self.model = Some(model);
        self
    }
    /// The (cheap) model that summarizes oversized results (default: the
    /// agent's model).
    pub fn summarizer(mut self, model: Arc<dyn Provider>) -> Self {
        self.summarizer = Some(model);
        self
    }
    /// Adds a tool.
    pub fn tool(mut self, tool: AgentTool) -> Self {
        self.tools.push(tool);
        self
    }
    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = AgentTool>) -> Self {
        self.tools.extend(tools);
        self
    }
    /// Chooses each run's tools from its context.
    pub fn tool_resolver(mut self, resolver: ToolResolver) -> Self {
        self.resolver = Some(resolver);
        self
    }
    /// Routes each run to at most `max_tools` tools; fewer than `min_tools`
    /// picks (or a failure) offers every tool.
    pub fn router(
        mut self,
        router: Arc<dyn ToolRouter>,
        max_tools: usize,
        min_tools: usize,
    ) -> Self {
        self.router = Some(RouterSettings {
            router,
            max_tools: max_tools.max(1),
            min_tools,
        });
        self
    }
    /// Code mode: the model is offered one `run_code` tool (the `mode`'s
    /// interpreter) whose code calls the other tools as functions, instead
    /// of every tool's schema. The interpreter's policy decides which
    /// (`call_tools`); the router is not used.
    pub fn code_mode(mut self, mode: CodeMode) -> Self {
        self.code_mode = Some(mode);
        self
    }
    /// Who approves calls that need it (default: [`DenyAll`]).
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = handler;
        self
    }
    /// Where every call is reported (refused, cached, remote, run); without
    /// one, a sandboxed tool's calls are reported to its host's auditor.
    /// Give the host the same one: its runs record themselves.
    pub fn auditor(mut self, auditor: Arc<dyn CallAuditor>) -> Self {
        self.auditor = Some(auditor);
        self
    }
    /// Holds every run to `rules`: a run is offered, and may call, only the
    /// tools they let its caller (its context's user, tenant and
    /// credentials) see; default: no rules.
    pub fn access(mut self, rules: Arc<AccessRules>) -> Self {
        self.access = rules;
        self
    }
    /// Holds the calls of each run's tenant and user to `quotas`, counted
    /// in `store` (shared by replicas) or this process's memory.
    pub fn quotas(mut self, quotas: Arc<Quotas>, store: Option<Arc<dyn QuotaStore>>) -> Self {
        self.quotas = (quotas, store);
        self
    }
    /// Model/tool roundtrips per run before it stops (default 10).
    pub fn max_tool_roundtrips(mut self, roundtrips: usize) -> Self {
        self.options.max_tool_roundtrips = roundtrips;
        self
    }
    /// Tool calls of one turn run in parallel batches of this size (default 5).
    pub fn parallel_tool_calls(mut self, batch: usize) -> Self {
        self.options.parallel_tool_calls = batch.max(1);
        self
    }
    /// Upper bound on tokens per model answer.
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.options.max_tokens = Some(tokens);
        self
    }
    /// Cached results kept at most in the default in-memory cache (default
    /// 1024, least recently used out).
    pub fn cache_capacity(mut self, entries: usize) -> Self {
        self.cache_capacity = entries.max(1);
        self
    }
    /// Where results of tools with a `cache_ttl` are kept (default: this
    /// process's memory). A cache that fails is skipped: calls go on uncached.
    pub fn result_cache(mut self, cache: Arc<dyn ResultCache>) -> Self {
        self.cache = Some(cache);
        self
    }
    /// Where host tools keep session state (default: in memory). Give it the
    /// same store as the [`wasm_agent_sandbox::ToolHost`] to share one place.
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }
    /// Publishes host tools' events here.
    pub fn event_bus(mut self, events: EventBus) -> Self {
        self.events = events;
        self
    }
    /// A value host tools read with [`ToolContext::dependency`] (sandboxed
    /// tools get theirs from their policy).
    pub fn dependency(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.dependencies.insert(name.into(), value.into());
        self
    }
    /// Registers an agent this one's tools may delegate to, by its name.
    pub fn sub_agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }
    /// Builds the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let model = self
            .model
            .ok_or_else(|| AgentError::NoModel(self.name.clone()))?;
        let mut tools = BTreeMap::new();
        for tool in self.tools {
            if tools.contains_key(&tool.name) {
                return Err(AgentError::DuplicateTool(tool.name));
            }
            tools.insert(tool.name.clone(), tool);
        }
        if let Some(mode) = &self.code_mode
            && self.resolver.is_none()
        {
            let listed: Vec<AgentTool> = tools.values().cloned().collect();
            mode.run_code_tool(&listed)?;
        }
        let cache = self
            .cache
            .unwrap_or_else(|| Arc::new(MemoryCache::new(self.cache_capacity)));
        let agents = self
            .agents
            .into_iter()
            .map(|agent| (agent.name().to_string(), agent))
            .collect();
        Ok(Agent {
            inner: Arc::new(Inner {
                name: self.name,
                instructions: self.instructions,
                model,
                summarizer: self.summarizer,
                tools: RwLock::new(tools),
                resolver: self.resolver,
                router: self.router,
                code_mode: self.code_mode,
                pipeline: Pipeline::builder()
                    .auditor(self.auditor)
                    .approval_handler(self.approval)
                    .result_cache(cache.clone())
                    .access(self.access)
                    .quotas(self.quotas.0, self.quotas.1)
                    .build(),
                cache,
                sessions: self
                    .sessions
                    .unwrap_or_else(|| Arc::new(InMemorySessionStore::default())),
                events: self.events,
                agents: RwLock::new(agents),
                dependencies: self.dependencies,
                options: self.options,
            }),
        })
    }
}

impl Agent {
    /// A builder for an agent called `name`.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            name: name.into(),
            instructions: None,
            model: None,
            summarizer: None,
            tools: Vec::new(),
            resolver: None,
            router: None,
            code_mode: None,
            approval: Arc::new(DenyAll),
            auditor: None,
            access: Arc::default(),
            quotas: Default::default(),
            cache_capacity: 1024,
            cache: None,
            sessions: None,
            events: EventBus::default(),
            agents: Vec::new(),
            dependencies: BTreeMap::new(),
            options: LoopOptions {
                max_tool_roundtrips: 10,
                parallel_tool_calls: 5,
                max_tokens: None,
            },
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The bus host tools publish their events on.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// Its tools, by name.
    pub fn tools(&self) -> Vec<AgentTool> {
        self.read_tools().values().cloned().collect()
    }

    /// Adds a tool; refuses a name already taken.
    pub fn add_tool(&self, tool: AgentTool) -> Result<(), AgentError> {
        let mut tools = self.write_tools();
        if tools.contains_key(&tool.name) {
            return Err(AgentError::DuplicateTool(tool.name));
        }
        tools.insert(tool.name.clone(), tool);
        Ok(())
    }

    /// Adds or replaces a tool; returns the one replaced.
    pub fn replace_tool(&self, tool: AgentTool) -> Option<AgentTool> {
        self.write_tools().insert(tool.name.clone(), tool)
    }

    /// Removes a tool; runs already under way keep the set they started with.
    pub fn remove_tool(&self, name: &str) -> Option<AgentTool> {
        self.write_tools().remove(name)
    }

    /// Registers another agent to delegate to, on a live agent.
    pub fn add_sub_agent(&self, agent: Agent) {
        self.inner
            .agents
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent.name().to_string(), agent);
    }

    /// Runs the agent named `name` on `input` within `parent`'s session,
    /// user, tenant and cancellation; returns its answer.
    pub async fn delegate(
        &self,
        name: &str,
        input: &str,
        parent: &CallContext,
    ) -> Result<String, AgentError> {
        if parent.delegation_depth() >= MAX_DELEGATION_DEPTH {
            return Err(AgentError::DelegationTooDeep);
        }
        // Every path that delegates (a sandboxed tool's host.delegate, a host
        // tool's context) comes through here, so each run is counted once.
        parent
            .request_budget()
            .take_run()
            .map_err(AgentError::BudgetSpent)?;
        let agent = {
            let agents = self
                .inner
                .agents
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            agents
                .get(name)
                .cloned()
                .ok_or_else(|| AgentError::UnknownAgent {
                    name: name.to_string(),
                    known: agents.keys().cloned().collect::<Vec<_>>().join(", "),
                })?
        };
        let context = parent.delegated();
        let output = Box::pin(agent.run(input, RunOptions::new().context(context))).await?;
        Ok(output.text)
    }

    /// Forgets every cached tool result.
    pub async fn clear_cache(&self) -> Result<(), CacheError> {
        self.inner.cache.clear().await
    }

    fn read_tools(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, AgentTool>> {
        self.inner
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_tools(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, AgentTool>> {
        self.inner
            .tools
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl wasm_agent_sandbox::context::Delegator for Agent {
    async fn delegate(
        &self,
        agent: &str,
        input: &str,
        context: &CallContext,
    ) -> Result<String, wasm_agent_sandbox::context::DelegateError> {
        Ok(Agent::delegate(self, agent, input, context).await?)
    }
}
