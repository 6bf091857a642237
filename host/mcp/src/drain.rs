//! Graceful stop: once a stop begins, new calls are refused and the calls in
//! flight get a grace period to finish and send their results.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a stop waits for calls in flight (SIGTERM, Ctrl-C).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// After the last call of a stop returned, how long its result has to pass
/// through the protocol layer to the transport before connections close.
const RESULT_FLUSH: Duration = Duration::from_millis(100);

/// Counts the calls in flight of one server, and stops it gracefully.
#[derive(Clone, Debug, Default)]
pub struct Drain {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    calls: AtomicUsize,
    stopping: AtomicBool,
    idle: Notify,
}

/// One call in flight; dropping it ends the call.
#[derive(Debug)]
pub struct InFlight {
    inner: Arc<Inner>,
}

impl Drain {
    /// Counts a new call in, unless a stop has begun.
    pub fn begin_call(&self) -> Option<InFlight> {
        self.inner.calls.fetch_add(1, Ordering::SeqCst);
        if self.inner.stopping.load(Ordering::SeqCst) {
            drop(InFlight {
                inner: self.inner.clone(),
            });
            return None;
        }
        Some(InFlight {
            inner: self.inner.clone(),
        })
    }

    /// Whether a stop has begun (new calls are refused).
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// Refuses new calls from now on, without waiting for those in flight
    /// (readiness goes false at once; [`stop`](Self::stop) then waits).
    pub fn begin_stop(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.inner.calls.load(Ordering::SeqCst)
    }

    /// Refuses new calls and waits until the calls in flight have finished
    /// (and their results had a moment to reach the transport), or `grace`
    /// has passed; returns whether they all finished.
    pub async fn stop(&self, grace: Duration) -> bool {
        self.inner.stopping.store(true, Ordering::SeqCst);
        let busy = self.in_flight() > 0;
        let finished = async {
            loop {
                let idle = self.inner.idle.notified();
                if self.in_flight() == 0 {
                    return;
                }
                idle.await;
            }
        };
        let done = tokio::time::timeout(grace, finished).await.is_ok();
        if done && busy {
            tokio::time::sleep(RESULT_FLUSH).await;
        }
        if !done {
            tracing::warn!(
                calls = self.in_flight(),
                "calls still running after {grace:?}; stopping anyway"
            );
        }
        done
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.inner.calls.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_waits_for_calls_and_refuses_new_ones() {
        let drain = Drain::default();
        let call = drain.begin_call().unwrap();
        let stopping = tokio::spawn({
            let drain = drain.clone();
            async move { drain.stop(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            drain.begin_call().is_none(),
            "a new call got in during the stop"
        );
        assert!(!stopping.is_finished());
        drop(call);
        assert!(stopping.await.unwrap());
        assert_eq!(drain.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_stop_gives_up_after_the_grace() {
        let drain = Drain::default();
        let _stuck = drain.begin_call().unwrap();
        assert!(!drain.stop(Duration::from_millis(30)).await);
    }
}
