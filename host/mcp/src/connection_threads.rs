//! Threads that each serve their HTTP connections on a runtime of their own.
//!
//! On the shared runtime a connection's task moves between its threads from
//! one wake-up to the next, and a call it runs moves with it: its instance's
//! pages are cold in the other core's caches, and that core's activity makes
//! every page-table change of the instance's reset interrupt it (a Python
//! call cost 650 µs of CPU there against 460 µs on one thread). Here each
//! connection stays on one thread, which reads its requests, runs the calls
//! that finish in their first polls ([`run_here`](crate::run_here::run_here)), writes
//! the responses and frees the instances, as the stdio connection's thread
//! does. A call that waits or runs on goes to the shared runtime.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// One thread per core, each running the connections handed to it.
pub(crate) struct ConnectionThreads {
    runtimes: Vec<Handle>,
    next: AtomicUsize,
    /// Cancelled when these are dropped: each thread then drops its runtime,
    /// and with it the connections still on it.
    stop: CancellationToken,
}

impl ConnectionThreads {
    /// As many threads as this machine has cores. Where no thread can be
    /// started, connections stay on the current runtime.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::start(cores)
    }

    /// `count` threads (at least one), or none if none can be started.
    fn start(count: usize) -> Self {
        let stop = CancellationToken::new();
        let mut runtimes = Vec::new();
        for index in 0..count.max(1) {
            match spawn_thread(index, stop.clone()) {
                Ok(runtime) => runtimes.push(runtime),
                Err(error) => {
                    tracing::warn!(%error, "cannot start an HTTP connection thread");
                    break;
                }
            }
        }
        Self {
            runtimes,
            next: AtomicUsize::new(0),
            stop,
        }
    }

    /// The runtime of the next thread, in turn; the current runtime if no
    /// thread started.
    pub fn next(&self) -> Handle {
        if self.runtimes.is_empty() {
            return Handle::current();
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.runtimes.len();
        self.runtimes[index].clone()
    }
}

impl Drop for ConnectionThreads {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts thread `index`, running its runtime until `stop` is cancelled.
fn spawn_thread(index: usize, stop: CancellationToken) -> std::io::Result<Handle> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(format!("wasm-agent-http-{index}"))
        .spawn(move || {
            runtime.block_on(stop.cancelled());
            // A read may still block a thread of the runtime's own pool.
            runtime.shutdown_background();
        })?;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_go_to_the_threads_in_turn_and_end_with_them() {
        let threads = ConnectionThreads::start(2);
        let name = || std::thread::current().name().map(str::to_owned);
        let mut names = Vec::new();
        for _ in 0..4 {
            names.push(threads.next().spawn(async move { name() }).await.unwrap());
        }
        let expected = ["0", "1", "0", "1"].map(|i| Some(format!("wasm-agent-http-{i}")));
        assert_eq!(names, expected);

        let waiting = threads.next().spawn(std::future::pending::<()>());
        drop(threads);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(
            ended
                .expect("the task outlived its thread")
                .unwrap_err()
                .is_cancelled(),
            "a connection left on a stopped thread is dropped"
        );
    }
}
