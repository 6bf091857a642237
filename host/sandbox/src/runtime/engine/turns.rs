//! Fair sharing of the cores between short calls and long ones.
//!
//! A call that is still executing after [`SLICE_TICKS`] epoch ticks is
//! "long". From then on, it runs only while holding one of the turns, of which
//! there are as many as the cores less one: at every tick it hands its turn
//! back, yields, and queues (first come, first served) for the next. Long
//! calls therefore share all cores but one among themselves, however many
//! there are, and the last core stays free for the protocol, for fresh calls
//! and for host work, so a tool that loops never delays the others.
//!
//! A turn is held only while the call executes: a call that goes on to wait
//! in a host call (a sleep, an HTTP response) gives its turn back as soon as
//! its future is pending, so an idle long call never keeps a runnable one
//! waiting.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Ticks a call runs before it counts as long (with a 1 ms tick, 2-3 ms).
pub const SLICE_TICKS: u32 = 2;

/// The turns long calls take on the cores.
#[derive(Clone)]
pub struct Turns {
    turns: Arc<Semaphore>,
}

impl Turns {
    /// As many turns as the cores of this machine less one (at least one).
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(cores.saturating_sub(1).max(1))
    }

    /// `count` turns (at least one).
    pub fn new(count: usize) -> Self {
        Self {
            turns: Arc::new(Semaphore::new(count.max(1))),
        }
    }

    /// The turn-taking state of one call.
    pub fn for_call(&self) -> CallTurn {
        CallTurn {
            turns: self.turns.clone(),
            held: HeldTurn::default(),
            ticks: 0,
        }
    }
}

/// One call's ticks so far and the turn it holds, if any.
pub struct CallTurn {
    turns: Arc<Semaphore>,
    held: HeldTurn,
    ticks: u32,
}

/// The turn a call holds while it executes, if any.
#[derive(Clone, Default)]
pub struct HeldTurn(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl HeldTurn {
    fn release(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    fn hold(&self, permit: OwnedSemaphorePermit) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(permit);
    }

    /// Wraps the future that runs the call so the turn is handed back
    /// whenever that future waits, and when it is dropped.
    pub fn releasing<F: Future>(&self, call: F) -> ReleaseWhenPending<F> {
        ReleaseWhenPending {
            call: Box::pin(call),
            held: self.clone(),
        }
    }
}

impl CallTurn {
    /// Counts a tick. `None` while the call is short (it just yields);
    /// afterwards the future to yield to, which gives back the turn held,
    /// lets others run and queues for the next turn.
    pub fn tick(&mut self) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
        self.ticks = self.ticks.saturating_add(1);
        if self.ticks < SLICE_TICKS {
            return None;
        }
        let (turns, held) = (self.turns.clone(), self.held.clone());
        Some(Box::pin(async move {
            held.release();
            tokio::task::yield_now().await;
            // The semaphore is never closed, so acquiring only waits.
            if let Ok(permit) = turns.acquire_owned().await {
                held.hold(permit);
            }
        }))
    }

    /// The turn this call holds, to release around its future.
    pub fn held(&self) -> HeldTurn {
        self.held.clone()
    }
}

/// A call's future that gives back its turn each time it is pending.
pub struct ReleaseWhenPending<F> {
    call: Pin<Box<F>>,
    held: HeldTurn,
}

impl<F: Future> Future for ReleaseWhenPending<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let polled = self.call.as_mut().poll(cx);
        if polled.is_pending() {
            self.held.release();
        }
        polled
    }
}

impl<F> Drop for ReleaseWhenPending<F> {
    fn drop(&mut self) {
        self.held.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_short_call_never_queues_for_a_turn() {
        let turns = Turns::new(1);
        let mut call = turns.for_call();
        for _ in 1..SLICE_TICKS {
            assert!(call.tick().is_none());
        }
        assert!(call.tick().is_some());
    }

    #[tokio::test]
    async fn long_calls_wait_for_a_turn_and_hand_it_back_when_pending() {
        let turns = Turns::new(1);
        let (mut first, mut second) = (turns.for_call(), turns.for_call());
        for _ in 1..SLICE_TICKS {
            first.tick();
            second.tick();
        }
        first.tick().unwrap().await;
        assert_eq!(
            turns.turns.available_permits(),
            0,
            "the first holds the turn"
        );
        let waiting = second.tick().unwrap();
        let waiting = tokio::spawn(waiting);
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second waits for the turn");

        // The first call's future goes pending (a host call): the turn is free.
        let mut pending = std::pin::pin!(first.held().releasing(std::future::pending::<()>()));
        assert!(futures_poll_once(pending.as_mut()).is_pending());
        waiting.await.unwrap();
        assert!(
            second.held.0.lock().unwrap().is_some(),
            "the second has it now"
        );
    }

    fn futures_poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        let waker = std::task::Waker::noop();
        future.poll(&mut Context::from_waker(waker))
    }
}
