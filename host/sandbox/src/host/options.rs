//! What `ToolHost::load` takes and gives: where a component comes from, how
//! to add it, what loading did, and why it failed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::registry::RegistryError;
use crate::runtime::{CacheOutcome, LoadError};
use crate::specs::SpecError;
use wasm_agent_policy::{Policy, PolicyError};

/// Default number of calls that may run at once (and instance-pool slots).
pub const DEFAULT_CONCURRENCY: u32 = 128;

/// Instances kept between calls at most, by default (`keep_instance`).
pub const DEFAULT_KEPT_INSTANCES: u32 = 16;

/// Why a component could not be added to the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The component file cannot be read.
    #[error("cannot read component {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        reason: std::io::Error,
    },
    /// The component is not a usable tool component.
    #[error("component {component}: {reason}")]
    Load {
        /// The component's name.
        component: String,
        /// What is wrong with it.
        #[source]
        reason: LoadError,
    },
    /// The policy cannot be enforced.
    #[error("component {component}: policy {reason}")]
    Policy {
        /// The component's name.
        component: String,
        /// What is wrong with the policy.
        #[source]
        reason: PolicyError,
    },
    /// The component's tool list is unusable.
    #[error("component {component}: {reason}")]
    Spec {
        /// The component's name.
        component: String,
        /// What is wrong with its tool list.
        #[source]
        reason: SpecError,
    },
    /// The registry refused the component's tools (a name clash).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// An invalid component name or prefix.
    #[error("{0}")]
    BadName(String),
    /// The component is not the content that was asked for.
    #[error("component {component}: its content is {actual}, but {expected} was expected")]
    WrongDigest {
        /// The component's name.
        component: String,
        /// The digest asked for (`sha256:HEX`).
        expected: String,
        /// The content's digest.
        actual: String,
    },
    /// An interpreter (world `interpreter`) under a policy its scripts
    /// cannot keep across their segments.
    #[error(
        "component {component}: it is an interpreter, whose scripts run in segments, so its \
         policy may not {what}"
    )]
    Interpreter {
        /// The component's name.
        component: String,
        /// What the policy may not have.
        what: &'static str,
    },
    /// The async runtime is shutting down, so the component was not loaded.
    #[error("component {0}: not loaded, the runtime is shutting down")]
    ShuttingDown(String),
}

/// Where a component comes from.
pub enum ComponentSource {
    /// A `.wasm` file.
    File(PathBuf),
    /// Bytes in memory, with a name for messages.
    Bytes {
        /// The component's name.
        name: String,
        /// The component's bytes.
        bytes: Vec<u8>,
    },
}

impl From<&Path> for ComponentSource {
    fn from(path: &Path) -> Self {
        ComponentSource::File(path.to_path_buf())
    }
}

impl From<PathBuf> for ComponentSource {
    fn from(path: PathBuf) -> Self {
        ComponentSource::File(path)
    }
}

impl From<&str> for ComponentSource {
    fn from(path: &str) -> Self {
        ComponentSource::File(path.into())
    }
}

/// How to add a component.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The component's name (default: the file stem).
    pub name: Option<String>,
    /// Prepended to each of its tool names.
    pub prefix: Option<String>,
    /// The policy its calls run under.
    pub policy: Policy,
    /// The name its session state is kept under. Without one, state is kept
    /// under the component's content digest, so only the very same bytes
    /// see it; a name (a config alias) keeps it across versions. Either way
    /// a component with another identity never sees it.
    pub state_scope: Option<String>,
    /// The content digest (`sha256:HEX`) the component must have: a pin
    /// from a lock file, or the digest a registry named. Checked against the
    /// bytes that are compiled, so a file changed after it was checked is
    /// refused too.
    pub expected_digest: Option<String>,
    /// Where the component came from, for the audit trail (default: its
    /// path, or its name for bytes): an `oci://` reference, say.
    pub origin: Option<String>,
}

impl LoadOptions {
    /// Options with this policy.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }
    /// Sets the component name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the tool-name prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Requires this content digest (`sha256:HEX`).
    pub fn expected_digest(mut self, digest: impl Into<String>) -> Self {
        self.expected_digest = Some(digest.into());
        self
    }
    /// Names where the component came from (an `oci://` reference).
    pub fn origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }
    /// Keeps session state under this name (an operator's alias) instead of
    /// the content digest.
    pub fn state_scope(mut self, name: impl Into<String>) -> Self {
        self.state_scope = Some(name.into());
        self
    }
}

/// What loading a component did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// The component's name.
    pub component: String,
    /// Public names of its tools.
    pub tools: Vec<String>,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
    /// Time to compile or load the code.
    #[serde(serialize_with = "millis")]
    pub load_time: Duration,
    /// Whether its tools were offered, while it loaded, from a kept listing
    /// that differs from what it listed now (see
    /// [`ToolHost::load_all_listing`](super::ToolHost::load_all_listing)):
    /// clients that listed them are to be told the list changed.
    #[serde(skip)]
    pub listing_changed: bool,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}
