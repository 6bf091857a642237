//! What the sandbox refused during one call (network, files, delegation):
//! logged up to a cap and kept for the call's error message.

use std::sync::{Arc, Mutex, PoisonError};

/// Refusals of one call that are logged and kept.
const MAX_DENIALS: usize = 16;

/// What the sandbox refused during one call, for the error message.
#[derive(Clone, Debug, Default)]
pub struct Denials(Arc<Mutex<Vec<Denial>>>);

/// One refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// What the tool tried (`GET http://x:80/`, `connect to tcp 1.2.3.4:5`).
    pub attempt: String,
    /// Why it was refused, and what would allow it.
    pub reason: String,
}

impl Denials {
    /// Records a refusal (the first few are kept).
    pub fn record(&self, attempt: String, reason: String) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Logged and kept up to a cap, so a tool retrying in a loop cannot
        // flood the host's log.
        match list.len() {
            n if n < MAX_DENIALS => {
                tracing::info!(target: "wasm_agent::sandbox", "denied: {attempt}: {reason}");
                list.push(Denial { attempt, reason });
            }
            n if n == MAX_DENIALS => {
                tracing::info!(target: "wasm_agent::sandbox", "further denials of this call are not logged");
                list.push(Denial { attempt, reason });
            }
            _ => {}
        }
    }

    /// The first refusal, if any.
    pub fn first(&self) -> Option<Denial> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first()
            .cloned()
    }
}
