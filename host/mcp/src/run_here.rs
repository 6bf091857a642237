//! Running a call on the stdio connection's thread while it only yields.
//!
//! A running guest yields at each epoch tick (1 ms), so a call of a few
//! hundred microseconds often crosses one. Handed to a task of its own
//! there, it would go on, and free its instance, on whichever runtime thread
//! takes that task: another core, whose caches hold none of the instance's
//! pages, and whose activity makes every page-table change of the reset
//! interrupt it. Polled again where it started, it stays on one core.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How long a call that keeps yielding is polled where it started before it
/// gets a task of its own.
pub(crate) const RUN_HERE: Duration = Duration::from_millis(1);
/// Polls of a call where it started, at most.
pub(crate) const POLLS_HERE: usize = 3;

/// Polls `call` until it is done, waits for something (it returned pending
/// without waking itself), or has yielded for [`RUN_HERE`]; pending unless
/// it is done.
pub(crate) fn run_here<F: Future + ?Sized>(mut call: Pin<&mut F>) -> Poll<F::Output> {
    let woken = Arc::new(Woken::default());
    let waker = Waker::from(woken.clone());
    let mut context = Context::from_waker(&waker);
    let started = Instant::now();
    for _ in 0..POLLS_HERE {
        woken.0.store(false, Ordering::Relaxed);
        if let Poll::Ready(output) = call.as_mut().poll(&mut context) {
            return Poll::Ready(output);
        }
        if !woken.0.load(Ordering::Relaxed) || started.elapsed() >= RUN_HERE {
            break;
        }
    }
    Poll::Pending
}

/// Whether a future woke itself while [`run_here`] polled it.
#[derive(Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;

    /// A future that is pending `yields` times, waking itself each time
    /// (as a guest does at an epoch tick) unless it `waits`, then done.
    fn yielding(yields: usize, waits: bool) -> impl Future<Output = usize> {
        let mut left = yields;
        std::future::poll_fn(move |context| {
            if left == 0 {
                return Poll::Ready(yields);
            }
            left -= 1;
            if !waits {
                context.waker().wake_by_ref();
            }
            Poll::Pending
        })
    }

    #[test]
    fn a_call_that_yields_at_a_tick_finishes_where_it_started() {
        assert_eq!(run_here(pin!(yielding(0, false))), Poll::Ready(0));
        assert_eq!(
            run_here(pin!(yielding(POLLS_HERE - 1, false))),
            Poll::Ready(POLLS_HERE - 1)
        );
    }

    #[test]
    fn a_call_that_waits_or_keeps_yielding_gets_a_task_of_its_own() {
        assert_eq!(run_here(pin!(yielding(1, true))), Poll::Pending);
        assert_eq!(run_here(pin!(yielding(POLLS_HERE, false))), Poll::Pending);
        // Running for `RUN_HERE` ends the polls here after one yield.
        let mut polls = 0;
        let running = std::future::poll_fn(|context| {
            polls += 1;
            std::thread::sleep(RUN_HERE);
            context.waker().wake_by_ref();
            Poll::<()>::Pending
        });
        assert_eq!(run_here(pin!(running)), Poll::Pending);
        assert_eq!(polls, 1);
    }
}
