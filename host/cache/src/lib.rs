//! Where an agent keeps tool results, so a repeated call does not pay for
//! (or wait on) the tool twice: the [`ResultCache`] trait, the keys results
//! are filed under, and the in-memory cache. Redis lives in
//! `wasm-agent-cache-redis`.
//!
//! Only cache tools whose result depends on their arguments alone: a key
//! knows the tool, its component's version, the arguments, the tenant and
//! the principal, and nothing of files or network state.

#![warn(missing_docs)]

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod key;
mod lru;
mod memory;
mod result;
mod url;

use std::time::Duration;

pub use key::{CacheKey, canonical};
pub use memory::MemoryCache;
pub use result::{CachedArtifact, CachedResult};
pub use url::{CacheUrl, CacheUrlError};

/// Why a cache could not read or keep a result.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache's backend failed or did not answer in time; the caller goes
    /// on without it.
    #[error("result cache at {location} is unavailable: {reason}")]
    Unavailable {
        /// The cache (a URL without credentials).
        location: String,
        /// Why it failed.
        reason: String,
    },
    /// The cache cannot be used as named (a malformed URL, say).
    #[error("cannot use {location} as the result cache: {reason}")]
    Refused {
        /// The cache as named (without credentials).
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The value is larger than the cache keeps.
    #[error("a result of {size} bytes is larger than the cache keeps ({max} bytes)")]
    TooLarge {
        /// The value's size.
        size: usize,
        /// The cache's limit for one value.
        max: usize,
    },
}

/// A cache of tool results, shared by every run of an agent (and, for a
/// cache elsewhere, by every replica). Values are opaque bytes.
///
/// A cache answers within a bound of its own and never blocks a call for
/// long: when it fails, callers go on uncached.
#[async_trait::async_trait]
pub trait ResultCache: Send + Sync {
    /// The value kept under `key`, if any and not expired.
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>, CacheError>;

    /// Keeps `value` under `key` for `ttl`, replacing what was there.
    async fn put(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<(), CacheError>;

    /// Drops every result this cache keeps for wasm-agent.
    async fn clear(&self) -> Result<(), CacheError>;

    /// Where the cache is, without credentials (for logs and errors).
    fn location(&self) -> String;
}
