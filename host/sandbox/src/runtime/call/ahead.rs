//! Instances made ahead of calls: after a call, a fresh instance of its
//! component is made off the call's path and kept for the next one, which
//! then does not wait for instantiation.
//!
//! An instance made ahead is never used but once. It is made in a store of
//! its own whose capabilities are none (no folders, network, environment or
//! host handles; the call cancelled and past its deadline), and the call
//! that takes it replaces that store's whole state with its own (WASI and
//! HTTP contexts, resource table, host imports, budgets, output) before any
//! guest code runs. Instantiating a component runs no guest code unless one
//! of its modules has a start function: a component whose instantiation
//! burns any fuel is never made ahead again, and its calls instantiate as
//! before, with their own capabilities. The memory limit is checked when
//! the instance is made: one made under another limit than the call's is
//! dropped, not used.
//!
//! Each component keeps at most one, and the host at most [`AHEAD_SLOTS`]
//! in all: the pool of instance slots has room for them beside the calls'.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasm_agent_policy::{ByteSize, Policy};
use wasm_agent_session::InMemorySessionStore;
use wasmtime::{CallHook, Store};

use crate::context::CallContext;
use crate::events::EventBus;
use crate::runtime::asks::Asks;
use crate::runtime::denials::Denials;
use crate::runtime::imports::{CallId, CallScope, HostImports};
use crate::runtime::run::{call_state, new_store};
use crate::runtime::store::{CallState, Serving};
use crate::runtime::turns::Turns;
use crate::runtime::{CallPolicy, Guest, Instantiable, LoadedComponent, Sandbox};

/// Instances made ahead the host holds at once, over all its components.
pub const AHEAD_SLOTS: u32 = 16;

/// Fuel an instance is made with (wasmtime's own initialisation of a
/// module's tables and memories is compiled code and burns some; a start
/// function may too).
const PROBE_FUEL: u64 = 1 << 20;

/// The host-wide bound on instances made ahead, and how many wait.
#[derive(Clone)]
pub(in crate::runtime) struct AheadBudget {
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicU64>,
}

impl Default for AheadBudget {
    fn default() -> Self {
        Self {
            slots: Arc::new(Semaphore::new(AHEAD_SLOTS as usize)),
            waiting: Arc::default(),
        }
    }
}

impl AheadBudget {
    /// Instances made ahead that wait for a call.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// An instance made ahead, with the memory limit it was made under.
pub(in crate::runtime) struct Made {
    pub store: Store<CallState>,
    pub guest: Guest,
    /// Fuel instantiating it burned, charged to the call that takes it.
    pub burned: u64,
    memory: u64,
    _held: Held,
}

/// A made instance's share of [`AHEAD_SLOTS`], counted as waiting until a
/// call takes it (or it is dropped).
struct Held {
    _slot: OwnedSemaphorePermit,
    waiting: Arc<AtomicU64>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One component's instance made ahead, if any.
#[derive(Default)]
pub(in crate::runtime) struct Ahead {
    made: Mutex<Option<Made>>,
    /// An instance is being made.
    making: AtomicBool,
    /// Instantiating the component runs guest code: never made ahead.
    off: AtomicBool,
    /// The deny-all policy its instances are made under, built once.
    idle: Mutex<Option<Arc<CallPolicy>>>,
}

impl Ahead {
    /// The instance made ahead, when it was made under `memory` (bytes).
    pub fn take(&self, memory: u64) -> Option<Made> {
        let made = self.lock().take()?;
        (made.memory == memory).then_some(made)
    }

    /// Starts making one, unless one is kept or under way, or the component
    /// is never made ahead.
    fn begin(self: &Arc<Self>) -> Option<Begun> {
        let free = !self.off.load(Ordering::Relaxed) && self.lock().is_none();
        (free && !self.making.swap(true, Ordering::AcqRel)).then(|| Begun(self.clone()))
    }

    /// The deny-all policy allowing `memory`, kept for the next making.
    fn idle_policy(&self, memory: ByteSize) -> Option<Arc<CallPolicy>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(policy) = idle.as_ref().filter(|policy| policy.memory == memory) {
            return Some(policy.clone());
        }
        let policy = Policy {
            memory,
            ..Policy::default()
        };
        let policy = Arc::new(CallPolicy::new(policy.validate().ok()?.resolve().ok()?));
        *idle = Some(policy.clone());
        Some(policy)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Made>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An instance being made; another can be begun once this is dropped.
struct Begun(Arc<Ahead>);

impl Begun {
    /// Keeps `made`, or, when making it ran guest code, never makes one for
    /// this component again.
    fn end(self, made: Option<Made>, ran_code: bool) {
        if ran_code {
            self.0.off.store(true, Ordering::Relaxed);
        } else if let Some(made) = made {
            *self.0.lock() = Some(made);
        }
    }
}

impl Drop for Begun {
    fn drop(&mut self) {
        self.0.making.store(false, Ordering::Release);
    }
}

/// What making one instance takes, owned by the task that makes it.
struct Making {
    engine: wasmtime::Engine,
    linked: Instantiable,
    /// The deny-all policy it is made under (the call's memory limit).
    idle: Arc<CallPolicy>,
    waiting: Arc<AtomicU64>,
}

impl Sandbox {
    /// Making an instance of `component` for its next call (`policy`'s), to
    /// run off the call's path; `None` when it has one or one is under way,
    /// or the host has no room for one.
    pub(in crate::runtime) fn make_ahead(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let begun = component.ahead.begin()?;
        let slot = self.ahead.slots.clone().try_acquire_owned().ok()?;
        let making = Making {
            engine: self.engine.clone(),
            linked: component.linked.clone(),
            idle: component.ahead.idle_policy(policy.memory)?,
            waiting: self.ahead.waiting.clone(),
        };
        Some(async move {
            let (made, ran_code) = making.make(slot).await;
            begun.end(made, ran_code);
        })
    }
}

impl Making {
    /// An instance in a store with no capabilities, and whether making it
    /// called into the host or burned all its fuel (a start function ran
    /// that would have behaved otherwise in a call).
    async fn make(self, slot: OwnedSemaphorePermit) -> (Option<Made>, bool) {
        let Some(mut store) = idle_store(&self.engine, &self.idle) else {
            return (None, false);
        };
        let instantiated = self.linked.instantiate(&mut store).await;
        let left = store.get_fuel().unwrap_or(0);
        let called_host = matches!(store.data().serving, Serving::Ahead { called_host: true });
        if called_host || left == 0 {
            return (None, true);
        }
        let Ok(guest) = instantiated else {
            return (None, false);
        };
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let made = Made {
            store,
            guest,
            burned: PROBE_FUEL - left,
            memory: self.idle.memory.bytes(),
            _held: Held {
                _slot: slot,
                waiting: self.waiting,
            },
        };
        (Some(made), false)
    }
}

/// A store for an instance made ahead: no folders, network, environment,
/// resources or host handles, its call cancelled and past its deadline,
/// [`PROBE_FUEL`] to burn, `policy`'s memory at most, and no call into the
/// host.
fn idle_store(engine: &wasmtime::Engine, policy: &CallPolicy) -> Option<Store<CallState>> {
    let context = CallContext::default();
    context.cancellation.cancel();
    let nobody = CallId {
        tool: Arc::from(""),
        call_id: Arc::from(""),
    };
    let scope = CallScope {
        call: nobody,
        session_id: String::new(),
        state_scope: Arc::from(""),
        context: &context,
    };
    let host = HostImports::new(
        scope,
        policy,
        Arc::default(),
        Arc::new(InMemorySessionStore::default()),
        // Nobody listens, and the call taking the store brings its own.
        EventBus::new(1),
    )
    .within(Duration::ZERO);
    let denials = Denials::new(Arc::default());
    let parts = (&Asks::default(), &denials);
    let (state, _, _) = call_state(policy, host, parts, &[], (0, Turns::new(1).for_call())).ok()?;
    let mut store = new_store(engine, state, policy).ok()?;
    store.set_fuel(PROBE_FUEL).ok()?;
    // Bounded by its fuel; an epoch tick (the deadline callback is a call
    // into the host) must not count as the guest calling it.
    store.set_epoch_deadline(u64::from(u32::MAX));
    store.data_mut().serving = Serving::Ahead { called_host: false };
    // Refuses (and records) any call into the host while the store is
    // idle; a call's own state serves its calls.
    store.call_hook(|mut store, hook| {
        let serving = &mut store.data_mut().serving;
        match (hook, *serving) {
            (CallHook::CallingHost, Serving::Ahead { .. }) => {
                *serving = Serving::Ahead { called_host: true };
                Err(wasmtime::Error::msg(
                    "an instance made ahead called the host",
                ))
            }
            _ => Ok(()),
        }
    });
    Some(store)
}
