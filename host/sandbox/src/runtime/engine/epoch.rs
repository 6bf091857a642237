//! One ticker thread advances the engine's epoch while calls are running.
//!
//! Each store sets its own deadline and checks the wall clock on every tick, so
//! one call's timeout never interrupts another; between ticks a running guest
//! yields to the async runtime, so a looping tool never starves other calls.
//!
//! Only a call still running a tick after it started needs the epoch to move:
//! most calls end within a fraction of one. So the ticker counts the calls of
//! each tick's period, and while no call has run on from an earlier period it
//! sleeps longer, up to [`LONGEST_SLEEP`], rather than waking a core every
//! [`TICK`] (each wake-up of a thread costs some 20 µs of CPU on a virtual
//! machine). A call that runs on gets its first tick within that sleep and
//! one every [`TICK`] after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while a call runs on.
pub const TICK: Duration = Duration::from_millis(1);
/// The ticker's longest sleep while every call running started since its
/// last wake-up (or none runs).
const LONGEST_SLEEP: Duration = Duration::from_millis(4);
/// The ticker keeps waking this long after the last call before it parks,
/// so back-to-back calls do not pay for waking it.
const IDLE_BEFORE_PARKING: Duration = Duration::from_millis(100);

/// The bits of [`Shared::state`] counting the calls of the current period.
const COUNT: u64 = u32::MAX as u64;

#[derive(Default)]
struct Shared {
    /// The current period (upper 32 bits) and how many calls that started
    /// in it are running (lower 32 bits).
    state: AtomicU64,
    /// Calls running that started in an earlier period (wrapping: a call of
    /// an earlier period may end before the ticker adds it here).
    older: AtomicU64,
    stop: AtomicBool,
    /// Epoch increments so far.
    ticks: AtomicU64,
    /// The ticker's wake-ups so far.
    wakes: AtomicU64,
}

impl Shared {
    /// Starts a new period; whether any call has run on since before the
    /// last one began, and whether any is running at all.
    fn next_period(&self) -> (bool, bool) {
        let previous = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                Some((state & !COUNT).wrapping_add(COUNT + 1))
            })
            .unwrap_or_else(|state| state);
        // Calls of the period that ended are older now; those older before
        // it have run since the wake-up before this one.
        let young = previous & COUNT;
        let older = self.older.fetch_add(young, Ordering::AcqRel);
        (older != 0, older.wrapping_add(young) != 0)
    }
}

/// The epoch ticker; stops its thread when dropped.
pub struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps the ticker running while a call is in flight.
pub struct ActiveCall {
    shared: Arc<Shared>,
    /// The period the call started in.
    period: u64,
}

impl EpochTicker {
    /// Starts the ticker thread for `engine`; it sleeps while no call runs.
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let engine = engine.weak();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-agent-epoch".into())
            .spawn(move || {
                let mut sleep = TICK;
                let mut idle = Duration::ZERO;
                while !thread_shared.stop.load(Ordering::Acquire) {
                    std::thread::sleep(sleep);
                    thread_shared.wakes.fetch_add(1, Ordering::Relaxed);
                    let (ran_on, running) = thread_shared.next_period();
                    if ran_on {
                        match engine.upgrade() {
                            Some(engine) => engine.increment_epoch(),
                            None => break,
                        }
                        thread_shared.ticks.fetch_add(1, Ordering::Relaxed);
                    }
                    idle = if running {
                        Duration::ZERO
                    } else {
                        idle + sleep
                    };
                    sleep = if running {
                        TICK
                    } else {
                        (sleep * 2).min(LONGEST_SLEEP)
                    };
                    if idle >= IDLE_BEFORE_PARKING {
                        // Parked until a call starts (or the ticker stops):
                        // an idle host never wakes.
                        std::thread::park();
                        (sleep, idle) = (TICK, Duration::ZERO);
                    }
                }
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Marks a call as running until the returned guard is dropped.
    pub fn activate(&self) -> ActiveCall {
        let state = self.shared.state.fetch_add(1, Ordering::AcqRel);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        ActiveCall {
            shared: self.shared.clone(),
            period: state & !COUNT,
        }
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        let shared = &self.shared;
        let mut state = shared.state.load(Ordering::Acquire);
        // Counted in its own period while that lasts, else among the older.
        while state & !COUNT == self.period {
            match shared.state.compare_exchange_weak(
                state,
                state - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
        shared.older.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(ticker: &EpochTicker) -> u64 {
        ticker.shared.ticks.load(Ordering::Relaxed)
    }

    fn wakes(ticker: &EpochTicker) -> u64 {
        ticker.shared.wakes.load(Ordering::Relaxed)
    }

    /// Calls that each end at once, for `long`.
    fn short_calls(ticker: &EpochTicker, long: Duration) {
        let began = std::time::Instant::now();
        while began.elapsed() < long {
            drop(ticker.activate());
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    #[test]
    fn a_call_that_runs_on_is_ticked_and_short_ones_are_not() {
        let engine = Engine::default();
        let ticker = EpochTicker::start(&engine).expect("ticker");
        // Short calls: no tick, and the ticker wakes every few ticks at
        // most (a busy machine only makes its sleeps longer). A short call
        // ticks only if this thread is preempted for a tick inside it: a few
        // at most, where a ticker ticking while calls come gives about 60.
        short_calls(&ticker, TICK * 60);
        assert!(
            ticks(&ticker) <= 10,
            "{} ticks of short calls",
            ticks(&ticker)
        );
        let woken = wakes(&ticker);
        short_calls(&ticker, TICK * 60);
        let woken = wakes(&ticker) - woken;
        assert!(woken <= 30, "woke {woken} times in 60 ticks of short calls");
        // A call that runs on, starting while the ticker sleeps long.
        let call = ticker.activate();
        std::thread::sleep(LONGEST_SLEEP + TICK * 20);
        let ticked = ticks(&ticker);
        assert!(ticked >= 5, "{ticked} ticks of a call running on");
        drop(call);
    }

    #[test]
    fn parks_once_idle_and_wakes_for_a_call() {
        let engine = Engine::default();
        let ticker = EpochTicker::start(&engine).expect("ticker");
        drop(ticker.activate());
        // The idle wake-ups, with room to spare on a busy machine.
        std::thread::sleep(IDLE_BEFORE_PARKING * 3);
        let parked = wakes(&ticker);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(wakes(&ticker), parked, "an idle ticker kept waking");
        let _call = ticker.activate();
        std::thread::sleep(TICK * 20);
        assert!(ticks(&ticker) > 0, "a new call did not wake the ticker");
    }

    #[test]
    fn a_call_ending_in_a_later_period_is_counted_out_there() {
        let shared = Shared::default();
        let ticker = EpochTicker {
            shared: Arc::new(shared),
            thread: None,
        };
        let early = ticker.activate();
        assert_eq!(ticker.shared.next_period(), (false, true));
        let late = ticker.activate();
        assert_eq!(ticker.shared.next_period(), (true, true));
        drop(early);
        assert_eq!(ticker.shared.next_period(), (true, true));
        drop(late);
        assert_eq!(ticker.shared.next_period(), (false, false));
    }
}
