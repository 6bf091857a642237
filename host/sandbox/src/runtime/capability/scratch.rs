//! `scratch`: a fresh, empty read-write folder for one call, preopened at
//! [`GUEST_PATH`] and removed when the call ends.
//!
//! It lives under the host's temporary folder with a random name, so no two
//! calls (or sessions) ever share one. Writes into it count against the
//! call's `max_write` like any read-write grant, which also bounds how many
//! entries its removal has to delete; the removal runs on the blocking pool.

use std::path::Path;
use std::sync::Arc;

use wasm_agent_policy::ValidPolicy;
use wasmtime::component::Linker;

use super::{Capability, Preparing};
use crate::result::{CallError, ErrorKind};
use crate::runtime::store::CallState;

/// Where the tool sees its scratch folder.
pub const GUEST_PATH: &str = "/scratch";

/// One call's scratch folder, when its policy grants one; removed on drop.
#[derive(Debug)]
pub struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    /// Creates a new, empty folder.
    pub fn create() -> std::io::Result<Self> {
        let folder = tempfile::Builder::new()
            .prefix("wasm-agent-scratch-")
            .tempdir()?;
        Ok(Self(Some(folder)))
    }

    /// The folder on the host, if the call has one.
    pub fn path(&self) -> Option<&Path> {
        self.0.as_ref().map(|folder| folder.path())
    }
}

impl Capability for Scratch {
    /// Whether the policy grants one (`scratch = true`).
    type Config = bool;

    fn link(_: &mut Linker<CallState>) -> wasmtime::Result<()> {
        // The WASI context preopens it.
        Ok(())
    }

    fn configure(policy: &Arc<ValidPolicy>) -> bool {
        policy.scratch
    }

    fn prepare(granted: &bool, _: &Preparing<'_>) -> Result<Self, CallError> {
        if !granted {
            return Ok(Self(None));
        }
        Self::create().map_err(|e| {
            CallError::new(
                ErrorKind::CapabilityDenied,
                format!("the host cannot create the call's scratch folder: {e}"),
            )
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(folder) = self.0.take() else { return };
        let remove = move || {
            let path = folder.path().to_path_buf();
            if let Err(error) = folder.close() {
                tracing::warn!(
                    target: "wasm_agent::sandbox",
                    "cannot remove the scratch folder {}: {error}",
                    path.display()
                );
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_folder_is_new_and_removed_on_drop() {
        let (one, two) = (Scratch::create().unwrap(), Scratch::create().unwrap());
        assert_ne!(one.path(), two.path());
        let path = one.path().unwrap().to_path_buf();
        std::fs::write(path.join("file"), b"x").unwrap();
        std::fs::create_dir(path.join("sub")).unwrap();
        drop(one);
        assert!(!path.exists());
    }
}
