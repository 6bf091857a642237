//! The sandbox: compiles components, checks they fit the contract, and runs
//! each call in a fresh store under the call's policy.

pub(crate) mod accounting;
mod call;
mod capability;
mod engine;
mod script;

use accounting::{asks, classify, denials, usage};
use call::{ahead, deadline, imports, kept, limits, output, returned, run, store};
use capability::{delegate, emit, http, log, net, scratch, session_state, tool_calls, writes};
use engine::{admission, cache, epoch, gauges, resident, turns};

use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::Arc;

use sha2::Digest as _;
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{AsContextMut, Store};

pub use admission::raise_open_file_limit;
use cache::CacheFolder;
pub use cache::{CacheOutcome, CompileCache};
pub use denials::{CallActivity, Denial, DenialKind, NetRequest};
pub use engine::Allocator;
pub use gauges::{HostGauges, PoolUse};
pub use imports::{CallId, CallScope, HostImports};
pub use kept::{KeptBudget, KeptInstances};
pub use output::Captured;
pub use script::{MAX_SCRIPT_STATE, ScriptCall};
pub use tool_calls::{MAX_TOOL_CALL_DEPTH, MAX_TOOL_CALLS};
pub use usage::{CallUsage, UsageSink};

use crate::bindings::interpreter::{Interpreter, InterpreterIndices};
use crate::bindings::{Toolkit, ToolkitIndices, types};
use crate::result::{Artifact, CallError, ErrorKind};
use classify::{
    Interrupted, awaits_answer, cancelled, classify, denied_error, memory_limit, timed_out,
    tool_error,
};
use run::After;
use store::CallState;
use wasm_agent_policy::{Policy, ValidPolicy};

/// Bytes of guest stdout and stderr kept per call (the rest is counted).
const CAPTURE_CAP: usize = 64 * 1024;
/// Largest in-memory size of one set of HTTP headers (wasi:http `fields`);
/// real headers take a few KiB, and a call holds at most `max_resources`.
const FIELD_SIZE_LIMIT: usize = 32 * 1024;

/// Why a component cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly component (the file does not start with the wasm magic bytes)")]
    NotWasm,
    /// A core module where a component was expected.
    #[error(
        "this is a core WebAssembly module, not a component: build the tool for the \
         wasm32-wasip2 target (cargo build --release --target wasm32-wasip2)"
    )]
    CoreModule,
    /// The component does not compile.
    #[error("invalid WebAssembly component: {summary}")]
    Invalid {
        /// The first line of the reason.
        summary: String,
        /// wasmtime's whole error chain, when there is one.
        #[source]
        cause: Option<Cause>,
    },
    /// The component imports something this host does not provide.
    #[error(
        "{summary}; this host provides WASI 0.2 (with wasi:http) and wasm-agent:tool/host@0.1 only"
    )]
    MissingImport {
        /// The first line of the reason (names the import).
        summary: String,
        /// wasmtime's whole error chain.
        #[source]
        cause: Cause,
    },
    /// The component does not export the tool interface.
    #[error(
        "the component does not export wasm-agent:tool/tool@0.1 (it was built for another \
         world; build it against wit/world.wit, world `toolkit`)"
    )]
    MissingExport,
    /// `list-tools` failed.
    #[error("list-tools failed: {0}")]
    ListTools(CallError),
    /// The engine could not be set up.
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(#[source] Cause),
}

/// A linked component: its instance-to-be and where its exports are.
type Linked = (
    InstancePre<CallState>,
    ToolkitIndices,
    Option<InterpreterIndices>,
);

/// The underlying error of a [`LoadError`].
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

impl LoadError {
    fn invalid(error: wasmtime::Error) -> Self {
        LoadError::Invalid {
            summary: first_line(&error),
            cause: Some(error.into()),
        }
    }

    fn missing_import(error: wasmtime::Error) -> Self {
        LoadError::MissingImport {
            summary: first_line(&error),
            cause: error.into(),
        }
    }
}

/// A compiled component, ready to be instantiated for each call.
pub struct LoadedComponent {
    linked: Instantiable,
    /// Its instance made ahead of the next call (see `call::ahead`).
    ahead: Arc<ahead::Ahead>,
    /// Whether it came from the compile cache.
    pub cache: CacheOutcome,
    /// Time spent compiling or loading from the cache.
    pub load_time: Duration,
    /// SHA-256 of the component's bytes.
    pub digest: [u8; 32],
    /// Whether it imports session state (`get-state` or `set-state`): its
    /// calls keep something from one call of a session to the next.
    pub uses_state: bool,
}

impl LoadedComponent {
    fn new(
        (pre, tool, script): Linked,
        cache: CacheOutcome,
        load_time: Duration,
        digest: [u8; 32],
        uses_state: bool,
    ) -> Self {
        Self {
            linked: Instantiable { pre, tool, script },
            ahead: Arc::default(),
            cache,
            load_time,
            digest,
            uses_state,
        }
    }

    /// Whether its tools are scripts run in segments (world `interpreter`).
    pub fn is_interpreter(&self) -> bool {
        self.linked.script.is_some()
    }

    /// A new instance in `store`, with its typed exports.
    async fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Guest> {
        self.linked.instantiate(store).await
    }
}

/// What instantiating a component takes: its instance-to-be and where its
/// exports are.
#[derive(Clone)]
struct Instantiable {
    pre: InstancePre<CallState>,
    /// Where its `tool` export's functions are.
    tool: ToolkitIndices,
    /// Where its `script` export's functions are, when it is an interpreter
    /// (world `interpreter`: its tools are scripts run in segments).
    script: Option<InterpreterIndices>,
}

impl Instantiable {
    /// A new instance in `store`, with its typed exports.
    async fn instantiate(&self, mut store: &mut Store<CallState>) -> wasmtime::Result<Guest> {
        let instance = self.pre.instantiate_async(&mut store).await?;
        let toolkit = self.tool.load(store.as_context_mut(), &instance)?;
        let interpreter = match &self.script {
            Some(script) => Some(script.load(store.as_context_mut(), &instance)?),
            None => None,
        };
        Ok(Guest {
            toolkit,
            interpreter,
        })
    }
}

/// An instance's typed exports.
pub(crate) struct Guest {
    toolkit: Toolkit,
    interpreter: Option<Interpreter>,
}

/// What a successful guest call returned.
pub struct GuestOutput {
    /// Text for the model.
    pub content: String,
    /// Structured data.
    pub artifacts: Vec<Artifact>,
}

/// A validated, resolved policy with what every call derives from it,
/// prepared once per component rather than on each call.
pub struct CallPolicy {
    policy: Arc<ValidPolicy>,
    /// What each capability keeps of it.
    capabilities: capability::Capabilities,
    /// The network patterns of the policy's `ask` grants.
    asks: Arc<Vec<wasm_agent_policy::NetworkGrant>>,
    /// The folders of the policy's `ask` grants.
    ask_folders: Vec<wasm_agent_policy::DirGrant>,
}

impl CallPolicy {
    /// Prepares `policy` for calls.
    pub fn new(policy: ValidPolicy) -> Self {
        let policy = Arc::new(policy);
        Self {
            capabilities: capability::Capabilities::configure(&policy),
            asks: Arc::new(
                policy
                    .ask
                    .iter()
                    .filter_map(wasm_agent_policy::AskGrant::network)
                    .cloned()
                    .collect(),
            ),
            ask_folders: policy
                .ask
                .iter()
                .filter_map(wasm_agent_policy::AskGrant::dir)
                .cloned()
                .collect(),
            policy,
        }
    }
}

impl std::ops::Deref for CallPolicy {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}

/// Engine, linker and the shared limits of every call.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<CallState>,
    cache: CompileCache,
    allocator: Allocator,
    admission: admission::Admission,
    ticker: epoch::EpochTicker,
    turns: turns::Turns,
    kept: Arc<KeptBudget>,
    /// The host-wide bound on instances made ahead of calls.
    ahead: ahead::AheadBudget,
    /// Passes keeping what calls write resident in their slots (pooling only).
    residency: Option<Arc<resident::Residency>>,
    denials: Arc<denials::DenialTotals>,
    instance_slots: u32,
}

impl Sandbox {
    /// Builds the engine (pooling when possible) with `concurrency` call
    /// slots and room for `kept` instances kept between calls.
    pub fn new(
        concurrency: u32,
        kept: u32,
        pooling: bool,
        cache: CompileCache,
    ) -> Result<Self, LoadError> {
        let engine_err = |e: wasmtime::Error| LoadError::Engine(e.into());
        let (engine, allocator) = engine::build(concurrency, kept, pooling).map_err(engine_err)?;
        let mut linker = Linker::new(&engine);
        capability::Capabilities::link(&mut linker).map_err(engine_err)?;
        crate::bindings::Toolkit::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
            &mut linker,
            |state| state,
        )
        .map_err(engine_err)?;
        let ticker = epoch::EpochTicker::start(&engine).map_err(|e| LoadError::Engine(e.into()))?;
        Ok(Self {
            engine,
            linker,
            cache,
            allocator,
            admission: admission::Admission::new(concurrency),
            ticker,
            turns: turns::Turns::for_this_machine(),
            kept: KeptBudget::new(kept),
            ahead: ahead::AheadBudget::default(),
            residency: (allocator == Allocator::Pooling).then(Arc::default),
            denials: Arc::default(),
            instance_slots: engine::instance_slots(concurrency, kept),
        })
    }

    /// A handle on the sandbox's live counters (refusals, pool use).
    pub fn gauges(&self) -> HostGauges {
        HostGauges {
            denials: self.denials.clone(),
            pool: self
                .engine
                .pooling_allocator_metrics()
                .map(|metrics| (metrics, self.instance_slots)),
            ahead: self.ahead.clone(),
        }
    }

    /// The host-wide bound on instances kept between calls.
    pub fn kept_budget(&self) -> Arc<KeptBudget> {
        self.kept.clone()
    }

    /// How instances are allocated.
    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// The compile cache.
    pub fn cache(&self) -> &CompileCache {
        &self.cache
    }

    /// Loads and links the component in `path`. An unchanged file whose
    /// compiled code is cached is neither read nor hashed: its code is mapped
    /// from the cache. Otherwise it is read and [`Sandbox::load`]ed.
    pub fn load_file(&self, path: &Path) -> Result<LoadedComponent, LoadFileError> {
        let started = Instant::now();
        let folder = self.cache.folder();
        let mut file = std::fs::File::open(path).map_err(LoadFileError::Read)?;
        let before = file.metadata().map_err(LoadFileError::Read)?;
        if let Some(folder) = folder
            && let Some(digest) = folder.known_digest(&before)
            && let Some(component) = folder.load_cached(&self.engine, &digest)
        {
            let linked = self.link(&component).map_err(LoadFileError::Load)?;
            return Ok(LoadedComponent::new(
                linked,
                CacheOutcome::Hit,
                started.elapsed(),
                digest,
                self.uses_state(&component),
            ));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(LoadFileError::Read)?;
        let mut loaded = self
            .load_through(folder, &bytes)
            .map_err(LoadFileError::Load)?;
        if let Some(folder) = folder
            && let Ok(after) = file.metadata()
        {
            folder.remember_digest(&before, &after, &loaded.digest);
        }
        loaded.load_time = started.elapsed();
        Ok(loaded)
    }

    /// The tool listing kept at the last load of the component in `path`
    /// (see [`keep_listing`](Self::keep_listing)) and the component's digest,
    /// when the file is unchanged since and its compiled code is in the
    /// cache: what a start can offer before the code is mapped.
    pub fn kept_listing(&self, path: &Path) -> Option<([u8; 32], Vec<u8>)> {
        let folder = self.cache.folder()?;
        let digest = folder.known_digest(&std::fs::metadata(path).ok()?)?;
        if !folder.has_entry(&self.engine, &digest) {
            return None;
        }
        Some((digest, folder.listing(&self.engine, &digest)?))
    }

    /// Keeps the tool listing of the component with SHA-256 `digest` in the
    /// compile cache, for the next start.
    pub fn keep_listing(&self, digest: &[u8; 32], listing: &[u8]) {
        if let Some(folder) = self.cache.folder() {
            folder.keep_listing(&self.engine, digest, listing);
        }
    }

    /// Compiles (or loads from the cache) and links a component.
    pub fn load(&self, bytes: &[u8]) -> Result<LoadedComponent, LoadError> {
        self.load_through(self.cache.folder(), bytes)
    }

    fn load_through(
        &self,
        folder: Option<CacheFolder<'_>>,
        bytes: &[u8],
    ) -> Result<LoadedComponent, LoadError> {
        check_header(bytes)?;
        let started = Instant::now();
        let digest: [u8; 32] = sha2::Sha256::digest(bytes).into();
        let (component, cache) =
            cache::load_or_compile(&self.cache, folder, &self.engine, bytes, &digest)
                .map_err(LoadError::invalid)?;
        let load_time = started.elapsed();
        self.link(&component).map(|linked| {
            LoadedComponent::new(
                linked,
                cache,
                load_time,
                digest,
                self.uses_state(&component),
            )
        })
    }

    /// Whether `component` imports the host's session state functions (a
    /// component imports only the functions it uses).
    fn uses_state(&self, component: &Component) -> bool {
        use wasmtime::component::types::ComponentItem;
        component
            .component_type()
            .imports(&self.engine)
            .filter(|(name, _)| name.starts_with("wasm-agent:tool/host@"))
            .any(|(_, import)| match import.ty {
                ComponentItem::ComponentInstance(instance) => instance
                    .exports(&self.engine)
                    .any(|(name, _)| name == "get-state" || name == "set-state"),
                _ => false,
            })
    }

    fn link(&self, component: &Component) -> Result<Linked, LoadError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(LoadError::missing_import)?;
        let exports = |prefix: &str| {
            component
                .component_type()
                .exports(&self.engine)
                .any(|(name, _)| name.starts_with(prefix))
        };
        if !exports("wasm-agent:tool/tool@0.1.") {
            return Err(LoadError::MissingExport);
        }
        let tool = ToolkitIndices::new(&pre).map_err(|_| LoadError::MissingExport)?;
        let script = if exports("wasm-agent:tool/script@0.1.") {
            Some(
                InterpreterIndices::new(&pre).map_err(|error| LoadError::Invalid {
                    summary: format!("its script export does not fit the contract: {error}"),
                    cause: None,
                })?,
            )
        } else {
            None
        };
        Ok((pre, tool, script))
    }

    /// Runs `list-tools` under `policy`.
    pub async fn list_tools(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        host: HostImports,
    ) -> Result<Vec<types::ToolSpec>, CallError> {
        let (specs, _) = self
            .run(component, policy, host, async |guest, store| {
                guest
                    .toolkit
                    .wasm_agent_tool_tool()
                    .call_list_tools(store)
                    .await
            })
            .await?;
        Ok(specs)
    }

    /// Runs `call(name, arguments, context)` under `policy`.
    pub async fn call(
        &self,
        component: &LoadedComponent,
        policy: &CallPolicy,
        host: HostImports,
        name: &str,
        arguments: &str,
        context: &types::CallContext,
    ) -> Result<GuestOutput, CallError> {
        let (answer, after) = self
            .run(component, policy, host, async |guest, store| {
                guest
                    .toolkit
                    .wasm_agent_tool_tool()
                    .call_call(store, name, arguments, context)
                    .await
            })
            .await?;
        let output = answer.map_err(|error| guest_failure(error, after, policy))?;
        guest_output(output, policy)
    }
}

/// A guest's output, once checked against the policy's bounds.
fn guest_output(output: types::ToolOutput, policy: &CallPolicy) -> Result<GuestOutput, CallError> {
    returned::check_output(&output, policy)?;
    Ok(GuestOutput {
        content: output.content,
        artifacts: output
            .artifacts
            .into_iter()
            .map(|a| Artifact {
                kind: a.kind,
                mime_type: a.mime_type,
                data: a.data,
            })
            .collect(),
    })
}

/// The error of a guest that returned `error`: a tool that fails after the
/// sandbox refused it something (memory that could not grow, a capability)
/// failed because of that refusal.
fn guest_failure(error: types::ToolError, after: After, policy: &CallPolicy) -> CallError {
    match (after, tool_error(error)) {
        (
            After {
                memory: Some(asked),
                ..
            },
            error,
        ) if error.kind == ErrorKind::Failed => memory_limit(asked, policy),
        (
            After {
                denied: Some(denied),
                ..
            },
            error,
        ) if error.kind == ErrorKind::Failed => denied_error(&denied),
        (_, error) => returned::check_error(error, policy),
    }
}

/// Why [`Sandbox::load_file`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadFileError {
    /// The file could not be read.
    #[error("cannot read the component: {0}")]
    Read(#[source] std::io::Error),
    /// Its contents are not a loadable component.
    #[error(transparent)]
    Load(LoadError),
}

fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(LoadError::CoreModule),
        Some([0, b'a', b's', b'm', _, _, 1, 0]) => Ok(()),
        Some([0, b'a', b's', b'm', ..]) => Err(LoadError::Invalid {
            summary: "unsupported WebAssembly version or layer".into(),
            cause: None,
        }),
        _ => Err(LoadError::NotWasm),
    }
}

fn first_line(error: &wasmtime::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check_names_what_the_bytes_are() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(matches!(check_header(b""), Err(LoadError::NotWasm)));
    }
}
