//! A tool as the host offers it ([`ToolInfo`]) and its behaviour hints
//! ([`Annotations`]): plain data every layer may name.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bindings::types;

/// Hints about a tool's behaviour (mirroring MCP tool annotations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// Does not change anything.
    pub read_only: bool,
    /// May destroy data.
    pub destructive: bool,
    /// Calling twice with the same arguments has no further effect.
    pub idempotent: bool,
    /// Talks to the world outside the host.
    pub open_world: bool,
}

impl From<types::Annotations> for Annotations {
    fn from(flags: types::Annotations) -> Self {
        Self {
            read_only: flags.contains(types::Annotations::READ_ONLY),
            destructive: flags.contains(types::Annotations::DESTRUCTIVE),
            idempotent: flags.contains(types::Annotations::IDEMPOTENT),
            open_world: flags.contains(types::Annotations::OPEN_WORLD),
        }
    }
}

impl From<Annotations> for types::Annotations {
    fn from(hints: Annotations) -> Self {
        let mut flags = types::Annotations::empty();
        for (set, flag) in [
            (hints.read_only, types::Annotations::READ_ONLY),
            (hints.destructive, types::Annotations::DESTRUCTIVE),
            (hints.idempotent, types::Annotations::IDEMPOTENT),
            (hints.open_world, types::Annotations::OPEN_WORLD),
        ] {
            if set {
                flags |= flag;
            }
        }
        flags
    }
}

/// A tool as the host offers it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolInfo {
    /// Public name (with the component's prefix, if any).
    pub name: String,
    /// The component that provides it.
    pub component: String,
    /// The component's version: `sha256:HEX` of its bytes (empty for tools
    /// that are not a component's).
    pub digest: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Behaviour hints.
    pub annotations: Annotations,
}
