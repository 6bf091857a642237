//! What a call reaches through whoever runs it (another agent with
//! `delegate`, other tools with `tool_calls`): granted by name in the policy,
//! provided by the entry point, and bounded in number per call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::context::CallContext;
use crate::runtime::imports::CallId;

/// One call's grant of a service its entry point provides.
pub struct Reach<T: ?Sized> {
    pub(super) call: CallId,
    /// Names (or `*` patterns) the policy grants.
    pub(super) allowed: Vec<String>,
    /// The provider and the calling call's context; `None` when there is no
    /// provider or the policy grants nothing.
    pub(super) through: Option<(Arc<T>, CallContext)>,
    made: AtomicU32,
}

impl<T: ?Sized> Reach<T> {
    /// `call` may use what `allowed` names, through `provider` (if any).
    pub fn new(
        call: CallId,
        allowed: Vec<String>,
        provider: Option<&Arc<T>>,
        context: &CallContext,
    ) -> Self {
        let through = provider
            .filter(|_| !allowed.is_empty())
            .map(|provider| (provider.clone(), context.clone()));
        Self {
            call,
            allowed,
            through,
            made: AtomicU32::new(0),
        }
    }

    /// Uses counted so far.
    pub fn uses(&self) -> u32 {
        self.made.load(Ordering::Relaxed)
    }

    /// Counts `uses` made before (by the earlier run of a script resumed).
    pub fn resume_count(&self, uses: u32) {
        self.made.store(uses, Ordering::Relaxed);
    }

    /// Counts one more use if it is within `max`; whether it was.
    pub(super) fn one_more(&self, max: u32) -> bool {
        self.made
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |made| {
                (made < max).then_some(made + 1)
            })
            .is_ok()
    }
}
