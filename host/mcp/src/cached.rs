//! Results of tools given a `cache_ttl`, kept in the server's result cache
//! per tenant, tool, component version and arguments (in Redis, shared by
//! every replica). A hit is marked in the result's `_meta`
//! (`"io.wasm-agent/cached": true`). A cache that fails is a miss.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, MetaObject};
use serde_json::Value;
use wasm_agent_cache::{CacheKey, CachedArtifact, CachedResult, MemoryCache, ResultCache};
use wasm_agent_sandbox::ToolHost;
use wasm_agent_sandbox::result::{Artifact, ToolCallResult};

use super::server::McpServerBuilder;

/// The `_meta` key of a result served from the cache.
pub const CACHED_META: &str = "io.wasm-agent/cached";

/// The cache and which tools' results it keeps, for how long.
#[derive(Clone)]
pub(crate) struct ResultCaching {
    cache: Arc<dyn ResultCache>,
    ttls: BTreeMap<String, Duration>,
}

impl Default for ResultCaching {
    fn default() -> Self {
        Self {
            cache: Arc::new(MemoryCache::new(1024)),
            ttls: BTreeMap::new(),
        }
    }
}

impl McpServerBuilder {
    /// Keeps results of `tool` for `ttl` (per tenant; nothing is cached by
    /// default). Only for tools whose result depends on their arguments alone.
    pub fn cache_ttl(mut self, tool: impl Into<String>, ttl: Duration) -> Self {
        self.caching.ttls.insert(tool.into(), ttl);
        self
    }

    /// Where cached results are kept (default: this process's memory).
    pub fn result_cache(mut self, cache: Arc<dyn ResultCache>) -> Self {
        self.caching.cache = cache;
        self
    }
}

/// Where a call's result is (or would be) cached.
pub(crate) struct Filed {
    key: CacheKey,
    ttl: Duration,
}

impl ResultCaching {
    /// The entry of calling `name` with `arguments` for `tenant`, when the
    /// tool's results are cached.
    pub fn filed(
        &self,
        host: &ToolHost,
        name: &str,
        arguments: &Value,
        tenant: Option<&str>,
    ) -> Option<Filed> {
        let ttl = *self.ttls.get(name)?;
        let digest = host.tool(name)?.digest;
        Some(Filed {
            key: CacheKey::new(name, &digest, arguments, tenant),
            ttl,
        })
    }

    /// The cached result of `filed`, if any can be read.
    pub async fn lookup(&self, filed: &Filed, call_id: String) -> Option<ToolCallResult> {
        let bytes = match self.cache.get(&filed.key).await {
            Ok(found) => found?,
            Err(error) => {
                tracing::debug!("cache read of {}: {error}", filed.key.tool());
                return None;
            }
        };
        let cached = CachedResult::decode(&bytes)?;
        Some(ToolCallResult {
            tool: filed.key.tool().to_string(),
            call_id,
            content: cached.content,
            artifacts: cached
                .artifacts
                .into_iter()
                .map(|a| Artifact {
                    kind: a.kind,
                    mime_type: a.mime_type,
                    data: a.data,
                })
                .collect(),
            error: None,
            duration: Duration::ZERO,
        })
    }

    /// Keeps a successful `result` under `filed`, if the component that
    /// answered is still the version the key names.
    pub async fn keep(&self, host: &ToolHost, filed: &Filed, result: &ToolCallResult) {
        let current = host.tool(filed.key.tool()).map(|info| info.digest);
        if result.error.is_some() || current.as_deref() != Some(filed.key.component()) {
            return;
        }
        let cached = CachedResult {
            content: result.content.clone(),
            artifacts: result
                .artifacts
                .iter()
                .map(|a| CachedArtifact {
                    kind: a.kind.clone(),
                    mime_type: a.mime_type.clone(),
                    data: a.data.clone(),
                })
                .collect(),
        };
        if let Err(error) = self
            .cache
            .put(&filed.key, &cached.encode(), filed.ttl)
            .await
        {
            tracing::debug!("cache write of {}: {error}", filed.key.tool());
        }
    }
}

/// Marks `result` as served from the cache.
pub(crate) fn mark_cached(result: &mut CallToolResult) {
    let meta = result
        .meta
        .get_or_insert_with(|| MetaObject(Default::default()));
    meta.0.insert(CACHED_META.into(), Value::Bool(true));
}
