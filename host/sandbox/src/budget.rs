//! What one root request may cause: every call and every delegated run made
//! on its behalf, by tools calling tools, by agents handing work on, and by
//! their runs in turn, draws on one budget, so no request fans out into
//! unbounded work.

use std::sync::atomic::{AtomicU32, Ordering};

/// Calls one root request may make, by default (its own included).
pub const DEFAULT_REQUEST_CALLS: u32 = 1000;
/// Delegated runs one root request may make, by default.
pub const DEFAULT_REQUEST_RUNS: u32 = 32;

/// The budget of one root request, shared by every context made from its
/// own ([`CallContext::child`](crate::context::CallContext::child) and the
/// like); a fresh context has a fresh one.
#[derive(Debug)]
pub struct RequestBudget {
    calls: Counter,
    runs: Counter,
}

#[derive(Debug)]
struct Counter {
    spent: AtomicU32,
    limit: u32,
}

impl Counter {
    fn new(limit: u32) -> Self {
        Self {
            spent: AtomicU32::new(0),
            limit,
        }
    }

    fn take(&self) -> bool {
        self.spent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |spent| {
                (spent < self.limit).then_some(spent + 1)
            })
            .is_ok()
    }
}

impl Default for RequestBudget {
    fn default() -> Self {
        Self::new(DEFAULT_REQUEST_CALLS, DEFAULT_REQUEST_RUNS)
    }
}

impl RequestBudget {
    /// A budget of `calls` calls and `runs` delegated runs.
    pub fn new(calls: u32, runs: u32) -> Self {
        Self {
            calls: Counter::new(calls),
            runs: Counter::new(runs),
        }
    }

    /// Takes one call; `Err` names the budget when it is spent.
    pub fn take_call(&self) -> Result<(), String> {
        if self.calls.take() {
            Ok(())
        } else {
            Err(format!(
                "this request has used its budget of {} tool calls (every call made for one \
                 request counts, by tools and delegated agents too)",
                self.calls.limit
            ))
        }
    }

    /// Takes one delegated run; `Err` names the budget when it is spent.
    pub fn take_run(&self) -> Result<(), String> {
        if self.runs.take() {
            Ok(())
        } else {
            Err(format!(
                "this request has used its budget of {} delegated runs",
                self.runs.limit
            ))
        }
    }

    /// Calls and runs taken so far.
    pub fn spent(&self) -> (u32, u32) {
        (
            self.calls.spent.load(Ordering::Acquire),
            self.runs.spent.load(Ordering::Acquire),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_gives_what_it_holds_and_then_says_why_not() {
        let budget = RequestBudget::new(2, 1);
        assert!(budget.take_call().is_ok() && budget.take_call().is_ok());
        let refused = budget.take_call().unwrap_err();
        assert!(refused.contains("budget of 2 tool calls"), "{refused}");
        assert!(budget.take_run().is_ok());
        assert!(
            budget
                .take_run()
                .unwrap_err()
                .contains("budget of 1 delegated runs")
        );
        assert_eq!(budget.spent(), (2, 1));
    }
}
