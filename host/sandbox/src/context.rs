//! Who and what a call is for.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
pub use wasm_agent_access::{AccessRules, Credentials, Who};

use crate::ask::{Asking, Deferred};
use crate::bindings::types;
use crate::budget::RequestBudget;
use crate::pause::ScriptPauses;
use crate::result::CallError;
pub use crate::result::ToolOutput;
use crate::tool::ToolInfo;

/// The run context of a call, given to the tool as `call-context`.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The agent run this call belongs to.
    pub run_id: String,
    /// The session: tools' state is kept per session.
    pub session_id: String,
    /// The end user, if known.
    pub user_id: Option<String>,
    /// The tenant, if the host serves several.
    pub tenant_id: Option<String>,
    /// Free-form data for tools.
    pub metadata: Map<String, Value>,
    /// How the caller proved who it is, with its token's scopes and claims
    /// (access rules match them); `None`: the person at the terminal.
    /// Calls made from this one act for the same caller.
    pub credentials: Option<Arc<Credentials>>,
    /// What let the call through the pipeline's access rules and quotas,
    /// for the audit trail (set by the pipeline; calls made from this one
    /// do not inherit it).
    pub decided_by: Option<Arc<str>>,
    /// The access rules of the request this call serves (the first
    /// pipeline's that had any): every pipeline the request's calls pass,
    /// a delegated agent's included, holds them to these as well as to its
    /// own.
    pub(crate) access: Option<Arc<AccessRules>>,
    /// Where the fuel this call's runs burn is added, with that of the
    /// calls made for it (set by the pipeline's quotas).
    pub(crate) meter: Option<Arc<AtomicU64>>,
    /// Fire to stop the call (and any other call sharing the token).
    pub cancellation: CancellationToken,
    /// How the call's approval went, set by the entry point that asked
    /// (for the audit trail; calls made from this one do not inherit it).
    pub approval: Option<crate::approval::ApprovalNote>,
    /// How many agents handed this work on (bounds delegation chains).
    pub(crate) delegation_depth: u32,
    /// Who runs `host.delegate` for sandboxed tools (set by the agent loop).
    pub(crate) delegator: Option<DelegatorHandle>,
    /// How many tool calls deep this call is (0: called by the agent or
    /// client; 1: called by a tool with `host.call-tool`).
    pub(crate) tool_call_depth: u32,
    /// Whether the call runs in its caller's slot: a call a tool makes while
    /// it runs (the caller waits for it in a host call, holding its slot).
    /// A call a paused script makes takes a slot of its own.
    pub(crate) in_callers_slot: bool,
    /// Who runs `host.call-tool` for sandboxed tools (set by the agent loop,
    /// the MCP server and the CLI).
    pub(crate) tool_caller: Option<ToolCallerHandle>,
    /// Who is asked about capabilities the tool's policy lists under `ask`
    /// (and, at the entry point, about calls that need approval); nobody
    /// when `None`, so those stay denied.
    pub(crate) asking: Option<Asking>,
    /// What the root request this call serves may still cause; shared by
    /// every context made from this one.
    pub(crate) budget: Arc<RequestBudget>,
    /// Where a script this call runs leaves its pause for an answer that
    /// comes with a later request, and finds it again (the entry point's).
    pub(crate) script_pauses: Option<Arc<ScriptPauses>>,
}

/// Runs the calls sandboxed tools make of other tools (`host.call-tool`),
/// on the path the entry point's own calls take: validation, approval,
/// limits, cancellation, events. The agent loop, the MCP server and the CLI
/// each set one on the contexts of their calls ([`CallContext::tool_caller`]).
#[async_trait::async_trait]
pub trait ToolCaller: Send + Sync + 'static {
    /// The tools calls may be made of for the caller of `context` (their
    /// specs are shown to the tool).
    fn tools(&self, context: &CallContext) -> Vec<ToolInfo>;

    /// Calls `name` with `arguments` within `context`, a context one level
    /// deeper than the calling tool's (same run, session, user, tenant;
    /// cancelled with it). Its error kinds are those of a direct call.
    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, CallError>;
}

/// A shared [`ToolCaller`] (opaque in debug output).
#[derive(Clone)]
pub(crate) struct ToolCallerHandle(pub Arc<dyn ToolCaller>);

impl std::fmt::Debug for ToolCallerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolCaller")
    }
}

/// Runs a named agent on behalf of a tool (`host.delegate`). The agent loop
/// sets itself as the delegator of its runs; an embedder with its own loop can
/// set one with [`CallContext::delegator`].
#[async_trait::async_trait]
pub trait Delegator: Send + Sync + 'static {
    /// The answer of the agent named `agent` to `input`, run within `context`
    /// (same session, user, tenant; cancelled with it). Run the sub-task in
    /// [`CallContext::delegated`] so that the delegation depth is counted.
    async fn delegate(
        &self,
        agent: &str,
        input: &str,
        context: &CallContext,
    ) -> Result<String, DelegateError>;
}

/// Why a delegated task has no answer; its text goes back to the tool.
pub type DelegateError = Box<dyn std::error::Error + Send + Sync>;

/// A shared [`Delegator`] (opaque in debug output).
#[derive(Clone)]
pub(crate) struct DelegatorHandle(pub Arc<dyn Delegator>);

impl std::fmt::Debug for DelegatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Delegator")
    }
}

impl Default for CallContext {
    fn default() -> Self {
        Self {
            run_id: uuid::Uuid::new_v4().to_string(),
            session_id: "default".into(),
            user_id: None,
            tenant_id: None,
            metadata: Map::new(),
            credentials: None,
            decided_by: None,
            access: None,
            meter: None,
            cancellation: CancellationToken::new(),
            approval: None,
            delegation_depth: 0,
            delegator: None,
            tool_call_depth: 0,
            in_callers_slot: false,
            tool_caller: None,
            asking: None,
            budget: Arc::default(),
            script_pauses: None,
        }
    }
}

impl CallContext {
    /// A context with a fresh run id in the `default` session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the session id.
    pub fn session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = session_id.into();
        self
    }

    /// Sets the user id.
    pub fn user(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// Sets the tenant id.
    pub fn tenant(mut self, tenant_id: impl Into<String>) -> Self {
        self.tenant_id = Some(tenant_id.into());
        self
    }

    /// Sets how the caller proved who it is (access rules match it).
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(Arc::new(credentials));
        self
    }

    /// The access rules of the request this call serves, if any.
    pub fn access_rules(&self) -> Option<&Arc<AccessRules>> {
        self.access.as_ref()
    }

    /// Holds this call, and every call made for it, to `rules` (a
    /// pipeline sets the first it applies; they cannot be taken off).
    pub fn held_to(&mut self, rules: Arc<AccessRules>) {
        if self.access.is_none() {
            self.access = Some(rules);
        }
    }

    /// Meters this call: the fuel its runs burn, and those of the calls
    /// made for it, is added to the counter returned (a fresh one).
    pub fn metered(&mut self) -> Arc<AtomicU64> {
        let meter = Arc::new(AtomicU64::new(0));
        self.meter = Some(meter.clone());
        meter
    }

    /// The caller as access rules see it.
    pub fn who(&self) -> Who<'_> {
        Who {
            principal: self.user_id.as_deref(),
            tenant: self.tenant_id.as_deref(),
            credentials: self.credentials.as_deref(),
        }
    }

    /// Notes how the call's approval went (for the audit trail).
    pub fn approval(mut self, note: crate::approval::ApprovalNote) -> Self {
        self.approval = Some(note);
        self
    }

    /// Adds one metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Lets sandboxed tools delegate through `delegator` (their policy must
    /// still name the agent).
    pub fn delegator(mut self, delegator: Arc<dyn Delegator>) -> Self {
        self.delegator = Some(DelegatorHandle(delegator));
        self
    }

    /// Lets sandboxed tools call other tools through `caller` (their policy
    /// must still grant each name in `call_tools`).
    pub fn tool_caller(mut self, caller: Arc<dyn ToolCaller>) -> Self {
        self.tool_caller = Some(ToolCallerHandle(caller));
        self
    }

    /// Lets the tool's `ask` grants (and the entry point's approvals) be
    /// asked of the person `asking` reaches, never of the model.
    pub fn asking(mut self, asking: Asking) -> Self {
        self.asking = Some(asking);
        self
    }

    /// Sends this call's questions to `asking` from now on (`None`:
    /// nobody can be asked).
    pub fn set_asking(&mut self, asking: Option<Asking>) {
        self.asking = asking;
    }

    /// Lets a script this call runs stop where a question's answer comes
    /// with a later request, leaving its pause in `pauses` (and go on from
    /// the pause put back there).
    pub fn pausing(mut self, pauses: Arc<ScriptPauses>) -> Self {
        self.script_pauses = Some(pauses);
        self
    }

    /// Where a script this call runs leaves its pause, if anywhere.
    pub fn script_pauses(&self) -> Option<&Arc<ScriptPauses>> {
        self.script_pauses.as_ref()
    }

    /// Makes this the root of a request with `budget` (contexts made from
    /// it share it); a new context has [`RequestBudget::default`].
    pub fn budget(mut self, budget: RequestBudget) -> Self {
        self.budget = Arc::new(budget);
        self
    }

    /// The budget of the root request this call serves.
    pub fn request_budget(&self) -> &RequestBudget {
        &self.budget
    }

    /// Who this call's questions go to, if anyone.
    pub fn asker(&self) -> Option<&Asking> {
        self.asking.as_ref()
    }

    /// How many tool calls deep this call is: 0 when the agent or client
    /// made it, 1 when a tool made it with `host.call-tool`.
    pub fn tool_call_depth(&self) -> u32 {
        self.tool_call_depth
    }

    /// The context of a call a tool makes of another tool: the same run,
    /// session, user, tenant, metadata and callers, cancelled with this
    /// one, one level deeper.
    pub(crate) fn tool_called(&self) -> Self {
        Self {
            cancellation: self.cancellation.child_token(),
            tool_call_depth: self.tool_call_depth.saturating_add(1),
            in_callers_slot: true,
            approval: None,
            decided_by: None,
            asking: self.asking.as_ref().map(Asking::within_running_call),
            script_pauses: None,
            ..self.clone()
        }
    }

    /// The context of a call a paused script makes: as
    /// [`tool_called`](Self::tool_called), but the call takes a slot of
    /// its own, since the script holds none while it waits. Where the
    /// script can stop for an answer that comes later, its call's
    /// questions are asked as before a call starts, and `Deferred` tells
    /// whether one was.
    pub(crate) fn script_called(&self) -> (Self, Option<Deferred>) {
        let mut called = Self {
            in_callers_slot: false,
            ..self.tool_called()
        };
        let mut deferred = None;
        if self.script_pauses.is_some()
            && let Some(asking) = &self.asking
        {
            let (asking, flag) = asking.deferring();
            called.asking = Some(asking);
            deferred = Some(flag);
        }
        (called, deferred)
    }

    /// A context for work done on behalf of this one: a new run id, the same
    /// session, user, tenant and metadata, cancelled when this one is.
    pub fn child(&self) -> Self {
        Self {
            run_id: uuid::Uuid::new_v4().to_string(),
            cancellation: self.cancellation.child_token(),
            approval: None,
            decided_by: None,
            script_pauses: None,
            ..self.clone()
        }
    }

    /// How many agents handed this work on.
    pub fn delegation_depth(&self) -> u32 {
        self.delegation_depth
    }

    /// A [`child`](Self::child) context for work handed to another agent: one
    /// level deeper in the delegation chain.
    pub fn delegated(&self) -> Self {
        Self {
            delegation_depth: self.delegation_depth.saturating_add(1),
            asking: self.asking.as_ref().map(Asking::within_running_call),
            ..self.child()
        }
    }

    pub(crate) fn to_wit(&self) -> types::CallContext {
        types::CallContext {
            run_id: self.run_id.clone(),
            session_id: self.session_id.clone(),
            user_id: self.user_id.clone(),
            tenant_id: self.tenant_id.clone(),
            metadata: Value::Object(self.metadata.clone()).to_string(),
        }
    }
}
