//! The data of one call's store: the WASI and wasi:http contexts, the
//! resource table, limits, and the `host` imports.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::denials::Denials;
use super::http::PolicyHooks;
use super::imports::HostImports;
use super::limits::CallLimiter;
use super::scratch::Scratch;
use super::turns::CallTurn;
use super::writes::WriteBudget;

/// Everything a call's store holds.
pub struct CallState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: CallLimiter,
    pub(super) host: HostImports,
    pub(super) http: WasiHttpCtx,
    pub(super) http_hooks: PolicyHooks,
    /// What the call may still write into its read-write folders.
    pub(super) writes: WriteBudget,
    /// What the sandbox refused during the call.
    pub(super) denials: Denials,
    /// Its place among long calls taking turns on the cores.
    pub(super) turn: CallTurn,
    /// Its scratch folder, when the policy grants one (last, so that it is
    /// removed after the files open in it are closed).
    pub(super) _scratch: Option<Scratch>,
}

impl CallState {
    /// Makes a kept store this call's: its imports, turn, write budget and
    /// request count start afresh; memory, instance and open resources stay.
    pub(super) fn renew(&mut self, host: HostImports, turn: CallTurn, policy: &super::CallPolicy) {
        self.http_hooks.deadline = host.deadline.clone();
        self.http_hooks.asks.begin(host.asks(policy));
        self.http_hooks.sent = 0;
        self.host = host;
        self.turn = turn;
        self.writes = WriteBudget::new(policy.max_write, self.denials.clone());
        self.limiter.forget_refusal();
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
