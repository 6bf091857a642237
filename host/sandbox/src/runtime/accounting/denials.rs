//! What the sandbox refused during one call (network, files, delegation):
//! logged up to a cap and kept for the call's error message and its audit
//! record, with the network requests it let through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::ask::Asked;

/// Refusals of one call that are logged and kept.
const MAX_DENIALS: usize = 16;

/// Network requests of one call kept for its audit record (the rest counted).
const MAX_REQUESTS: usize = 64;

/// Questions of one call kept for its audit record (calls ask few; see `asks`).
const MAX_ASKED: usize = 16;

/// What kind of attempt the sandbox refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DenialKind {
    /// A connection or HTTP request to a destination no grant allows.
    Network,
    /// An HTTP request past the call's `max_requests`.
    MaxRequests,
    /// Listening on or binding a socket (never allowed).
    Listen,
    /// A call of another tool no `call_tools` grant allows.
    CallTool,
    /// A delegation to an agent no grant allows.
    Delegate,
    /// A file write past the call's `max_write`.
    MaxWrite,
    /// A folder the policy asks about, not allowed for the call.
    Folder,
}

impl DenialKind {
    /// Every kind.
    pub const ALL: [DenialKind; 7] = [
        DenialKind::Network,
        DenialKind::MaxRequests,
        DenialKind::Listen,
        DenialKind::CallTool,
        DenialKind::Delegate,
        DenialKind::MaxWrite,
        DenialKind::Folder,
    ];

    /// Its name in metrics and logs (`network`, `max_requests`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DenialKind::Network => "network",
            DenialKind::MaxRequests => "max_requests",
            DenialKind::Listen => "listen",
            DenialKind::CallTool => "call_tool",
            DenialKind::Delegate => "delegate",
            DenialKind::MaxWrite => "max_write",
            DenialKind::Folder => "folder",
        }
    }
}

/// Refusals of every call of one host, counted by kind.
#[derive(Debug, Default)]
pub struct DenialTotals([AtomicU64; DenialKind::ALL.len()]);

impl DenialTotals {
    /// Every kind with its count so far.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        DenialKind::ALL
            .iter()
            .zip(&self.0)
            .map(|(kind, count)| (kind.as_str(), count.load(Ordering::Relaxed)))
            .collect()
    }

    fn add(&self, kind: DenialKind) {
        let index = DenialKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.0[index].fetch_add(1, Ordering::Relaxed);
    }
}

/// What the sandbox refused during one call, for the error message, and
/// counted in its host's totals.
#[derive(Clone, Debug, Default)]
pub struct Denials(Arc<Mutex<Kept>>, Arc<DenialTotals>);

/// The refusals and requests kept, and how many more came than were kept.
#[derive(Debug, Default)]
struct Kept {
    first: Vec<Denial>,
    more: bool,
    requests: Vec<NetRequest>,
    more_requests: u64,
    asked: Vec<Asked>,
}

/// One outgoing network request (an HTTP request or a socket connection)
/// and whether the sandbox let it through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetRequest {
    /// What the tool tried (`GET http://x:80/`, `connect to tcp 1.2.3.4:5`).
    pub attempt: String,
    /// Whether it was allowed.
    pub allowed: bool,
}

/// Everything one call was refused and every network request it made, as
/// kept (the first few of each; `more_*` count the rest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallActivity {
    /// The refusals, in order.
    pub denials: Vec<Denial>,
    /// Whether there were more refusals than kept.
    pub more_denials: bool,
    /// The network requests, allowed or not, in order.
    pub requests: Vec<NetRequest>,
    /// How many more requests were made than kept.
    pub more_requests: u64,
    /// The questions asked about the policy's `ask` grants, with their answers.
    pub asked: Vec<Asked>,
}

impl CallActivity {
    /// Adds what a later run of the same call did (a script's next segment).
    pub fn extend(&mut self, later: CallActivity) {
        self.denials.extend(later.denials);
        self.more_denials |= later.more_denials;
        self.requests.extend(later.requests);
        self.more_requests += later.more_requests;
        self.asked.extend(later.asked);
    }
}

/// One refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// What the tool tried (`GET http://x:80/`, `connect to tcp 1.2.3.4:5`).
    pub attempt: String,
    /// Why it was refused, and what would allow it.
    pub reason: String,
    /// What kind of attempt it was.
    pub kind: DenialKind,
}

impl Denials {
    /// A call's record, counting into `totals`.
    pub fn new(totals: Arc<DenialTotals>) -> Self {
        Self(Arc::default(), totals)
    }

    /// Records a refusal (every one counted, the first few kept).
    pub fn record(&self, kind: DenialKind, attempt: String, reason: String) {
        self.1.add(kind);
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(kind, DenialKind::Network | DenialKind::MaxRequests) {
            kept.request(&attempt, false);
        }
        // Logged and kept up to a cap, so a tool retrying in a loop cannot
        // flood the host's log.
        if kept.first.len() < MAX_DENIALS {
            tracing::info!(target: "wasm_agent::sandbox", "denied: {attempt}: {reason}");
            kept.first.push(Denial {
                attempt,
                reason,
                kind,
            });
        } else if !kept.more {
            kept.more = true;
            tracing::info!(target: "wasm_agent::sandbox", "further denials of this call are not logged");
        }
    }

    /// Records a network request the sandbox let through.
    pub fn allowed(&self, attempt: &str) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.request(attempt, true);
    }

    /// Records a question about an `ask` grant and its answer.
    pub fn asked(&self, asked: Asked) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.asked.len() < MAX_ASKED {
            kept.asked.push(asked);
        }
    }

    /// Forgets every refusal and request (a kept instance's next call
    /// starts clean).
    pub fn clear(&self) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *kept = Kept::default();
    }

    /// What this call was refused and the requests it made, so far.
    pub fn activity(&self) -> CallActivity {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        CallActivity {
            denials: kept.first.clone(),
            more_denials: kept.more,
            requests: kept.requests.clone(),
            more_requests: kept.more_requests,
            asked: kept.asked.clone(),
        }
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

impl Kept {
    fn request(&mut self, attempt: &str, allowed: bool) {
        if self.requests.len() < MAX_REQUESTS {
            self.requests.push(NetRequest {
                attempt: attempt.to_string(),
                allowed,
            });
        } else {
            self.more_requests += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_refusals_only() {
        let totals = Arc::new(DenialTotals::default());
        let denials = Denials::new(totals.clone());
        for i in 0..100 {
            denials.record(
                DenialKind::Network,
                format!("attempt {i}"),
                "no grant".into(),
            );
        }
        denials.record(DenialKind::MaxWrite, "write".into(), "over".into());
        assert_eq!(totals.counts()[0], ("network", 100));
        assert_eq!(totals.counts()[5], ("max_write", 1));
        let kept = denials.0.lock().unwrap();
        assert_eq!(kept.first.len(), MAX_DENIALS);
        assert!(kept.more);
        drop(kept);
        assert_eq!(denials.first().unwrap().attempt, "attempt 0");
        let activity = denials.activity();
        assert_eq!(activity.requests.len(), MAX_REQUESTS);
        assert_eq!(activity.more_requests, 100 - MAX_REQUESTS as u64);
        assert!(activity.requests.iter().all(|r| !r.allowed));
        assert_eq!(activity.denials[0].kind, DenialKind::Network);
    }

    #[test]
    fn keeps_allowed_requests_beside_denied_ones_until_cleared() {
        let denials = Denials::new(Arc::default());
        denials.allowed("GET http://a/");
        denials.record(DenialKind::Network, "GET http://b/".into(), "no".into());
        denials.record(DenialKind::MaxWrite, "write".into(), "over".into());
        let activity = denials.activity();
        let requests: Vec<_> = activity
            .requests
            .iter()
            .map(|r| (r.attempt.as_str(), r.allowed))
            .collect();
        assert_eq!(
            requests,
            [("GET http://a/", true), ("GET http://b/", false)]
        );
        assert_eq!(activity.denials.len(), 2);
        denials.clear();
        assert_eq!(denials.activity(), CallActivity::default());
    }
}
