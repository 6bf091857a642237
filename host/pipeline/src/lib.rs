//! # wasm-agent-pipeline
//!
//! The one path every tool call takes, whoever makes it: the agent loop,
//! the MCP server (every transport and revision), `wasm-agent call`, tools
//! calling tools, and tools of other MCP servers. Entry points translate
//! their wire format into a [`ToolCall`] and the [`Called`] back; the steps
//! between are layers, each written once:
//!
//! 1. `audit`: nothing is answered while a fail-closed audit log cannot be
//!    written; every answer is recorded (ran, cached, refused, failed);
//! 2. `access`: the access rules ([`PipelineBuilder::access`]): a tool the
//!    caller may not call is answered as one that does not exist;
//! 3. `quota`: a tenant's and a principal's calls per minute, calls in
//!    flight and fuel per hour ([`PipelineBuilder::quotas`]);
//! 4. `check`: the arguments against the tool's schema, and the version the
//!    call may run on;
//! 5. layers an embedder adds ([`PipelineBuilder::layer`]), in the order
//!    added;
//! 6. `operators`: the questions of a tool answered by operators go to
//!    their desk (the console) instead of the person;
//! 7. `approve`: the operator's approvals, then the person, for exactly this
//!    tool, version and arguments;
//! 8. `progress`: how long the call has run, every second, to an entry
//!    point that listens;
//! 9. `cache`: the result cache, per tool, version, arguments, tenant and
//!    principal;
//! 10. the call itself, on the version checked and approved ([`Target`]).
//!
//! ```no_run
//! # async fn demo(host: wasm_agent_sandbox::ToolHost) {
//! use std::collections::BTreeMap;
//! use wasm_agent_pipeline::{HostTools, Pipeline, ToolCall, ToolSet};
//! use wasm_agent_sandbox::CallContext;
//!
//! let pipeline = Pipeline::builder().build();
//! let tools = HostTools::new(host, BTreeMap::new());
//! let tool = tools.tool("calculate").expect("loaded");
//! let arguments = serde_json::json!({"expression": "6 * 7"});
//! let called = pipeline
//!     .call(ToolCall::new(tool, "1", arguments, CallContext::new()))
//!     .await;
//! println!("{:?}", called.result);
//! # }
//! ```

#![warn(missing_docs)]

mod access;
mod admit;
pub mod approve;
mod audit;
mod cache;
mod call;
mod caller;
mod check;
mod events;
mod layer;
mod operators;
mod progress;
pub mod question;
mod quota;
mod run;
pub mod target;
mod tools;

use std::sync::Arc;
use std::time::Instant;

use wasm_agent_access::AccessRules;
use wasm_agent_access::quota::{QuotaStore, Quotas, TenantObserver};
use wasm_agent_cache::{MemoryCache, ResultCache};
use wasm_agent_sandbox::approval::{ApprovalHandler, DenyAll};
use wasm_agent_sandbox::ask::OperatorDesk;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::report::CallAuditor;
use wasm_agent_sandbox::result::CallError;

pub use call::{AnsweredBy, CallSettings, Called, Tool, ToolCall};
pub use caller::PipelineCaller;
pub use events::{CallEvents, Progress, ProgressSink};
pub use layer::{Layer, Next};
pub use progress::PROGRESS_EVERY;
pub use target::{Remote, RemoteTool, Run, Running, Sandboxed, Target};
pub use tools::{HostTools, ToolSet};

/// The steps of every call. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Pipeline {
    layers: Arc<[Arc<dyn Layer>]>,
    access: Arc<AccessRules>,
    counters: Arc<quota::Counters>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Pipeline {
    /// A builder with the defaults: no audit, nobody approves (calls that
    /// need approval are asked of the person, or refused), results cached in
    /// this process's memory (for tools with a `cache_ttl`).
    pub fn builder() -> PipelineBuilder {
        PipelineBuilder::default()
    }

    /// Takes `call` down every layer; never fails: every problem is the
    /// result's error.
    pub async fn call(&self, mut call: ToolCall) -> Called {
        let started = Instant::now();
        let mut called = Next {
            layers: &self.layers,
        }
        .run(&mut call)
        .await;
        called.duration = started.elapsed();
        called
    }

    /// The access rules every call is held to.
    pub fn access(&self) -> &Arc<AccessRules> {
        &self.access
    }

    /// Quota checks answered from this replica's memory because the shared
    /// quota store could not be reached.
    pub fn quota_fallbacks(&self) -> u64 {
        self.counters
            .fallbacks
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the caller of `context` may see and call `tool`: under this
    /// pipeline's rules and those of the request `context` serves.
    pub fn allows(&self, context: &CallContext, tool: &str) -> bool {
        access::decide(&self.access, context, tool).is_none_or(|decision| decision.allowed)
    }

    /// The tools of `tools` the caller of `context` may see and call: what
    /// an entry point lists to it.
    pub fn visible(&self, tools: &dyn ToolSet, context: &CallContext) -> Vec<ToolInfo> {
        let mut infos = tools.infos();
        infos.retain(|info| self.allows(context, &info.name));
        infos
    }

    /// The tool `name` of `tools` for the caller of `context`: a tool it
    /// may not call is answered as one that does not exist, with the names
    /// it may call.
    pub fn tool(
        &self,
        tools: &dyn ToolSet,
        name: &str,
        context: &CallContext,
    ) -> Result<Tool, CallError> {
        match tools.tool(name) {
            Some(tool) if self.allows(context, name) => Ok(tool),
            None if !self.access.is_configured() && context.access_rules().is_none() => {
                Err(tools.unknown(name))
            }
            _ => {
                let visible = self.visible(tools, context);
                let names = visible.iter().map(|info| info.name.as_str());
                Err(wasm_agent_sandbox::specs::unknown_tool(name, names))
            }
        }
    }
}

/// Settings of a [`Pipeline`].
pub struct PipelineBuilder {
    auditor: Option<Arc<dyn CallAuditor>>,
    handler: Arc<dyn ApprovalHandler>,
    cache: Arc<dyn ResultCache>,
    extra: Vec<Arc<dyn Layer>>,
    progress_every: std::time::Duration,
    tenant_calls: Option<usize>,
    access: Arc<AccessRules>,
    quotas: Arc<Quotas>,
    quota_store: Option<Arc<dyn QuotaStore>>,
    observer: Option<Arc<dyn TenantObserver>>,
    desk: Option<Arc<dyn OperatorDesk>>,
}

impl Default for PipelineBuilder {
    fn default() -> Self {
        Self {
            auditor: None,
            handler: Arc::new(DenyAll),
            cache: Arc::new(MemoryCache::new(1024)),
            extra: Vec::new(),
            progress_every: PROGRESS_EVERY,
            tenant_calls: None,
            access: Arc::default(),
            quotas: Arc::default(),
            quota_store: None,
            observer: None,
            desk: None,
        }
    }
}

impl PipelineBuilder {
    /// Records every call with `auditor`, and answers none while it refuses
    /// (a fail-closed log that cannot be written). Without one, calls of a
    /// sandboxed tool are recorded with its
    /// [`ToolHost`](wasm_agent_sandbox::ToolHost)'s auditor, whose runs
    /// record themselves: give both the same one.
    pub fn auditor(mut self, auditor: Option<Arc<dyn CallAuditor>>) -> Self {
        self.auditor = auditor;
        self
    }

    /// Who approves calls that need it without asking the person (the
    /// operator's standing approvals); default [`DenyAll`].
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.handler = handler;
        self
    }

    /// Where results of tools with a `cache_ttl` are kept (default: this
    /// process's memory, 1024 entries).
    pub fn result_cache(mut self, cache: Arc<dyn ResultCache>) -> Self {
        self.cache = cache;
        self
    }

    /// Holds every call to `rules`: a caller sees and calls only the tools
    /// they let it (default: no rules, every tool).
    pub fn access(mut self, rules: Arc<AccessRules>) -> Self {
        self.access = rules;
        self
    }

    /// Holds tenants and principals to `quotas` (calls per minute, calls in
    /// flight, fuel per hour), counted in `store` when given (shared by the
    /// replicas; while it cannot be reached, in this replica's memory),
    /// else in this process's memory.
    pub fn quotas(mut self, quotas: Arc<Quotas>, store: Option<Arc<dyn QuotaStore>>) -> Self {
        self.quotas = quotas;
        self.quota_store = store;
        self
    }

    /// Tells `observer` of every call a tenant makes, of every refusal by
    /// access rules or quotas, and of quota checks answered from memory
    /// (metrics per tenant).
    pub fn tenant_observer(mut self, observer: Arc<dyn TenantObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Where the questions of tools answered by operators go (the console).
    pub fn operator_desk(mut self, desk: Arc<dyn OperatorDesk>) -> Self {
        self.desk = Some(desk);
        self
    }

    /// Adds a step after the argument check and before approval (access
    /// rules, quotas); layers run in the order added.
    pub fn layer(mut self, layer: Arc<dyn Layer>) -> Self {
        self.extra.push(layer);
        self
    }

    /// How often a long call tells its entry point's events how long it
    /// has run ([`PROGRESS_EVERY`]; at least 10 ms).
    pub fn progress_every(mut self, interval: std::time::Duration) -> Self {
        self.progress_every = interval.max(std::time::Duration::from_millis(10));
        self
    }

    /// At most `calls` calls of one tenant in flight at once (calls tools
    /// make, which run in their caller's slot, not counted again); more are
    /// refused as `rate_limited`. Calls without a tenant are not bounded.
    pub fn tenant_calls(mut self, calls: Option<usize>) -> Self {
        self.tenant_calls = calls;
        self
    }

    /// The pipeline.
    pub fn build(self) -> Pipeline {
        let counters = Arc::new(quota::Counters::new(
            self.quota_store,
            self.observer.clone(),
        ));
        let mut layers: Vec<Arc<dyn Layer>> = vec![
            Arc::new(audit::Audit {
                auditor: self.auditor,
            }),
            Arc::new(access::Access {
                rules: self.access.clone(),
                observer: self.observer.clone(),
            }),
            Arc::new(quota::Quota {
                quotas: self.quotas,
                counters: counters.clone(),
                observer: self.observer,
            }),
            Arc::new(check::Check),
            Arc::new(admit::Admit {
                per_tenant: self.tenant_calls,
                in_flight: Arc::default(),
            }),
        ];
        layers.extend(self.extra);
        layers.push(Arc::new(operators::Operators { desk: self.desk }));
        layers.push(Arc::new(approve::Approve {
            handler: self.handler,
        }));
        layers.push(Arc::new(progress::Ticks {
            every: self.progress_every,
        }));
        layers.push(Arc::new(cache::Cache { cache: self.cache }));
        Pipeline {
            layers: layers.into(),
            access: self.access,
            counters,
        }
    }
}

#[cfg(test)]
mod tests;
