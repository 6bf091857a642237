//! What the host offers a tool besides WASI: logging, session state,
//! configured dependencies, events, cancellation and delegation to agents.
//!
//! These functions call into the host, so they only work inside a component;
//! in a native build (unit tests) calling them aborts.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ToolError;
use crate::bindings::wasm_agent::tool::host as wit;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Step-by-step detail.
    Trace,
    /// Detail useful when something goes wrong.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the tool worked around.
    Warn,
    /// Something that failed.
    Error,
}

impl From<Level> for wit::Level {
    fn from(level: Level) -> Self {
        match level {
            Level::Trace => Self::Trace,
            Level::Debug => Self::Debug,
            Level::Info => Self::Info,
            Level::Warn => Self::Warn,
            Level::Error => Self::Error,
        }
    }
}

/// Writes a log line that the host attributes to the calling tool.
pub fn log(level: Level, message: &str) {
    wit::log(level.into(), message);
}

/// [`log`] at [`Level::Trace`].
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// [`log`] at [`Level::Debug`].
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// [`log`] at [`Level::Info`].
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// [`log`] at [`Level::Warn`].
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// [`log`] at [`Level::Error`].
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// Session state of this tool in the current session, stored by the host as
/// JSON text under string keys.
pub mod state {
    use super::*;

    /// The value stored under `key`, or `None` if nothing is.
    ///
    /// Fails if the stored JSON does not decode as `T`.
    pub fn get<T: DeserializeOwned>(key: &str) -> Result<Option<T>, ToolError> {
        match get_raw(key) {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|error| {
                ToolError::failed(format!(
                    "session state {key:?} does not hold the expected kind of value: {error}"
                ))
            }),
        }
    }

    /// Stores `value` under `key`, replacing what was there.
    ///
    /// Fails only if `value` cannot be represented as JSON.
    pub fn set<T: Serialize + ?Sized>(key: &str, value: &T) -> Result<(), ToolError> {
        let text = serde_json::to_string(value)?;
        set_raw(key, &text);
        Ok(())
    }

    /// The JSON text stored under `key`, undecoded.
    pub fn get_raw(key: &str) -> Option<String> {
        super::wit::get_state(key)
    }

    /// Stores JSON text under `key` as is; the host may reject text that is
    /// not JSON.
    pub fn set_raw(key: &str, json: &str) {
        super::wit::set_state(key, json);
    }
}

/// The dependency value the operator configured for this tool under `name`
/// (e.g. an API base URL), if any.
pub fn dependency(name: &str) -> Option<String> {
    wit::dependency(name)
}

/// Publishes an event named `name` with `payload` as JSON on the host's event
/// bus.
///
/// Fails only if `payload` cannot be represented as JSON.
pub fn emit<T: Serialize + ?Sized>(name: &str, payload: &T) -> Result<(), ToolError> {
    let text = serde_json::to_string(payload)?;
    wit::emit(name, &text);
    Ok(())
}

/// True once the call has been cancelled or its deadline has passed; a long
/// loop should check it and return early.
pub fn cancelled() -> bool {
    wit::cancelled()
}

/// Hands a sub-task to the host's agent named `agent` and returns its answer.
///
/// Works only inside an agent run (`wasm-agent run`, or the library's
/// `Agent`), and only for agents the tool's policy names
/// (`--allow-delegate NAME`); otherwise the error says which is missing.
pub fn delegate(agent: &str, input: &str) -> Result<String, ToolError> {
    wit::delegate(agent, input).map_err(ToolError::failed)
}
