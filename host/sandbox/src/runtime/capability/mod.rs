//! What a tool can reach beyond its own memory, one module per capability,
//! each granted only by the call's validated policy: folders, environment,
//! output and sockets (`wasi`), outgoing HTTP (`http`, under `net`'s grants
//! and address classes), the bytes a call may write (`writes`), a scratch
//! folder (`scratch`); and the `wasm-agent:tool/host` imports, session state
//! (`session_state`), logs and events (`log`, `emit`), other agents
//! (`delegate`) and other tools (`tool_calls`), both a `reach` through the
//! entry point, which the host builds per call from the call's scope
//! (`call::imports`).
//!
//! Every policy-granted capability has the same lifecycle ([`Capability`],
//! as Spin's factors have one): linked once per engine, configured once per
//! component from its validated policy, prepared once per call's store.
//! [`Capabilities`] lists them, in the order they depend on each other.

pub(in crate::runtime) mod delegate;
pub(in crate::runtime) mod emit;
pub(in crate::runtime) mod http;
pub(in crate::runtime) mod log;
pub(in crate::runtime) mod net;
pub(in crate::runtime) mod reach;
pub(in crate::runtime) mod scratch;
pub(in crate::runtime) mod session_state;
pub(in crate::runtime) mod tool_calls;
pub(in crate::runtime) mod wasi;
pub(in crate::runtime) mod writes;

use std::sync::Arc;

use wasm_agent_policy::{DirGrant, ValidPolicy};
use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtx;

use crate::result::CallError;
use crate::runtime::asks::Asks;
use crate::runtime::deadline::CallDeadline;
use crate::runtime::denials::Denials;
use crate::runtime::output::CappedOutput;
use crate::runtime::store::CallState;
use http::OutgoingHttp;
use scratch::Scratch;
use writes::WriteBudget;

/// One host capability a policy grants, as one call's store holds it.
pub(in crate::runtime) trait Capability: Sized {
    /// What it keeps of the validated policy.
    type Config: Send + Sync + 'static;

    /// Adds (or wraps) its imports in the engine's linker; once per engine.
    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()>;

    /// Its configuration, from the validated policy; once per component.
    fn configure(policy: &Arc<ValidPolicy>) -> Self::Config;

    /// Its state in one call's store: exactly what `config` grants.
    fn prepare(config: &Self::Config, call: &Preparing<'_>) -> Result<Self, CallError>;
}

/// What every capability's [`Capability::prepare`] sees of the call.
pub(in crate::runtime) struct Preparing<'a> {
    /// Where refusals are recorded.
    pub denials: &'a Denials,
    /// The call's `ask` grants and their answers.
    pub asks: &'a Asks,
    /// The call's deadline.
    pub deadline: &'a CallDeadline,
    /// Where its stdout and stderr go.
    pub output: &'a (CappedOutput, CappedOutput),
    /// Folders granted by the person before the call started.
    pub asked_folders: &'a [DirGrant],
    /// Its scratch folder (prepared first: the WASI context opens it).
    pub scratch: Option<&'a Scratch>,
}

/// Every capability's configuration for one component.
pub(in crate::runtime) struct Capabilities {
    scratch: <Scratch as Capability>::Config,
    wasi: <WasiCtx as Capability>::Config,
    http: <OutgoingHttp as Capability>::Config,
    writes: <WriteBudget as Capability>::Config,
}

/// Every capability's state in one call's store.
pub(in crate::runtime) struct Prepared {
    pub scratch: Scratch,
    pub wasi: WasiCtx,
    pub http: OutgoingHttp,
    pub writes: WriteBudget,
}

impl Capabilities {
    /// Links every capability (WASI before `writes`, which wraps some of
    /// its functions).
    pub fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        Scratch::link(linker)?;
        WasiCtx::link(linker)?;
        OutgoingHttp::link(linker)?;
        WriteBudget::link(linker)
    }

    /// Configures every capability for `policy`.
    pub fn configure(policy: &Arc<ValidPolicy>) -> Self {
        Self {
            scratch: Scratch::configure(policy),
            wasi: WasiCtx::configure(policy),
            http: OutgoingHttp::configure(policy),
            writes: WriteBudget::configure(policy),
        }
    }

    /// Prepares every capability for one call (the scratch folder first).
    pub fn prepare(&self, call: &Preparing<'_>) -> Result<Prepared, CallError> {
        let scratch = Scratch::prepare(&self.scratch, call)?;
        let call = Preparing {
            scratch: Some(&scratch),
            ..*call
        };
        Ok(Prepared {
            wasi: WasiCtx::prepare(&self.wasi, &call)?,
            http: OutgoingHttp::prepare(&self.http, &call)?,
            writes: WriteBudget::prepare(&self.writes, &call)?,
            scratch,
        })
    }

    /// What `writes` was configured with (a kept store's budget is renewed
    /// for each call).
    pub fn writes(&self) -> &<WriteBudget as Capability>::Config {
        &self.writes
    }
}
