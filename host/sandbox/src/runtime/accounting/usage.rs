//! What one guest run used (fuel, memory) and did (refusals, network
//! requests), handed to the call's auditor however the run ended.

use std::sync::{Arc, Mutex, PoisonError};

use crate::runtime::denials::CallActivity;

/// What one call used and did in the sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallUsage {
    /// Fuel (roughly, instructions) the guest used.
    pub fuel_used: u64,
    /// The most linear memory the call's store held at once, in bytes.
    pub peak_memory: u64,
    /// Its refusals and network requests.
    pub activity: CallActivity,
}

/// Where a run leaves its [`CallUsage`] (set on its imports only when
/// someone will read it, so an unaudited call pays nothing).
#[derive(Clone, Debug, Default)]
pub struct UsageSink(Arc<Mutex<Option<CallUsage>>>);

impl UsageSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of what the run left, if it got as far as a store.
    pub fn get(&self) -> Option<CallUsage> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the run left, if it got as far as a store.
    pub fn take(&self) -> Option<CallUsage> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    pub(in crate::runtime) fn put(&self, usage: CallUsage) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(usage);
    }
}
