//! The tools a host offers, by public name: install (all of a component's
//! tools or none), replace, remove and look up.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::runtime::{CallPolicy, KeptInstances, LoadedComponent};
pub use crate::tool::{Annotations, ToolInfo};

/// A loaded component and the policy its calls run under.
pub(crate) struct ComponentEntry {
    pub id: Arc<str>,
    /// Its name, origin and content digest, for the audit trail.
    pub identity: crate::report::ComponentIdentity,
    /// What its session state is keyed by (`alias:NAME` or `sha256:HEX`).
    pub state_scope: Arc<str>,
    pub code: Code,
    /// Whether its tools are scripts run in segments (world `interpreter`).
    pub interpreter: bool,
    /// Whether it imports session state (`get-state` or `set-state`).
    pub uses_state: bool,
    pub policy: CallPolicy,
    pub dependencies: Arc<BTreeMap<String, String>>,
    /// Its instances kept between calls, per session (`keep_instance`).
    pub kept: Option<Arc<KeptInstances>>,
}

/// A component's compiled code.
pub(crate) enum Code {
    /// Loaded: calls run on it.
    Ready(LoadedComponent),
    /// Still loading, its tools offered from the listing kept at its last
    /// load: the sender is dropped once the loaded component replaces this
    /// entry (or its load failed), and a call waits for that.
    Coming(tokio::sync::watch::Receiver<()>),
}

/// One callable tool.
pub(crate) struct ToolEntry {
    pub info: ToolInfo,
    /// The name the component knows it by (without prefix).
    pub guest_name: String,
    pub validator: jsonschema::Validator,
    pub component: Arc<ComponentEntry>,
}

/// Why a component's tools cannot be installed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    /// Two components offer the same tool name.
    #[error(
        "tool {tool:?} of component {component} is already offered by component {existing}; \
         give one of them a prefix (config key `prefix`)"
    )]
    DuplicateTool {
        /// The clashing tool name.
        tool: String,
        /// The component being installed.
        component: String,
        /// The component that already offers the name.
        existing: String,
    },
    /// A component with that name is installed already.
    #[error("a component named {0:?} is already loaded")]
    DuplicateComponent(String),
}

/// The tools on offer, by public name.
#[derive(Default)]
pub(crate) struct Registry {
    tools: RwLock<BTreeMap<String, Arc<ToolEntry>>>,
}

impl Registry {
    /// Adds a component's tools, all or none, first removing those of the
    /// component with the same id when `replace` is set.
    pub fn install(
        &self,
        component: &str,
        entries: Vec<ToolEntry>,
        replace: bool,
    ) -> Result<(), RegistryError> {
        let mut tools = self.write();
        let is_same = |t: &ToolEntry| *t.component.id == *component;
        if !replace && tools.values().any(|t| is_same(t)) {
            return Err(RegistryError::DuplicateComponent(component.to_string()));
        }
        if let Some((entry, existing)) = entries.iter().find_map(|e| {
            tools
                .get(&e.info.name)
                .filter(|existing| !(replace && is_same(existing)))
                .map(|existing| (e, existing))
        }) {
            return Err(RegistryError::DuplicateTool {
                tool: entry.info.name.clone(),
                component: component.to_string(),
                existing: existing.component.id.to_string(),
            });
        }
        tools.retain(|_, t| !is_same(t));
        for entry in entries {
            tools.insert(entry.info.name.clone(), Arc::new(entry));
        }
        Ok(())
    }

    /// The tool with this public name.
    pub fn get(&self, name: &str) -> Option<Arc<ToolEntry>> {
        self.read().get(name).cloned()
    }

    /// Whether a tool with this public name is on offer.
    pub fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// Every tool's description, by name.
    pub fn infos(&self) -> Vec<ToolInfo> {
        self.read().values().map(|t| t.info.clone()).collect()
    }

    /// Removes one tool; returns whether it existed.
    pub fn remove(&self, name: &str) -> bool {
        self.write().remove(name).is_some()
    }

    /// Removes every tool of a component; returns how many there were.
    pub fn remove_component(&self, component: &str) -> usize {
        let mut tools = self.write();
        let before = tools.len();
        tools.retain(|_, t| &*t.component.id != component);
        before - tools.len()
    }

    /// Removes the tools of a component that are offered from a kept
    /// listing ([`Code::Coming`]); a loaded component's stay.
    pub fn remove_coming(&self, component: &str) {
        self.write().retain(|_, t| {
            &*t.component.id != component || matches!(t.component.code, Code::Ready(_))
        });
    }

    /// Removes the tools of the component that offers `name` from a kept
    /// listing, unless it is `component` itself.
    pub fn remove_coming_of_another(&self, name: &str, component: &str) {
        let mut tools = self.write();
        let other = tools
            .get(name)
            .filter(|t| matches!(t.component.code, Code::Coming(_)))
            .filter(|t| &*t.component.id != component)
            .map(|t| t.component.id.clone());
        if let Some(other) = other {
            tools.retain(|_, t| {
                t.component.id != other || matches!(t.component.code, Code::Ready(_))
            });
        }
    }

    /// The public names on offer, in order.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Arc<ToolEntry>>> {
        self.tools.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Arc<ToolEntry>>> {
        self.tools.write().unwrap_or_else(PoisonError::into_inner)
    }
}
