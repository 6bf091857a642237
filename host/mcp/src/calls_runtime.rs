//! The runtime that runs a server's calls which outlive their request.
//!
//! A connection's own thread (stdio's, or one of HTTP's few) runs a call
//! while it only yields; a call that waits or runs on, a call held while
//! its question is asked, and rmcp's tasks go to this runtime instead, so
//! that nothing long ever shares a connection's thread. It is the runtime
//! the server was last served from (`serve_*` runs on the embedder's
//! runtime, never on a connection's thread), else the one it was built on.

use std::future::Future;
use std::sync::{PoisonError, RwLock};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// See the [module](self).
pub(crate) struct CallsRuntime(RwLock<Option<Handle>>);

impl CallsRuntime {
    /// The current runtime, if the server is being built on one.
    pub(crate) fn new() -> Self {
        Self(RwLock::new(Handle::try_current().ok()))
    }

    /// Makes the current runtime this server's calls runtime, as a way of
    /// serving it starts, and returns it.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as every `serve_*` would.
    pub(crate) fn serve_here(&self) -> Handle {
        let here = Handle::current();
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(here.clone());
        here
    }

    /// Spawns `task` on the calls runtime (on the current one if the server
    /// was neither built nor served on a runtime).
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let calls = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match calls {
            Some(runtime) => runtime.spawn(task),
            None => tokio::spawn(task),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn thread_name() -> Option<String> {
        std::thread::current().name().map(str::to_owned)
    }

    #[test]
    fn calls_go_to_the_runtime_served_from_not_a_connections_thread() {
        // Built outside any runtime, as an embedder may.
        let calls = CallsRuntime::new();
        let connection = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ran_on = |calls: &CallsRuntime| {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| connection.block_on(async { calls.spawn(thread_name()).await }))
                    .join()
                    .unwrap()
                    .unwrap()
            })
        };
        assert_eq!(ran_on(&calls), None, "not served yet: the current runtime");

        let serving = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("serving")
            .build()
            .unwrap();
        serving.block_on(async { calls.serve_here() });
        assert_eq!(ran_on(&calls).as_deref(), Some("serving"));
    }
}
