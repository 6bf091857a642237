//! What loading a component checks before its tools are offered: its
//! name and prefix, its policy (validated and resolved off the async
//! workers), and, for an interpreter, that its policy fits scripts run in
//! segments.

use wasm_agent_policy::{Policy, ValidPolicy};

use super::{ComponentSource, HostError, LoadOptions};
use crate::specs;

/// Refuses what an interpreter's policy cannot keep across its scripts'
/// segments: questions to the person (each segment would ask again, and a
/// script's calls are where the person is asked), delegation, and an
/// instance kept between calls (a script keeps no instance).
pub(super) fn check_interpreter_policy(id: &str, policy: &ValidPolicy) -> Result<(), HostError> {
    let what = if !policy.ask.is_empty() {
        "have `ask` grants (grant the folders and hosts, or leave them out)"
    } else if !policy.delegate.is_empty() {
        "delegate to agents"
    } else if policy.keep_instance {
        "keep its instance between calls (keep_instance)"
    } else {
        return Ok(());
    };
    Err(HostError::Interpreter {
        component: id.to_string(),
        what,
    })
}

/// Runs blocking `work` on tokio's blocking pool; a panic in it resumes
/// here, and `None` means the runtime is shutting down.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Some(value),
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}

/// A component's id (its name, or its file's stem) and its tools' prefix.
pub(super) fn identify(
    source: &ComponentSource,
    options: &LoadOptions,
) -> Result<(String, String), HostError> {
    let default_name = || match source {
        ComponentSource::File(path) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "component".into()),
        ComponentSource::Bytes { name, .. } => name.clone(),
    };
    let id = options.name.clone().unwrap_or_else(default_name);
    let prefix = options.prefix.clone().unwrap_or_default();
    if !prefix.is_empty() && !specs::valid_name(&prefix) {
        return Err(HostError::BadName(format!(
            "prefix {prefix:?} may only contain [a-zA-Z0-9_-]"
        )));
    }
    Ok((id, prefix))
}

/// Validates `policy` and resolves it (reading folders and the environment,
/// on the blocking pool, never on an async worker).
pub(super) async fn resolve_policy(id: &str, policy: Policy) -> Result<ValidPolicy, HostError> {
    blocking(move || policy.validate_and_resolve())
        .await
        .ok_or_else(|| HostError::ShuttingDown(id.to_owned()))?
        .map_err(|reason| HostError::Policy {
            component: id.to_owned(),
            reason,
        })
}
