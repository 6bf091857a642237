//! One ticker thread advances the engine's epoch while calls are running.
//!
//! Each store sets its own deadline and checks the wall clock on every tick, so
//! one call's timeout never interrupts another; between ticks a running guest
//! yields to the async runtime, so a looping tool never starves other calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
                        idle_ticks += 1;
                        if idle_ticks > IDLE_TICKS_BEFORE_PARKING {
                            std::thread::park_timeout(Duration::from_millis(250));
                            idle_ticks = 0;
                            continue;
                        }
                    } else {
                        idle_ticks = 0;
                    }
                    std::thread::sleep(TICK);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
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
