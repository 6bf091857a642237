//! Results answered from the result cache (the call pipeline's `cache`
//! step, in Redis when shared by every replica) are marked in the result's
//! `_meta` (`"io.wasm-agent/cached": true`).

use rmcp::model::{CallToolResult, MetaObject};
use serde_json::Value;

/// The `_meta` key of a result served from the cache.
pub const CACHED_META: &str = "io.wasm-agent/cached";

/// Marks `result` as served from the cache.
pub(crate) fn mark_cached(result: &mut CallToolResult) {
    let meta = result
        .meta
        .get_or_insert_with(|| MetaObject(Default::default()));
    meta.0.insert(CACHED_META.into(), Value::Bool(true));
}
