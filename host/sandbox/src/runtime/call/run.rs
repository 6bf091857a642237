//! One guest run: a call slot, a store (fresh, or the session's kept one),
//! the instance, the body under the policy's limits, and every way it can
//! end turned into a typed result.

use tracing::Instrument;

use wasmtime::component::ResourceTable;
use wasmtime::{Store, UpdateDeadline};

use crate::result::{CallError, ErrorKind};
use crate::runtime::ahead::Made;
use crate::runtime::asks::Asks;
use crate::runtime::capability;
use crate::runtime::kept::{KeptParts, Turn};
use crate::runtime::output::{CappedOutput, Captured};
use crate::runtime::store::CallState;
use crate::runtime::{
    CAPTURE_CAP, CallPolicy, Guest, HostImports, LoadedComponent, Sandbox, denials,
};
use crate::runtime::{
    Interrupted, awaits_answer, cancelled, classify, denied_error, limits::CallLimiter, timed_out,
};

/// What the sandbox refused a guest run that returned: the first denied
/// capability, and the memory size it could not grow to.
pub(in crate::runtime) struct After {
    pub denied: Option<denials::Denial>,
    pub memory: Option<usize>,
}

/// A store ready to run, with the handles its WASI context writes through
/// and its instance when it was kept from an earlier call.
struct Ready {
    store: Store<CallState>,
    guest: Option<Guest>,
    stdout: CappedOutput,
    stderr: CappedOutput,
    denials: denials::Denials,
    /// The instance was made ahead of the call (see `ahead`).
    made_ahead: bool,
}

impl Sandbox {
    /// Runs `body` on the component's instance under the policy's limits:
    /// a fresh instance, or, under `keep_instance`, the session's kept one
    /// (kept again afterwards unless the run trapped, timed out or was
    /// cancelled).
    pub(in crate::runtime) async fn run<R>(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        mut host: HostImports,
        body: impl AsyncFnOnce(&Guest, &mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<(R, After), CallError> {
        let cancellation = host.cancellation.clone();
        let deadline = host.deadline.clone();
        let timeout = policy.timeout;
        // One call of a session at a time, waited for within the deadline.
        let keep = host.keep.take();
        let usage = host.usage.take();
        let mut turn: Option<Turn> = match &keep {
            None => None,
            Some((kept, key)) => tokio::select! {
                // The turn first: mostly free, and then no deadline timer
                // is armed (as for the run below).
                biased;
                turn = kept.enter(key) => Some(turn),
                () = cancellation.cancelled() => return Err(cancelled()),
                () = deadline.reached() => return Err(timed_out(timeout)),
            },
        };
        // Folders the policy asks about are asked about before the call
        // takes a slot (`ask` folders and `keep_instance` do not go together).
        let mut fresh_parts = None;
        if keep.is_none() {
            let denials = denials::Denials::new(self.denials.clone());
            let asks = Asks::default();
            asks.begin(host.asks(policy));
            let folders = asks.folders(&policy.ask_folders, &denials).await;
            if cancellation.is_cancelled() {
                return Err(cancelled());
            }
            let Some(folders) = folders else {
                return Err(awaits_answer(&host.call.tool));
            };
            fresh_parts = Some((asks, denials, folders));
        }
        // A call made by a tool runs in its caller's slot: the caller waits
        // for it in a host call. (Waiting for a slot of its own could
        // deadlock, every slot held by a caller waiting.)
        let slot = if host.called_by_tool {
            None
        } else {
            Some(
                self.admission
                    .admit(deadline.instant(), &cancellation)
                    .await
                    .map_err(|waited| waited.into_error(|| timed_out(timeout)))?,
            )
        };
        let log_target = (host.call.tool.clone(), host.call.call_id.clone());
        let Ready {
            mut store,
            guest,
            stdout,
            stderr,
            denials,
            made_ahead,
        } = match turn.as_mut().and_then(Turn::take) {
            Some(kept) => self.renew(kept, policy, host)?,
            None => {
                let (asks, denials, folders) = fresh_parts.unwrap_or_else(|| {
                    let asks = Asks::default();
                    asks.begin(host.asks(policy));
                    (
                        asks,
                        denials::Denials::new(self.denials.clone()),
                        Vec::new(),
                    )
                });
                let made = component.ahead.take(policy.memory.bytes());
                self.fresh(policy, host, (asks, denials), &folders, made)?
            }
        };
        let _active = self.ticker.activate();

        let outcome = {
            let held_turn = store.data().turn.held();
            let run = held_turn.releasing(async {
                let guest = match guest {
                    Some(guest) => {
                        if made_ahead {
                            drop(crate::spans::made_ahead().entered());
                        }
                        guest
                    }
                    None => {
                        component
                            .instantiate(&mut store)
                            .instrument(crate::spans::instantiate())
                            .await?
                    }
                };
                let value = body(&guest, &mut store)
                    .instrument(crate::spans::guest())
                    .await?;
                Ok((value, guest))
            });
            tokio::select! {
                // The run first: most calls finish in their first poll, and
                // then no timer is armed for the deadline (arming one wakes
                // a thread parked in the runtime's driver).
                biased;
                result = run => Some(result),
                _ = cancellation.cancelled() => None,
                () = deadline.reached() => None,
            }
        };
        if let Some(sink) = &usage {
            sink.put(measure(&store, policy, &denials));
        }
        forward_output(&log_target.0, &log_target.1, "stdout", &stdout.captured());
        let stderr_text = stderr.captured();
        forward_output(&log_target.0, &log_target.1, "stderr", &stderr_text);

        let (result, finished) = match outcome {
            Some(Ok((value, guest))) => {
                let after = After {
                    denied: denials.first(),
                    memory: store.data().limiter.refused_growth(),
                };
                let finished = if let (Some((kept, _)), Some(turn)) = (&keep, turn.as_mut()) {
                    let parts = KeptParts {
                        store,
                        guest,
                        stdout,
                        stderr,
                        denials: denials.clone(),
                    };
                    kept.keep(turn, parts);
                    None
                } else {
                    Some(store)
                };
                (Ok((value, after)), finished)
            }
            _ if cancellation.is_cancelled() => (Err(cancelled()), Some(store)),
            None => (Err(timed_out(timeout)), Some(store)),
            Some(Err(error)) => (
                Err(classify(&error, &store, policy, &stderr_text)),
                Some(store),
            ),
        };
        // A call made by a tool holds no slot of its own: its store is
        // dropped here, within its caller's call.
        if let (Some(store), Some(slot)) = (finished, slot) {
            // The slot just freed makes the next call's instance.
            let next = keep.is_none().then(|| self.make_ahead(component, policy));
            let pass = self.residency.as_ref().and_then(|r| r.due());
            super::retire::retire(store, slot, next.flatten(), pass);
        }
        result.map_err(|error| match denials.first() {
            Some(denied) if matches!(error.kind, ErrorKind::Trap) => denied_error(&denied),
            _ => error,
        })
    }

    /// A kept store made ready for this call: its imports, budgets, fuel
    /// and output are this call's; its memory and instance are the session's.
    fn renew(
        &self,
        kept: crate::runtime::kept::Kept,
        policy: &CallPolicy,
        host: HostImports,
    ) -> Result<Ready, CallError> {
        let KeptParts {
            mut store,
            guest,
            stdout,
            stderr,
            denials,
        } = kept.parts;
        stdout.reset();
        stderr.reset();
        denials.clear();
        let turn = self.turns.for_call();
        store.data_mut().renew(host, turn, policy);
        set_fuel(&mut store, policy)?;
        Ok(Ready {
            store,
            guest: Some(guest),
            stdout,
            stderr,
            denials,
            made_ahead: false,
        })
    }

    /// A fresh store for one call, with exactly the granted capabilities:
    /// a new one, or the one an instance was `made` ahead in, its state
    /// replaced by the call's.
    fn fresh(
        &self,
        policy: &CallPolicy,
        host: HostImports,
        (asks, denials): (Asks, denials::Denials),
        folders: &[wasm_agent_policy::DirGrant],
        made: Option<Made>,
    ) -> Result<Ready, CallError> {
        let (state, stdout, stderr) = call_state(
            policy,
            host,
            (&asks, &denials),
            folders,
            (self.admission.resource_limit(policy), self.turns.for_call()),
        )?;
        let (store, guest) = match made {
            Some(Made {
                mut store,
                guest,
                burned,
                ..
            }) => {
                let idle = std::mem::replace(store.data_mut(), state);
                store.data_mut().limiter.carry(&idle.limiter);
                // The fuel instantiating burned is this call's, as it would
                // have been had the call instantiated.
                set_fuel(&mut store, policy)?;
                let left = store.get_fuel().unwrap_or(0).saturating_sub(burned);
                store
                    .set_fuel(left)
                    .map_err(|e| CallError::new(ErrorKind::Trap, e.to_string()))?;
                store.set_epoch_deadline(1);
                (store, Some(guest))
            }
            None => (new_store(&self.engine, state, policy)?, None),
        };
        Ok(Ready {
            store,
            made_ahead: guest.is_some(),
            guest,
            stdout,
            stderr,
            denials,
        })
    }
}

/// One call's store state under `policy`, with its stdout and stderr:
/// exactly the granted capabilities, `resources` open at most.
pub(in crate::runtime) fn call_state(
    policy: &CallPolicy,
    host: HostImports,
    (asks, denials): (&Asks, &denials::Denials),
    folders: &[wasm_agent_policy::DirGrant],
    (resources, turn): (u32, crate::runtime::turns::CallTurn),
) -> Result<(CallState, CappedOutput, CappedOutput), CallError> {
    let output = (
        CappedOutput::new(CAPTURE_CAP),
        CappedOutput::new(CAPTURE_CAP),
    );
    let capability::Prepared {
        scratch,
        wasi,
        http,
        writes,
    } = policy.capabilities.prepare(&capability::Preparing {
        denials,
        asks,
        deadline: &host.deadline,
        output: &output,
        asked_folders: folders,
        scratch: None,
    })?;
    let mut table = ResourceTable::new();
    table.set_max_capacity(resources as usize);
    let state = CallState {
        wasi,
        table,
        limiter: CallLimiter::new(policy.memory.bytes()),
        host,
        http,
        writes,
        turn,
        serving: crate::runtime::store::Serving::Call,
        denials: denials.clone(),
        _scratch: scratch,
    };
    let (stdout, stderr) = output;
    Ok((state, stdout, stderr))
}

/// A new store holding `state`, its limits and fuel set for `policy`, its
/// epoch deadline checking the call's cancellation and deadline.
pub(in crate::runtime) fn new_store(
    engine: &wasmtime::Engine,
    state: CallState,
    policy: &CallPolicy,
) -> Result<Store<CallState>, CallError> {
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    set_fuel(&mut store, policy)?;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |mut ctx| {
        let host = &ctx.data().host;
        if host.cancellation.is_cancelled() {
            return Err(wasmtime::Error::new(Interrupted::Cancelled));
        }
        // The deadline of the call running now (a kept store serves many).
        if host.deadline.passed() {
            return Err(wasmtime::Error::new(Interrupted::Deadline));
        }
        // A long call takes turns with the others (see `turns`).
        Ok(match ctx.data_mut().turn.tick() {
            None => UpdateDeadline::Yield(1),
            Some(next_turn) => UpdateDeadline::YieldCustom(1, next_turn),
        })
    });
    Ok(store)
}

/// What the run in `store` used and did so far.
fn measure(
    store: &Store<CallState>,
    policy: &CallPolicy,
    denials: &denials::Denials,
) -> crate::runtime::CallUsage {
    let given = fuel_given(store, policy);
    crate::runtime::CallUsage {
        fuel_used: given.saturating_sub(store.get_fuel().unwrap_or(given)),
        peak_memory: store.data().limiter.peak_memory() as u64,
        activity: denials.activity(),
    }
}

/// The fuel the run in `store` was given: its own (a script's segment
/// gets what its script has left), else the policy's.
fn fuel_given(store: &Store<CallState>, policy: &CallPolicy) -> u64 {
    store.data().host.fuel.or(policy.fuel).unwrap_or(u64::MAX)
}

fn set_fuel(store: &mut Store<CallState>, policy: &CallPolicy) -> Result<(), CallError> {
    let fuel = fuel_given(store, policy);
    store
        .set_fuel(fuel)
        .map_err(|e| CallError::new(ErrorKind::Trap, e.to_string()))
}

fn forward_output(tool: &str, call_id: &str, stream: &'static str, captured: &Captured) {
    for line in String::from_utf8_lossy(&captured.kept).lines() {
        let line = crate::text::tool_line(line);
        tracing::info!(target: "wasm_agent::tool", tool, call_id, stream, "{line}");
    }
    if captured.dropped > 0 {
        tracing::warn!(
            target: "wasm_agent::tool",
            tool,
            call_id,
            stream,
            "the tool wrote {} more bytes to {stream} than the {CAPTURE_CAP} kept; they were dropped",
            captured.dropped
        );
    }
}
