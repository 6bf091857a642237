//! Kept instances (`keep_instance`): a tool's instance outlives its call and
//! serves the next call of the same session, so what it holds in memory (an
//! interpreter's variables) persists, like a notebook's.
//!
//! Bounded on every side: one call of a session at a time (the next waits,
//! within its own deadline); a kept instance stays within the policy's
//! memory limit, is dropped after `kept_idle` unused and whenever a call of
//! it ends in a trap, a timeout or a cancellation; the host keeps at most
//! [`KeptBudget::max`] instances in all (the least recently used idle one
//! of the component makes room, else the call's instance is not kept).
//! Sessions never share one: the key is the tenant, the user and the
//! session id, and a reloaded component starts with none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;
use wasmtime::Store;

use crate::context::CallContext;
use crate::runtime::Guest;
use crate::runtime::denials::Denials;
use crate::runtime::output::CappedOutput;
use crate::runtime::store::CallState;

/// Whose instance: a session of a user of a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey {
    tenant: Option<String>,
    user: Option<String>,
    session: String,
}

impl SessionKey {
    /// The session `context` belongs to.
    pub fn of(context: &CallContext) -> Self {
        Self {
            tenant: context.tenant_id.clone(),
            user: context.user_id.clone(),
            session: context.session_id.clone(),
        }
    }
}

/// How many instances the whole host may keep.
#[derive(Debug)]
pub struct KeptBudget {
    max: u32,
    held: AtomicU32,
}

impl KeptBudget {
    /// A budget of `max` kept instances.
    pub fn new(max: u32) -> Arc<Self> {
        Arc::new(Self {
            max,
            held: AtomicU32::new(0),
        })
    }

    fn acquire(self: &Arc<Self>) -> Option<BudgetToken> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < self.max).then_some(held + 1)
            })
            .ok()
            .map(|_| BudgetToken(self.clone()))
    }
}

/// One kept instance's share of the budget, given back on drop.
struct BudgetToken(Arc<KeptBudget>);

impl Drop for BudgetToken {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A store and instance between calls, holding its share of the budget.
pub(in crate::runtime) struct Kept {
    pub parts: KeptParts,
    _share: BudgetToken,
}

/// A session's place: its kept instance, if any, behind a lock that one
/// call holds at a time.
struct Slot {
    kept: Arc<tokio::sync::Mutex<Option<Kept>>>,
    last_used: Mutex<Instant>,
}

/// The kept instances of one loaded component.
pub struct KeptInstances {
    sessions: Mutex<HashMap<SessionKey, Arc<Slot>>>,
    idle: Duration,
    budget: Arc<KeptBudget>,
}

impl KeptInstances {
    /// Instances dropped after `idle` unused, counted against `budget`; a
    /// background task drops idle ones while the set lives.
    pub fn new(idle: Duration, budget: Arc<KeptBudget>) -> Arc<Self> {
        let kept = Arc::new(Self {
            sessions: Mutex::default(),
            idle,
            budget,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep_while_alive(Arc::downgrade(&kept), idle));
        }
        kept
    }

    /// Waits until no other call of `key` runs, then holds its place.
    pub(in crate::runtime) async fn enter(&self, key: &SessionKey) -> Turn {
        self.sweep();
        let slot = self
            .lock_sessions()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    kept: Arc::default(),
                    last_used: Mutex::new(Instant::now()),
                })
            })
            .clone();
        let guard = slot.kept.clone().lock_owned().await;
        Turn { guard, slot }
    }

    /// Keeps `store` for the session of `turn`, when the budget has room
    /// (made by dropping this component's least recently used idle instance
    /// if need be); otherwise it is dropped.
    pub(in crate::runtime) fn keep(&self, turn: &mut Turn, parts: KeptParts) {
        let share = self.budget.acquire().or_else(|| {
            self.drop_least_recent();
            self.budget.acquire()
        });
        let Some(share) = share else {
            tracing::warn!(
                max = self.budget.max,
                "every kept instance is in use; this call's instance is not kept"
            );
            return;
        };
        *turn.guard = Some(Kept {
            parts,
            _share: share,
        });
        *turn
            .slot
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Drops idle instances and the places of sessions that hold none.
    fn sweep(&self) {
        let now = Instant::now();
        self.lock_sessions().retain(|_, slot| {
            let Ok(mut kept) = slot.kept.try_lock() else {
                return true; // a call is using it
            };
            if kept.is_some() && now.duration_since(slot.last_used()) >= self.idle {
                *kept = None;
            }
            kept.is_some()
        });
    }

    fn drop_least_recent(&self) {
        let sessions = self.lock_sessions();
        let oldest = sessions
            .values()
            .filter_map(|slot| {
                let kept = slot.kept.try_lock().ok()?;
                kept.is_some().then(|| (slot.last_used(), slot.clone()))
            })
            .min_by_key(|(used, _)| *used);
        drop(sessions);
        if let Some((_, slot)) = oldest
            && let Ok(mut kept) = slot.kept.try_lock()
        {
            *kept = None;
        }
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Arc<Slot>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A call's store and instance, with the handles its WASI context writes
/// through.
pub(in crate::runtime) struct KeptParts {
    pub store: Store<CallState>,
    pub guest: Guest,
    pub stdout: CappedOutput,
    pub stderr: CappedOutput,
    pub denials: Denials,
}

/// One call's hold on its session.
pub(in crate::runtime) struct Turn {
    guard: OwnedMutexGuard<Option<Kept>>,
    slot: Arc<Slot>,
}

impl Turn {
    /// The session's kept instance, taken for this call.
    pub fn take(&mut self) -> Option<Kept> {
        self.guard.take()
    }
}

async fn sweep_while_alive(kept: Weak<KeptInstances>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        match kept.upgrade() {
            Some(kept) => kept.sweep(),
            None => return,
        }
    }
}
