//! Admission: a call draws on its root request's budget (so no request fans
//! out into unbounded work), and a tenant's calls in flight are bounded (so
//! no tenant takes every call slot). Calls a tool makes run in its slot:
//! they count against the request's budget, not again against the tenant's
//! calls in flight; calls of a delegated run take slots of their own, and
//! count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// Admits calls under the request budget and the tenant bound.
pub(crate) struct Admit {
    /// The most calls one tenant may have in flight (`None`: no bound).
    pub(crate) per_tenant: Option<usize>,
    pub(crate) in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

#[async_trait::async_trait]
impl Layer for Admit {
    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let own_slot = call.context.tool_call_depth() == 0;
        let _held = match (&call.context.tenant_id, self.per_tenant) {
            (Some(tenant), Some(limit)) if own_slot => match self.hold(tenant, limit) {
                Some(held) => Some(held),
                None => {
                    let error = CallError::new(
                        ErrorKind::RateLimited,
                        format!(
                            "tenant {tenant:?} has {limit} calls in flight, as many as one \
                             tenant may (--max-tenant-calls); try again when one ends"
                        ),
                    );
                    return Called::refused(call, error);
                }
            },
            _ => None,
        };
        // Charged once admitted: a call refused above spent nothing.
        if let Err(reason) = call.context.request_budget().take_call() {
            return Called::refused(call, CallError::new(ErrorKind::CapabilityDenied, reason));
        }
        next.run(call).await
    }
}

impl Admit {
    fn hold(&self, tenant: &str, limit: usize) -> Option<Held> {
        let mut in_flight = self.in_flight.lock().expect("not poisoned");
        let count = in_flight.entry(tenant.to_string()).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(Held {
            tenant: tenant.to_string(),
            in_flight: self.in_flight.clone(),
        })
    }
}

/// One of a tenant's calls in flight, given back when dropped.
struct Held {
    tenant: String,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().expect("not poisoned");
        if let Some(count) = in_flight.get_mut(&self.tenant) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.tenant);
            }
        }
    }
}
