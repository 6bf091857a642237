//! Scripts of interpreter components (world `interpreter`, contract 0.1.3).
//! A script runs in segments, each in a fresh instance and a call slot of
//! its own. Where it calls tools, the segment ends with the script's state
//! and the calls; the instance is dropped, the calls run together (each
//! down the caller's pipeline, with the caller's identity, in a slot of its
//! own), and the next segment goes on from the state with their answers. A
//! script waiting for its calls holds no instance and no slot.
//!
//! The policy's limits hold for the whole script: its `timeout` and `fuel`
//! are what all its segments may use together (time spent waiting for the
//! calls is theirs, bounded by their own policies), it makes at most
//! [`MAX_TOOL_CALLS`] calls, and its state is at most [`MAX_SCRIPT_STATE`]
//! bytes at any pause.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bindings::interpreter::script::{Step, ToolResponse};
use crate::bindings::types;
use crate::context::CallContext;
use crate::result::{CallError, ErrorKind};
use crate::runtime::tool_calls::{MAX_TOOL_CALLS, ToolCalls};
use crate::runtime::{
    CallPolicy, CallUsage, GuestOutput, HostImports, LoadedComponent, Sandbox, UsageSink,
    cancelled, denials, guest_failure, guest_output,
};

/// The largest state a script may leave its instance with at a pause.
pub const MAX_SCRIPT_STATE: usize = 1024 * 1024;

/// A call of an interpreter's tool.
pub struct ScriptCall<'a> {
    /// The tool's name inside its component.
    pub name: &'a str,
    /// The arguments, JSON text.
    pub arguments: &'a str,
    /// Who the call is for.
    pub context: &'a CallContext,
    /// Where what the whole script used goes.
    pub usage: Option<UsageSink>,
}

/// Where a segment starts.
enum Input {
    Start(Vec<types::ToolSpec>),
    Resume(Vec<u8>, Vec<ToolResponse>),
}

/// What a script may still use, and what it used.
struct Spent {
    time_left: Duration,
    fuel_left: Option<u64>,
    used: CallUsage,
}

impl Sandbox {
    /// Runs the script of `call` in segments; `imports(time)` makes the
    /// host imports of a segment that may run for `time`.
    pub async fn script(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        imports: impl Fn(Duration) -> HostImports,
        call: ScriptCall<'_>,
    ) -> Result<GuestOutput, CallError> {
        let mut spent = Spent {
            time_left: policy.timeout,
            fuel_left: policy.fuel,
            used: CallUsage::default(),
        };
        let refusals = denials::Denials::new(self.denials.clone());
        let result = self
            .drive(component, policy, &imports, &call, &mut spent, &refusals)
            .await;
        if let Some(sink) = &call.usage {
            let mut used = spent.used;
            used.activity.extend(refusals.activity());
            sink.put(used);
        }
        result
    }

    async fn drive(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        imports: &impl Fn(Duration) -> HostImports,
        call: &ScriptCall<'_>,
        spent: &mut Spent,
        refusals: &denials::Denials,
    ) -> Result<GuestOutput, CallError> {
        let first = imports(spent.time_left);
        let calls = first.tool_calls();
        let tools = calls.callable();
        let mut step = self
            .segment(
                component,
                policy,
                first,
                &calls,
                spent,
                (call, Input::Start(tools)),
            )
            .await?;
        loop {
            let pause = match step {
                Step::Done(output) => return guest_output(output, policy),
                Step::Paused(pause) => pause,
            };
            if pause.state.len() > MAX_SCRIPT_STATE {
                return Err(CallError::new(
                    ErrorKind::OutputTooLarge,
                    format!(
                        "the script paused with a state of {} bytes; a script may keep at most \
                         {MAX_SCRIPT_STATE} bytes while its tool calls run (hold less data \
                         across calls)",
                        pause.state.len()
                    ),
                ));
            }
            if pause.calls.len() > MAX_TOOL_CALLS as usize {
                return Err(CallError::new(
                    ErrorKind::CapabilityDenied,
                    format!(
                        "the script waits for {} tool calls at once; a call may call other \
                         tools at most {MAX_TOOL_CALLS} times",
                        pause.calls.len()
                    ),
                ));
            }
            let responses = answer(&calls, pause.calls, refusals).await;
            if call.context.cancellation.is_cancelled() {
                return Err(cancelled());
            }
            if spent.time_left.is_zero() {
                return Err(crate::runtime::timed_out(policy.timeout));
            }
            let next = imports(spent.time_left);
            step = self
                .segment(
                    component,
                    policy,
                    next,
                    &calls,
                    spent,
                    (call, Input::Resume(pause.state, responses)),
                )
                .await?;
        }
    }

    /// Runs one segment in a fresh instance, counting what it used.
    async fn segment(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        imports: HostImports,
        calls: &Arc<ToolCalls>,
        spent: &mut Spent,
        (call, input): (&ScriptCall<'_>, Input),
    ) -> Result<Step, CallError> {
        let sink = UsageSink::new();
        let imports = imports
            .segment(calls.clone(), spent.fuel_left)
            .reporting_to(sink.clone());
        let started = Instant::now();
        let context = call.context.to_wit();
        let ran = self
            .run(component, policy, imports, async |guest, store| {
                let Some(interpreter) = &guest.interpreter else {
                    return Err(wasmtime::format_err!("the component is not an interpreter"));
                };
                let script = interpreter.wasm_agent_tool_script();
                match input {
                    Input::Start(tools) => {
                        script
                            .call_start(store, call.name, call.arguments, &tools, &context)
                            .await
                    }
                    Input::Resume(state, responses) => {
                        script.call_resume(store, &state, &responses).await
                    }
                }
            })
            .await;
        spent.time_left = spent.time_left.saturating_sub(started.elapsed());
        if let Some(used) = sink.take() {
            if let Some(fuel) = &mut spent.fuel_left {
                *fuel = fuel.saturating_sub(used.fuel_used);
            }
            spent.used.fuel_used = spent.used.fuel_used.saturating_add(used.fuel_used);
            spent.used.peak_memory = spent.used.peak_memory.max(used.peak_memory);
            spent.used.activity.extend(used.activity);
        }
        let (answer, after) = ran?;
        answer.map_err(|error| guest_failure(error, after, policy))
    }
}

/// Runs the calls a script waits for, all at once; a refused or failed call
/// is an error the script sees (and may catch).
async fn answer(
    calls: &ToolCalls,
    requests: Vec<crate::bindings::interpreter::script::ToolRequest>,
    refusals: &denials::Denials,
) -> Vec<ToolResponse> {
    let answers = requests.into_iter().map(|request| async move {
        let output = calls
            .call_for_script(request.name, request.arguments, refusals)
            .await
            .map(|output| output.content);
        ToolResponse {
            id: request.id,
            output,
        }
    });
    futures::future::join_all(answers).await
}
