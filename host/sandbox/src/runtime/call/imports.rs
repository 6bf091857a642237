//! The `wasm-agent:tool/host` interface of one call: each import handed to
//! the capability that owns it (log, session state, events, dependencies,
//! delegation, cancellation).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasm_agent_session::{Owner, SessionStore, StateScope};

use crate::bindings::imported::{self, Level};
use crate::context::CallContext;
use crate::events::EventBus;
use crate::runtime::CallPolicy;
use crate::runtime::deadline::CallDeadline;
use crate::runtime::delegate::Delegation;
use crate::runtime::emit::Emitter;
use crate::runtime::kept::{KeptInstances, SessionKey};
use crate::runtime::log::ToolLog;
use crate::runtime::session_state::SessionState;
use crate::runtime::store::CallState;
use crate::runtime::tool_calls::ToolCalls;
use crate::spans;
use tracing::Instrument;

/// Which call this is, as every capability logs it.
#[derive(Clone, Debug)]
pub struct CallId {
    /// The tool's public name.
    pub tool: Arc<str>,
    /// The call's id.
    pub call_id: Arc<str>,
}

/// What a call is for: the tool, the call, the session and the component's
/// state scope.
pub struct CallScope<'a> {
    /// Which call.
    pub call: CallId,
    /// The session its state belongs to.
    pub session_id: String,
    /// The component's identity for session state.
    pub state_scope: Arc<str>,
    /// Who asked, with the cancellation and delegator of the run.
    pub context: &'a CallContext,
}

/// The host side of the `host` imports for one call.
pub struct HostImports {
    pub(in crate::runtime) call: CallId,
    log: ToolLog,
    state: SessionState,
    emitter: Emitter,
    delegation: Delegation,
    tool_calls: Arc<ToolCalls>,
    /// The fuel the run may use (`None`: the policy's).
    pub(in crate::runtime) fuel: Option<u64>,
    /// Whether a tool made this call (it then runs in its caller's slot).
    pub(in crate::runtime) called_by_tool: bool,
    dependencies: Arc<BTreeMap<String, String>>,
    pub(in crate::runtime) cancellation: CancellationToken,
    pub(in crate::runtime) deadline: CallDeadline,
    /// Who the call's `ask` grants are asked of.
    pub(in crate::runtime) asking: Option<crate::ask::Asking>,
    /// Where the session's instance is kept, under `keep_instance`.
    pub(in crate::runtime) keep: Option<(Arc<KeptInstances>, SessionKey)>,
    /// Where the run leaves what it used, when the call is audited.
    pub(in crate::runtime) usage: Option<crate::runtime::UsageSink>,
}

impl HostImports {
    /// The imports of the call `scope` under `policy`.
    pub fn new(
        scope: CallScope<'_>,
        policy: &CallPolicy,
        dependencies: Arc<BTreeMap<String, String>>,
        sessions: Arc<dyn SessionStore>,
        events: EventBus,
    ) -> Self {
        let CallScope {
            call,
            session_id,
            state_scope,
            context,
        } = scope;
        // The policy bounds the timeout (a day), so this cannot overflow;
        // saturate anyway rather than trust that from here.
        let deadline = CallDeadline::at(
            Instant::now()
                .checked_add(policy.timeout)
                .unwrap_or_else(far_future),
        );
        let state = StateScope {
            owner: Owner::new(context.tenant_id.as_deref(), context.user_id.as_deref()),
            session: session_id,
            component: state_scope,
        };
        Self {
            log: ToolLog::new(call.clone()),
            state: SessionState::new(sessions, state, deadline.clone()),
            emitter: Emitter::new(events, call.clone()),
            delegation: Delegation::new(
                call.clone(),
                policy.delegate.clone(),
                context.delegator.as_ref().map(|handle| &handle.0),
                context,
            ),
            tool_calls: Arc::new(ToolCalls::new(
                call.clone(),
                policy.call_tools.clone(),
                context.tool_caller.as_ref().map(|handle| &handle.0),
                context,
            )),
            fuel: None,
            called_by_tool: context.in_callers_slot,
            dependencies,
            cancellation: context.cancellation.child_token(),
            deadline,
            asking: context.asking.clone(),
            keep: None,
            usage: None,
            call,
        }
    }

    /// The calls of other tools this run may make (shared by every segment
    /// of a script, so their bound holds across them).
    pub(in crate::runtime) fn tool_calls(&self) -> Arc<ToolCalls> {
        self.tool_calls.clone()
    }

    /// A segment of a script: `calls` are the script's, and the run may use
    /// `fuel` (`None`: unbounded, as the policy has none).
    pub(in crate::runtime) fn segment(mut self, calls: Arc<ToolCalls>, fuel: Option<u64>) -> Self {
        self.tool_calls = calls;
        self.fuel = fuel;
        self
    }

    /// The run may take `time` (less than the policy's timeout: what a
    /// script has left).
    pub fn within(mut self, time: Duration) -> Self {
        let deadline =
            CallDeadline::at(Instant::now().checked_add(time).unwrap_or_else(far_future));
        self.state.set_deadline(deadline.clone());
        self.deadline = deadline;
        self
    }

    /// Leaves what the run used and did in `sink` when it ends.
    pub fn reporting_to(mut self, sink: crate::runtime::UsageSink) -> Self {
        self.usage = Some(sink);
        self
    }

    /// Runs the call on the instance `kept` holds for the session of
    /// `context` (made and kept there if it has none).
    pub fn keeping(mut self, kept: Arc<KeptInstances>, context: &CallContext) -> Self {
        self.keep = Some((kept, SessionKey::of(context)));
        self
    }

    /// The asking side of this call under `policy`.
    pub(in crate::runtime) fn asks(&self, policy: &CallPolicy) -> crate::runtime::asks::CallAsks {
        crate::runtime::asks::CallAsks::new(
            self.call.tool.clone(),
            self.asking.clone(),
            policy.asks.clone(),
            self.deadline.clone(),
            self.cancellation.clone(),
        )
    }

    /// True once the call was cancelled or ran past its deadline.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled() || self.deadline.passed()
    }
}

/// A deadline that never comes in practice (a year from now).
fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(365 * 24 * 3600))
        .unwrap_or(now)
}

impl imported::Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let _span = spans::host_call("log").entered();
        self.host.log.write(level, message);
        Ok(())
    }

    async fn get_state(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        self.host.state.get(&key).await
    }

    async fn set_state(&mut self, key: String, value: String) -> wasmtime::Result<()> {
        self.host.state.set(key, value).await
    }

    fn dependency(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.host.dependencies.get(&name).cloned())
    }

    fn emit(&mut self, name: String, payload: String) -> wasmtime::Result<()> {
        let _span = spans::host_call("emit").entered();
        self.host.emitter.emit(name, payload)
    }

    fn cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.host.is_cancelled())
    }

    async fn delegate(
        &mut self,
        agent: String,
        input: String,
    ) -> wasmtime::Result<Result<String, String>> {
        let denials = self.denials.clone();
        let delegating = self.host.delegation.delegate(agent, input, &denials);
        Ok(delegating.instrument(spans::host_call("delegate")).await)
    }

    fn callable_tools(&mut self) -> wasmtime::Result<Vec<crate::bindings::types::ToolSpec>> {
        Ok(self.host.tool_calls.callable())
    }

    async fn call_tool(
        &mut self,
        name: String,
        arguments: String,
    ) -> wasmtime::Result<Result<crate::bindings::types::ToolOutput, imported::ToolCallError>> {
        let denials = self.denials.clone();
        let calling = self.host.tool_calls.call(name, arguments, &denials);
        Ok(calling.instrument(spans::host_call("call_tool")).await)
    }
}

impl crate::bindings::types::Host for CallState {}
