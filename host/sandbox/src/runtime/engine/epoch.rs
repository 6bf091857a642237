//! One ticker thread advances the engine's epoch while calls are running.
//!
//! Each store sets its own deadline and checks the wall clock on every tick, so
//! one call's timeout never interrupts another; between ticks a running guest
//! yields to the async runtime, so a looping tool never starves other calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while any call runs.
pub const TICK: Duration = Duration::from_millis(1);
/// The ticker keeps ticking this long after the last call before it parks,
/// so back-to-back calls do not pay for waking it.
const IDLE_TICKS_BEFORE_PARKING: u32 = 100;

#[derive(Default)]
struct Shared {
    active: AtomicUsize,
    stop: AtomicBool,
    /// Epoch increments so far.
    ticks: AtomicU64,
}

/// The epoch ticker; stops its thread when dropped.
pub struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps the ticker running while a call is in flight.
pub struct ActiveCall {
    shared: Arc<Shared>,
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
                let mut idle_ticks = 0;
                while !thread_shared.stop.load(Ordering::Acquire) {
                    if thread_shared.active.load(Ordering::Acquire) == 0 {
                        if idle_ticks >= IDLE_TICKS_BEFORE_PARKING {
                            // Parked until a call starts (or the ticker stops):
                            // an idle host never wakes.
                            std::thread::park();
                            continue;
                        }
                        idle_ticks += 1;
                    } else {
                        idle_ticks = 0;
                    }
                    std::thread::sleep(TICK);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    thread_shared.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Marks a call as running until the returned guard is dropped.
    pub fn activate(&self) -> ActiveCall {
        self.shared.active.fetch_add(1, Ordering::AcqRel);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        ActiveCall {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::AcqRel);
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

    #[test]
    fn ticks_while_a_call_runs_and_parks_once_idle() {
        let engine = Engine::default();
        let ticker = EpochTicker::start(&engine).expect("ticker");
        let call = ticker.activate();
        std::thread::sleep(TICK * 20);
        assert!(ticks(&ticker) > 0, "no tick while a call ran");
        drop(call);
        // The idle ticks, with room to spare on a busy machine.
        std::thread::sleep(TICK * IDLE_TICKS_BEFORE_PARKING * 3);
        let parked = ticks(&ticker);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(ticks(&ticker), parked, "an idle ticker kept ticking");
        let _call = ticker.activate();
        std::thread::sleep(TICK * 20);
        assert!(
            ticks(&ticker) > parked,
            "a new call did not wake the ticker"
        );
    }
}
