use serde_json::{Map, Value};

use crate::bindings::wasm_agent::tool::types::CallContext;

/// Who and what a call is for, as the host reported it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Context {
    /// The agent run this call belongs to.
    pub run_id: String,
    /// The session whose state [`crate::host::state`] reads and writes.
    pub session_id: String,
    /// The end user, when the host knows one.
    pub user_id: Option<String>,
    /// The tenant, when the host is multi-tenant.
    pub tenant_id: Option<String>,
    /// Free-form metadata from the host; always a JSON object.
    pub metadata: Value,
}

impl Context {
    /// A context with the given ids and no user, tenant or metadata; meant for
    /// unit tests that call [`crate::Tool::call`] directly.
    pub fn new(run_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            session_id: session_id.into(),
            user_id: None,
            tenant_id: None,
            metadata: Value::Object(Map::new()),
        }
    }
}

impl Default for Context {
    fn default() -> Self {
        Self::new("", "")
    }
}

impl From<CallContext> for Context {
    fn from(context: CallContext) -> Self {
        // The contract says metadata is a JSON object; anything else from a
        // misbehaving host degrades to an empty object rather than failing
        // the call.
        let metadata = match serde_json::from_str(&context.metadata) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => Value::Object(Map::new()),
        };
        Self {
            run_id: context.run_id,
            session_id: context.session_id,
            user_id: context.user_id,
            tenant_id: context.tenant_id,
            metadata,
        }
    }
}
