//! Metrics per tenant: its calls by outcome, its refusals by reason, the
//! fuel its calls burned, and quota checks answered per replica.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use wasm_agent_access::quota::TenantObserver;

use super::{MAX_TENANTS, Metrics, TenantCallLabels, TenantLabel, TenantRefusalLabels};

/// The label of tenants past the first [`MAX_TENANTS`].
const OTHER_TENANT: &str = "(other)";

pub(crate) struct TenantMetrics {
    calls: Family<TenantCallLabels, Counter>,
    refusals: Family<TenantRefusalLabels, Counter>,
    fuel: Family<TenantLabel, Counter>,
    fallbacks: Counter,
    named: Mutex<HashSet<String>>,
}

impl TenantMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let this = Self {
            calls: Family::default(),
            refusals: Family::default(),
            fuel: Family::default(),
            fallbacks: Counter::default(),
            named: Mutex::new(HashSet::new()),
        };
        registry.register(
            "wasm_agent_tenant_calls",
            "Calls each tenant made, by outcome (ok or the error kind)",
            this.calls.clone(),
        );
        registry.register(
            "wasm_agent_tenant_refusals",
            "Calls of each tenant refused by access rules or a quota, by reason",
            this.refusals.clone(),
        );
        registry.register(
            "wasm_agent_tenant_fuel",
            "Fuel the calls of each tenant burned",
            this.fuel.clone(),
        );
        registry.register(
            "wasm_agent_quota_fallbacks",
            "Quota checks answered from this replica's memory because the shared quota store \
             could not be reached",
            this.fallbacks.clone(),
        );
        this
    }

    /// `tenant`, or `(other)` once as many tenants are named as may be.
    fn label(&self, tenant: &str) -> String {
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        if named.contains(tenant) {
            return tenant.to_string();
        }
        if named.len() < MAX_TENANTS {
            named.insert(tenant.to_string());
            return tenant.to_string();
        }
        OTHER_TENANT.to_string()
    }
}

impl TenantObserver for Metrics {
    fn call_ended(&self, tenant: &str, outcome: &'static str, fuel: u64) {
        let tenant = self.tenants.label(tenant);
        let calls = TenantCallLabels {
            tenant: tenant.clone(),
            outcome,
        };
        self.tenants.calls.get_or_create(&calls).inc();
        self.tenants
            .fuel
            .get_or_create(&TenantLabel { tenant })
            .inc_by(fuel);
    }

    fn refused(&self, tenant: &str, reason: &'static str) {
        let tenant = self.tenants.label(tenant);
        let labels = TenantRefusalLabels { tenant, reason };
        self.tenants.refusals.get_or_create(&labels).inc();
    }

    fn fell_back(&self) {
        self.tenants.fallbacks.inc();
    }
}
