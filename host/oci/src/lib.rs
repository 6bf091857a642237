//! Components from OCI registries: pulled over the host's own
//! distribution-API client (`wire`: address rules, token flow, capped reads)
//! in the CNCF Wasm OCI artifact layout into a local content-addressed
//! [`Store`], pinned by
//! digest in a [`LockFile`], and verified against cosign keyed signatures
//! ([`VerifyKey`]) before they are loaded.
//!
//! The host pulls; tools never see the registry, its network access or its
//! credentials.

mod credentials;
mod digest;
mod layout;
mod lock;
mod pull;
mod reference;
mod sign;
mod signature;
mod store;
mod wire;

use std::path::PathBuf;
use std::time::Duration;

pub use credentials::{Credentials, ENV_PASSWORD, ENV_REGISTRY, ENV_USERNAME};
pub use digest::Digest;
pub use lock::{LOCK_FILE, LockError, LockFile, Locked};
pub use pull::{Pulled, Registry, RegistryOptions};
pub use reference::{ComponentRef, SCHEME};
#[cfg(feature = "fuzz")]
pub use signature::fuzz_payload;
pub use signature::{SignatureError, SigningKey, VerifyKey};
pub use store::{BlobWriter, Store};

/// Why a component could not be had from a registry; every one names the
/// reference it is about.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Not an `oci://` reference the host can use.
    #[error("{text}: {reason}")]
    BadReference {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry cannot be reached (name, connection, TLS).
    #[error("{reference}: cannot reach the registry: {reason}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// What failed.
        reason: String,
    },
    /// The registry has no such repository, tag or digest.
    #[error("{reference}: the registry has no such {what}")]
    NotFound {
        /// The reference.
        reference: String,
        /// `tag`, `digest` or `repository`.
        what: &'static str,
    },
    /// The registry refused the request's credentials, or wants some.
    #[error(
        "{reference}: the registry refused access ({reason}); give credentials in \
         WASM_AGENT_REGISTRY_USERNAME/_PASSWORD or the Docker config.json"
    )]
    Unauthorized {
        /// The reference.
        reference: String,
        /// The registry's answer.
        reason: String,
    },
    /// The registry answered something else that is not the component.
    #[error("{reference}: the registry answered: {reason}")]
    Registry {
        /// The reference.
        reference: String,
        /// Its answer, shortened.
        reason: String,
    },
    /// The artifact is not a Wasm component in a layout the host reads.
    #[error("{reference}: not a Wasm component artifact: {reason}")]
    MediaType {
        /// The reference.
        reference: String,
        /// Which media types were found and which are accepted.
        reason: String,
    },
    /// A blob or manifest is larger than allowed.
    #[error(
        "{reference}: {what} is over the {limit}-byte limit {of} ({size} bytes declared or \
         received)"
    )]
    TooLarge {
        /// The reference.
        reference: String,
        /// `the component`, `the manifest`, ...
        what: &'static str,
        /// Its size (as declared, or as received so far).
        size: u64,
        /// The limit.
        limit: u64,
        /// Which limit: `(--max-component-size)`, `of a manifest`, ...
        of: &'static str,
    },
    /// Content that does not match the digest that names it.
    #[error("{what}: content is {actual}, but {expected} was expected")]
    WrongContent {
        /// What was checked, with its reference.
        what: String,
        /// The digest that names it.
        expected: Digest,
        /// The content's digest.
        actual: Digest,
    },
    /// The component is not the one pinned (by the lock file).
    #[error("{reference}: its content is {actual}, but {pinned} is pinned")]
    Pinned {
        /// The reference.
        reference: String,
        /// The pinned content digest.
        pinned: Digest,
        /// What the reference names now.
        actual: Digest,
    },
    /// The registry tried to send the host where registries may not (a
    /// redirect or token realm to a non-public address, or over plain HTTP).
    #[error("{reference}: the registry tried to send the host where it may not go: {reason}")]
    Refused {
        /// The reference.
        reference: String,
        /// Which URL or address, and which rule.
        reason: String,
    },
    /// The registry did not finish in time.
    #[error(
        "{reference}: the registry did not finish within {} (--registry-timeout)",
        humantime::format_duration(*after)
    )]
    Deadline {
        /// The reference.
        reference: String,
        /// The deadline.
        after: Duration,
    },
    /// `--offline`, and the store does not have it.
    #[error("{reference}: not in the local store ({store}); pull it without --offline first")]
    NotStored {
        /// The reference.
        reference: String,
        /// The store's folder.
        store: PathBuf,
    },
    /// The local store cannot be written or read.
    #[error("the component store at {path}: {reason}")]
    Store {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        #[source]
        reason: std::io::Error,
    },
    /// Plain HTTP was asked for a registry that is not on this machine.
    #[error(
        "--insecure-registry {registry}: plain HTTP is only allowed for loopback registries \
         (127.0.0.1, ::1, localhost)"
    )]
    InsecureNotLoopback {
        /// The registry given.
        registry: String,
    },
    /// The signature checks failed.
    #[error("{reference}: {reason}")]
    Signature {
        /// The reference.
        reference: String,
        /// Which check failed.
        #[source]
        reason: SignatureError,
    },
    /// Credentials in the environment are incomplete.
    #[error("{0}")]
    Credentials(String),
}

/// Text from a registry, shortened and on one line, for messages.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 300;
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.trim();
    match line.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line.to_string(),
    }
}
