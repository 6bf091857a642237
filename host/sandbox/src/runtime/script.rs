//! Scripts of interpreter components (world `interpreter`, contract 0.1.3).
//! A script runs in segments, each in a fresh instance and a call slot of
//! its own. Where it calls tools, the segment ends with the script's state
//! and the calls; the instance is dropped, the calls run together (each
//! down the caller's pipeline, with the caller's identity, in a slot of its
//! own), and the next segment goes on from the state with their answers. A
//! script waiting for its calls holds no instance and no slot.
//!
//! Across its segments (and the requests it paused in), a script's
//! `timeout` and `fuel` are what all of them may use together (time spent
//! waiting for the calls is theirs, bounded by their own policies), it
//! makes at most [`MAX_TOOL_CALLS`] calls, and its state is at most
//! [`MAX_SCRIPT_STATE`] bytes at any pause. The policy's other limits
//! (`memory`, and the network and write budgets of an interpreter that has
//! them) hold in each segment; an interpreter may not have `ask` grants,
//! delegate or keep its instance (refused at load).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bindings::imported::ToolCallError;
use crate::bindings::interpreter::script::{Pause, Step, ToolRequest, ToolResponse};
use crate::bindings::types;
use crate::context::CallContext;
use crate::pause::{self, PausedAnswer, PausedCall, ScriptPause};
use crate::result::{CallError, ErrorKind};
use crate::runtime::tool_calls::{MAX_TOOL_CALLS, ToolCalls};
use crate::runtime::{
    CallPolicy, CallUsage, GuestOutput, HostImports, LoadedComponent, Sandbox, UsageSink,
    cancelled, denials, guest_failure, guest_output, timed_out,
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

/// What a script may still use, and what it used (in this request, and
/// in the requests before it that it paused in).
struct Spent {
    time_left: Duration,
    fuel_left: Option<u64>,
    used: CallUsage,
    fuel_before: u64,
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
            fuel_before: 0,
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
        let pauses = call.context.script_pauses().cloned();
        if let Some(pauses) = &pauses {
            pauses.start();
        }
        let resumed = pauses.as_ref().and_then(|pauses| pauses.take_resume());
        let mut batch = match resumed {
            Some(pause) => {
                spent.resume(&pause.spent, policy);
                calls.resume_count(pause.spent.calls);
                Batch::resumed(pause)
            }
            None => {
                let tools = calls.callable();
                let input = (call, Input::Start(tools));
                let step = self
                    .segment(component, policy, first, &calls, spent, input)
                    .await?;
                match step {
                    Step::Done(output) => return guest_output(output, policy),
                    Step::Paused(pause) => Batch::of(pause)?,
                }
            }
        };
        loop {
            if spent.time_left.is_zero() {
                return Err(timed_out(policy.timeout));
            }
            let deferred = batch.answer(&calls, refusals).await;
            if call.context.cancellation.is_cancelled() {
                return Err(cancelled());
            }
            if !deferred.is_empty()
                && let Some(pauses) = &pauses
            {
                let waits_for = deferred[0].name.clone();
                let made = calls.uses().saturating_sub(deferred.len() as u32);
                pauses.pause(batch.pause(deferred, spent.paused(policy, made)));
                return Err(waits_for_answer(&waits_for));
            }
            if spent.time_left.is_zero() {
                return Err(timed_out(policy.timeout));
            }
            let input = (call, Input::Resume(batch.state, batch.answered));
            let next = imports(spent.time_left);
            let step = self
                .segment(component, policy, next, &calls, spent, input)
                .await?;
            batch = match step {
                Step::Done(output) => return guest_output(output, policy),
                Step::Paused(pause) => Batch::of(pause)?,
            };
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

/// A script stopped at its calls: its state, the calls it waits for, and
/// the answers of those made.
struct Batch {
    state: Vec<u8>,
    waiting: Vec<ToolRequest>,
    answered: Vec<ToolResponse>,
}

impl Batch {
    /// The calls of a segment's pause, within the bounds of a script.
    fn of(pause: Pause) -> Result<Self, CallError> {
        if pause.calls.is_empty() {
            return Err(CallError::new(
                ErrorKind::Trap,
                "the interpreter paused its script without a tool call to wait for",
            ));
        }
        if pause.state.len() > MAX_SCRIPT_STATE {
            return Err(CallError::new(
                ErrorKind::OutputTooLarge,
                format!(
                    "the script paused with a state of {} bytes; a script may keep at most \
                     {MAX_SCRIPT_STATE} bytes while its tool calls run (hold less data across \
                     calls)",
                    pause.state.len()
                ),
            ));
        }
        if pause.calls.len() > MAX_TOOL_CALLS as usize {
            return Err(CallError::new(
                ErrorKind::CapabilityDenied,
                format!(
                    "the script waits for {} tool calls at once; a call may call other tools \
                     at most {MAX_TOOL_CALLS} times",
                    pause.calls.len()
                ),
            ));
        }
        Ok(Self {
            state: pause.state,
            waiting: pause.calls,
            answered: Vec::new(),
        })
    }

    /// The batch a script stopped at for an answer, given back.
    fn resumed(pause: ScriptPause) -> Self {
        Self {
            state: pause.state,
            waiting: pause
                .waiting
                .into_iter()
                .map(|call| ToolRequest {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect(),
            answered: pause
                .answered
                .into_iter()
                .map(|answer| ToolResponse {
                    id: answer.id,
                    output: answer
                        .output
                        .map_err(|(kind, message)| ToolCallError { kind, message }),
                })
                .collect(),
        }
    }

    /// Makes the calls it waits for, all at once (a refused or failed call
    /// is an error the script sees, and may catch); the calls whose answer
    /// is for the person, given with a later request.
    async fn answer(&mut self, calls: &ToolCalls, refusals: &denials::Denials) -> Vec<ToolRequest> {
        let waiting = std::mem::take(&mut self.waiting);
        let made = waiting.into_iter().map(|request| async move {
            let (output, deferred) = calls
                .call_for_script(request.name.clone(), request.arguments.clone(), refusals)
                .await;
            let response = ToolResponse {
                id: request.id,
                output: output.map(|output| output.content),
            };
            (request, response, deferred)
        });
        let mut deferred = Vec::new();
        for (request, response, waits) in futures::future::join_all(made).await {
            if waits {
                deferred.push(request);
            } else {
                self.answered.push(response);
            }
        }
        deferred
    }

    /// The pause to keep until the answer comes: `deferred` are made again.
    fn pause(self, deferred: Vec<ToolRequest>, spent: pause::Spent) -> ScriptPause {
        ScriptPause {
            state: self.state,
            waiting: deferred
                .into_iter()
                .map(|request| PausedCall {
                    id: request.id,
                    name: request.name,
                    arguments: request.arguments,
                })
                .collect(),
            answered: self
                .answered
                .into_iter()
                .map(|response| PausedAnswer {
                    id: response.id,
                    output: response.output.map_err(|error| (error.kind, error.message)),
                })
                .collect(),
            spent,
        }
    }
}

impl Spent {
    /// What a pause records of this.
    fn paused(&self, policy: &CallPolicy, calls: u32) -> pause::Spent {
        pause::Spent {
            millis: policy.timeout.saturating_sub(self.time_left).as_millis() as u64,
            fuel: self.fuel_before.saturating_add(self.used.fuel_used),
            calls,
        }
    }

    /// Takes up what a pause recorded.
    fn resume(&mut self, spent: &pause::Spent, policy: &CallPolicy) {
        self.time_left = policy
            .timeout
            .saturating_sub(Duration::from_millis(spent.millis));
        self.fuel_left = policy.fuel.map(|fuel| fuel.saturating_sub(spent.fuel));
        self.fuel_before = spent.fuel;
    }
}

/// The error of a script stopped for the person's answer about its call of
/// `tool`.
fn waits_for_answer(tool: &str) -> CallError {
    CallError::new(
        ErrorKind::Denied,
        format!(
            "the script waits for the user's answer about its call of {tool:?}; it goes on \
             from there when the request is made again with that answer"
        ),
    )
}
