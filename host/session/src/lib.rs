//! Where sessions keep what outlives a call: tools' state, scoped to
//! (owner, session, component), and agents' conversations, scoped to
//! (owner, session). The owner (tenant and principal) is part of every key,
//! so a session id alone never reaches anything.

#![warn(missing_docs)]

mod backoff;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod memory;
mod url;

use std::sync::Arc;
use std::time::Duration;

pub use backoff::Backoff;
pub use memory::InMemorySessionStore;
pub use url::{StoreUrl, StoreUrlError};

/// Why a store refused or failed an operation.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The scope holds too many keys.
    #[error("session state is full ({max} keys per tool and session)")]
    TooManyKeys {
        /// The limit.
        max: usize,
    },
    /// The scope's values would take more bytes than allowed.
    #[error("session state is full ({max} bytes of values per tool and session)")]
    TooManyBytes {
        /// The limit.
        max: usize,
    },
    /// The owner (tenant and principal) holds as much state as it may, in
    /// all its sessions and tools together.
    #[error(
        "session state is full ({max} bytes of keys and values per principal, in all its \
         sessions and tools, {ENTRY_OVERHEAD} bytes an entry counted besides)"
    )]
    OwnerFull {
        /// The limit.
        max: usize,
    },
    /// The tenant holds as much state as it may, all its principals together.
    #[error("session state is full ({max} bytes of keys and values per tenant, in all)")]
    TenantFull {
        /// The limit.
        max: usize,
    },
    /// The backing store failed or did not answer in time: nothing is known
    /// to have been read or written.
    #[error("session store failed: {location}: {what}: {source}")]
    Backend {
        /// The store (a file path, a URL without credentials).
        location: String,
        /// What the store was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SessionError {
    /// A failure of the backing store at `location` while doing `what`.
    pub fn backend(
        location: impl Into<String>,
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        SessionError::Backend {
            location: location.into(),
            what: what.into(),
            source: source.into(),
        }
    }

    /// Whether the store itself failed (rather than refusing past a quota).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SessionError::Backend { .. })
    }
}

/// Keys one tool may keep in one session, by default.
pub const DEFAULT_MAX_KEYS: usize = 1024;
/// Bytes of values one tool may keep in one session, by default.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of keys and values one owner may keep in all, by default.
pub const DEFAULT_MAX_OWNER_BYTES: usize = 256 * 1024 * 1024;
/// Bytes of keys and values one tenant may keep in all, by default.
pub const DEFAULT_MAX_TENANT_BYTES: usize = 1024 * 1024 * 1024;
/// How long a session's state, conversation and protocol record are kept
/// after it was last written, by default.
pub const DEFAULT_MAX_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Whose data it is: the tenant and the principal an entry point
/// established (from a token or the operator's flags), never a value the
/// client or the model sets. Empty strings stand for "none".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    /// The tenant ("" when the host serves one).
    pub tenant: String,
    /// The principal: the user or client the call is made for ("" when unknown).
    pub principal: String,
}

impl Owner {
    /// The owner for an optional tenant and principal.
    pub fn new(tenant: Option<&str>, principal: Option<&str>) -> Self {
        Self {
            tenant: tenant.unwrap_or_default().to_string(),
            principal: principal.unwrap_or_default().to_string(),
        }
    }
}

/// One component's state in one session of one owner: every read and write
/// names all three.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StateScope {
    /// Whose session.
    pub owner: Owner,
    /// The session.
    pub session: String,
    /// The component's identity (`alias:NAME` or `sha256:HEX`): tools never
    /// see another component's state, even in the same session.
    pub component: Arc<str>,
}

/// Where session state and conversations live. Values are JSON text.
///
/// The [`Quotas`] are part of the contract: every backend refuses past them with the same
/// errors. A write is durable when it returns `Ok`, and completes even if the
/// caller stops waiting for it. Every operation is bounded in time: a store
/// that does not answer gives [`SessionError::Backend`], never a hang.
/// Backends that block (a file) do so on the blocking pool, never on an
/// async worker.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Reads one value of a tool's state.
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError>;

    /// Writes one value of a tool's state.
    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError>;

    /// The conversation saved for `session` of `owner`, as the JSON text given
    /// to [`save_history`](Self::save_history), or `None` for a new session.
    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError>;

    /// Replaces the conversation saved for `session` of `owner`.
    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError>;

    /// Saves the record of a protocol session (an MCP session's `initialize`
    /// parameters), so that any replica can serve the session's requests.
    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError>;

    /// The record of protocol session `id` of `owner`; `None` if it never
    /// existed, was deleted, or is another owner's.
    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError>;

    /// Forgets protocol session `id` of `owner` (the client ended it).
    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError>;

    /// Marks `token` used for `ttl`: `true` the first time, `false` while an
    /// earlier mark lasts. Every process sharing the store sees the mark at
    /// once, so a one-time value is honoured once by all replicas together.
    async fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError>;

    /// Opens mailbox `address` for one message, for at most `ttl`: the
    /// replica that waits for an answer opens it; any replica may then
    /// [`deliver`](Self::deliver) to it.
    async fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError>;

    /// Leaves `message` in mailbox `address`: `false`, and nothing kept,
    /// unless that mailbox is open, empty and unexpired (the first message
    /// counts; nobody fills the store with mail no one waits for).
    async fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError>;

    /// The open, unexpired mailboxes whose address starts with `prefix`, at
    /// most `limit` of them, each with its message if one came (read, not
    /// collected): what every replica has open for one purpose (the
    /// questions waiting for an operator).
    async fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError>;

    /// Mailbox `address` read, not collected: `None` unless it is open and
    /// unexpired, then the message if one came.
    async fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError>;

    /// The message in mailbox `address`, if one came; the mailbox then closes.
    async fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError>;

    /// Closes mailbox `address`, whether or not a message came.
    async fn close_mailbox(&self, address: &str) -> Result<(), SessionError>;

    /// Whether the store answers now (for readiness checks).
    async fn check(&self) -> Result<(), SessionError> {
        Ok(())
    }

    /// Where the store is, without credentials (for messages and logs).
    fn location(&self) -> String;
}

/// The limits every store holds tool state to: each scope (one tool in one
/// session), each owner and each tenant in total; and how long an idle
/// session is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quotas {
    /// Keys one scope may hold; replacing an existing key is always allowed.
    pub max_keys: usize,
    /// Bytes of values one scope may hold.
    pub max_bytes: usize,
    /// Bytes one owner may hold in all its scopes: keys and values, and
    /// [`ENTRY_OVERHEAD`] for each entry.
    pub max_owner_bytes: usize,
    /// Bytes of keys and values one tenant may hold, all its owners together.
    pub max_tenant_bytes: usize,
    /// A session whose state was last written longer ago than this has it
    /// collected, with its conversation and its protocol record (checked
    /// on writes, at most every tenth of this, between a second and ten
    /// minutes).
    pub max_idle: Duration,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_owner_bytes: DEFAULT_MAX_OWNER_BYTES,
            max_tenant_bytes: DEFAULT_MAX_TENANT_BYTES,
            max_idle: DEFAULT_MAX_IDLE,
        }
    }
}

/// What a scope, its owner and its tenant hold before a write, as a store
/// counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Keys in the scope.
    pub keys: usize,
    /// Whether the written key is one of them.
    pub exists: bool,
    /// Bytes of the scope's other values.
    pub others: usize,
    /// Bytes of keys and values the owner holds, the written entry left out.
    pub owner: usize,
    /// The same, for the tenant.
    pub tenant: usize,
}

/// What each entry counts for in the owner's and tenant's totals besides
/// its key and value, so that a total also bounds the number of entries.
pub const ENTRY_OVERHEAD: usize = 64;

/// The bytes an entry counts for in the owner's and tenant's totals.
pub fn entry_size(key: &str, value: &str) -> usize {
    key.len() + value.len() + ENTRY_OVERHEAD
}

impl Quotas {
    /// Admits a write of `value` under `key` to a scope whose holdings are
    /// `usage`: the same rule in every store.
    pub fn admit(&self, usage: Usage, key: &str, value: &str) -> Result<(), SessionError> {
        if !usage.exists && usage.keys >= self.max_keys {
            return Err(SessionError::TooManyKeys { max: self.max_keys });
        }
        if usage.others.saturating_add(value.len()) > self.max_bytes {
            return Err(SessionError::TooManyBytes {
                max: self.max_bytes,
            });
        }
        let size = entry_size(key, value);
        if usage.owner.saturating_add(size) > self.max_owner_bytes {
            return Err(SessionError::OwnerFull {
                max: self.max_owner_bytes,
            });
        }
        if usage.tenant.saturating_add(size) > self.max_tenant_bytes {
            return Err(SessionError::TenantFull {
                max: self.max_tenant_bytes,
            });
        }
        Ok(())
    }

    /// How often a store looks for idle sessions: a tenth of
    /// [`max_idle`](Self::max_idle), between a second and ten minutes.
    pub fn collect_every(&self) -> Duration {
        (self.max_idle / 10).clamp(Duration::from_secs(1), Duration::from_secs(600))
    }
}
