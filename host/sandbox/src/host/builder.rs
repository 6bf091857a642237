//! [`ToolHostBuilder`]: the engine, cache, concurrency and stores of a host.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::{DEFAULT_CONCURRENCY, DEFAULT_KEPT_INSTANCES, Inner, ToolHost};
use crate::events::EventBus;
use crate::observe::CallObserver;
use crate::registry::Registry;
use crate::report::CallAuditor;
use crate::runtime::{CompileCache, LoadError, Sandbox};
use wasm_agent_session::{InMemorySessionStore, SessionStore};

/// Builds a [`ToolHost`].
pub struct ToolHostBuilder {
    concurrency: u32,
    kept: u32,
    pooling: bool,
    cache_dir: Option<PathBuf>,
    sessions: Option<Arc<dyn SessionStore>>,
    events: EventBus,
    observer: Option<Arc<dyn CallObserver>>,
    auditor: Option<Arc<dyn CallAuditor>>,
}

impl Default for ToolHostBuilder {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            kept: DEFAULT_KEPT_INSTANCES,
            pooling: true,
            cache_dir: CompileCache::default_dir(),
            sessions: None,
            events: EventBus::default(),
            observer: None,
            auditor: None,
        }
    }
}

impl ToolHostBuilder {
    /// How many calls may run at once (default 128); also the pool size.
    pub fn max_concurrency(mut self, calls: u32) -> Self {
        self.concurrency = calls.max(1);
        self
    }
    /// How many instances tools with `keep_instance` may keep between calls,
    /// across all sessions and components (default 16); each holds up to its
    /// policy's `memory`.
    pub fn max_kept_instances(mut self, instances: u32) -> Self {
        self.kept = instances;
        self
    }
    /// Whether to try the pooling allocator (default yes, with fallback).
    pub fn pooling(mut self, enable: bool) -> Self {
        self.pooling = enable;
        self
    }
    /// Where compiled components are cached (default `~/.cache/wasm-agent`).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// Compiles every component afresh.
    pub fn no_cache(mut self) -> Self {
        self.cache_dir = None;
        self
    }
    /// Where tools' session state lives (default: in memory).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }
    /// Publishes events on this bus (default: a new one).
    pub fn event_bus(mut self, events: EventBus) -> Self {
        self.events = events;
        self
    }
    /// Tells `observer` of every call's start and end (for metrics).
    pub fn observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// Reports every call to `auditor` (an audit trail), which may also
    /// refuse calls while it cannot record them.
    pub fn auditor(mut self, auditor: Arc<dyn CallAuditor>) -> Self {
        self.auditor = Some(auditor);
        self
    }
    /// Builds the host.
    pub fn build(self) -> Result<ToolHost, LoadError> {
        let sandbox = Sandbox::new(
            self.concurrency,
            self.kept,
            self.pooling,
            CompileCache::new(self.cache_dir),
        )?;
        Ok(ToolHost {
            inner: Arc::new(Inner {
                sandbox,
                tools: Registry::default(),
                sessions: self
                    .sessions
                    .unwrap_or_else(|| Arc::new(InMemorySessionStore::default())),
                events: self.events,
                observer: self.observer,
                auditor: self.auditor,
                next_call: AtomicU64::new(1),
            }),
        })
    }
}
