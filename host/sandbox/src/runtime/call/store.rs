//! The data of one call's store: the WASI and wasi:http contexts, the
//! resource table, limits, and the `host` imports.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use crate::runtime::denials::Denials;
use crate::runtime::http::OutgoingHttp;
use crate::runtime::imports::HostImports;
use crate::runtime::limits::CallLimiter;
use crate::runtime::scratch::Scratch;
use crate::runtime::turns::CallTurn;
use crate::runtime::writes::WriteBudget;

/// Everything a call's store holds.
pub struct CallState {
    pub(in crate::runtime) wasi: WasiCtx,
    pub(in crate::runtime) table: ResourceTable,
    pub(in crate::runtime) limiter: CallLimiter,
    pub(in crate::runtime) host: HostImports,
    pub(in crate::runtime) http: OutgoingHttp,
    /// What the call may still write into its read-write folders.
    pub(in crate::runtime) writes: WriteBudget,
    /// What the sandbox refused during the call.
    pub(in crate::runtime) denials: Denials,
    /// Its place among long calls taking turns on the cores.
    pub(in crate::runtime) turn: CallTurn,
    /// Whether it serves a call, or holds an instance made ahead of one.
    pub(in crate::runtime) serving: Serving,
    /// Its scratch folder, when the policy grants one (last, so that it is
    /// removed after the files open in it are closed).
    pub(in crate::runtime) _scratch: Scratch,
}

/// What a store's state is for (see `call::ahead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::runtime) enum Serving {
    /// A call: its guest may use what the call grants.
    Call,
    /// An instance being made ahead of a call, with no capabilities;
    /// `called_host`: its instantiation called into the host (and was
    /// refused), so it would have behaved otherwise in a call.
    Ahead { called_host: bool },
}

impl CallState {
    /// Makes a kept store this call's: its imports, turn, write budget and
    /// request count start afresh; memory, instance and open resources stay.
    pub(in crate::runtime) fn renew(
        &mut self,
        host: HostImports,
        turn: CallTurn,
        policy: &crate::runtime::CallPolicy,
    ) {
        self.http.renew(host.deadline.clone(), host.asks(policy));
        self.host = host;
        self.turn = turn;
        self.writes = WriteBudget::new(*policy.capabilities.writes(), self.denials.clone());
        self.limiter.forget_refusal();
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut self.http.hooks,
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
