//! What the sandbox refused during one call (network, files, delegation):
//! logged up to a cap and kept for the call's error message.

use std::sync::{Arc, Mutex, PoisonError};

/// Refusals of one call that are logged and kept.
const MAX_DENIALS: usize = 16;

/// What the sandbox refused during one call, for the error message.
#[derive(Clone, Debug, Default)]
pub struct Denials(Arc<Mutex<Kept>>);

/// The refusals kept, and whether more came than were kept.
#[derive(Debug, Default)]
struct Kept {
    first: Vec<Denial>,
    more: bool,
}

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
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Logged and kept up to a cap, so a tool retrying in a loop cannot
        // flood the host's log.
        if kept.first.len() < MAX_DENIALS {
            tracing::info!(target: "wasm_agent::sandbox", "denied: {attempt}: {reason}");
            kept.first.push(Denial { attempt, reason });
        } else if !kept.more {
            kept.more = true;
            tracing::info!(target: "wasm_agent::sandbox", "further denials of this call are not logged");
        }
    }

    /// Forgets every refusal (a kept instance's next call starts clean).
    pub fn clear(&self) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.first.clear();
        kept.more = false;
    }

    /// The first refusal, if any.
    pub fn first(&self) -> Option<Denial> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first
            .first()
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_refusals_only() {
        let denials = Denials::default();
        for i in 0..100 {
            denials.record(format!("attempt {i}"), "no grant".into());
        }
        let kept = denials.0.lock().unwrap();
        assert_eq!(kept.first.len(), MAX_DENIALS);
        assert!(kept.more);
        drop(kept);
        assert_eq!(denials.first().unwrap().attempt, "attempt 0");
    }
}
