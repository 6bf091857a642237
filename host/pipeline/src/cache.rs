//! The result cache: results of tools with a `cache_ttl`, filed under the
//! tool, the version that computed them, the canonical arguments, the tenant
//! and the principal (no principal for tools the config declares shared;
//! never across tenants). A hit answers without running. A cache that fails
//! or holds something unreadable is a miss: the call runs.

use std::sync::Arc;
use std::time::Duration;

use wasm_agent_cache::{CacheError, CacheKey, CachedArtifact, CachedResult, ResultCache};
use wasm_agent_sandbox::context::ToolOutput;
use wasm_agent_sandbox::result::Artifact;

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// Answers from, and keeps results in, a [`ResultCache`].
pub(crate) struct Cache {
    pub(crate) cache: Arc<dyn ResultCache>,
}

#[async_trait::async_trait]
impl Layer for Cache {
    fn applies(&self, call: &ToolCall) -> bool {
        call.tool.settings.cache_ttl.is_some()
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let (Some(ttl), Some(version)) = (call.tool.settings.cache_ttl, call.version.as_deref())
        else {
            return next.run(call).await;
        };
        let key = key(call, version);
        if let Some(output) = self.lookup(&key).await {
            let mut called = Called::new(Ok(output), call.id.clone());
            called.cached = true;
            return called;
        }
        let called = next.run(call).await;
        // A component replaced during the call may have answered: keep its
        // result only under the version that ran.
        if let Ok(output) = &called.result
            && call.tool.target.version().as_deref() == Some(key.component())
        {
            self.keep(&key, output, ttl).await;
        }
        called
    }
}

/// The key of `call` on `version`.
pub(crate) fn key(call: &ToolCall, version: &str) -> CacheKey {
    let context = &call.context;
    let principal = match call.tool.settings.cache_shared {
        true => None,
        false => context.user_id.as_deref(),
    };
    CacheKey::new(
        &call.tool.name,
        version,
        &call.arguments,
        context.tenant_id.as_deref(),
        principal,
    )
}

impl Cache {
    async fn lookup(&self, key: &CacheKey) -> Option<ToolOutput> {
        match self.cache.get(key).await {
            Ok(found) => found.and_then(|bytes| decode(&bytes)),
            Err(error) => {
                tracing::debug!("cache read of {}: {error}", key.tool());
                None
            }
        }
    }

    async fn keep(&self, key: &CacheKey, output: &ToolOutput, ttl: Duration) {
        match self.cache.put(key, &encode(output), ttl).await {
            Ok(()) => {}
            Err(error @ CacheError::TooLarge { .. }) => {
                tracing::info!("result of {} not cached: {error}", key.tool());
            }
            Err(error) => tracing::debug!("cache write of {}: {error}", key.tool()),
        }
    }
}

fn encode(output: &ToolOutput) -> Vec<u8> {
    CachedResult {
        content: output.content.clone(),
        artifacts: output
            .artifacts
            .iter()
            .map(|artifact| CachedArtifact {
                kind: artifact.kind.clone(),
                mime_type: artifact.mime_type.clone(),
                data: artifact.data.clone(),
            })
            .collect(),
    }
    .encode()
}

fn decode(bytes: &[u8]) -> Option<ToolOutput> {
    let cached = CachedResult::decode(bytes)?;
    Some(ToolOutput {
        content: cached.content,
        artifacts: cached
            .artifacts
            .into_iter()
            .map(|artifact| Artifact {
                kind: artifact.kind,
                mime_type: artifact.mime_type,
                data: artifact.data,
            })
            .collect(),
    })
}
