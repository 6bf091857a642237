//! Keeping the pages a call writes resident in its memory slot.
//!
//! When a pooled instance is freed, wasmtime 48 resets its memory: a
//! `PAGEMAP_SCAN` finds the pages written, the image is copied back over the
//! first 32 runs of them, and everything after the 32nd run is decommitted.
//! Those pages fault again on the slot's next call. An interpreter writes
//! many small runs (a CPython call ~74 over its 12 MiB image), so each of its
//! calls faulted some 90 pages back in, and the memory it had only read was
//! dropped with them.
//!
//! A pass, run off the calls' path now and then, finds the slots whose
//! written pages form more than [`RUNS`] runs and populates the smallest
//! gaps between runs for writing (`MADV_POPULATE_WRITE`: a private copy of
//! the same bytes, never a change to what the guest sees), so that they form
//! at most [`RUNS`]. The reset then keeps every written page, and the next
//! call in the slot faults none. A slot's written pages, filled gaps with
//! them, stay within [`RESIDENT_BYTES`]: every page kept is copied back at
//! each reset.
//!
//! A pass sees a slot's whole pattern only while the call that wrote it is
//! being freed (the reset then cuts it short), so a pass runs as a call is
//! freed: after the first call, then about every [`EVERY`] calls (spread, so
//! that calls taking turns over slots each meet one) while passes find
//! work, and ever more rarely (up to about every [`EVERY_MOST`]) while they
//! do not; one pass runs at a time.
//!
//! Only this process's own memory slots are touched: the read-write private
//! mappings around a memory image (a compiled component's `.cwasm` or
//! wasmtime's `wasm-memory-image`). Where the kernel lacks either call, the
//! pass does nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Runs of written pages a slot is brought down to (wasmtime keeps 32).
const RUNS: usize = 28;
/// Bytes a slot's written pages and filled gaps may come to: the reset
/// keeps up to 2 MiB resident and decommits past that, so this leaves 32
/// pages for a call that writes a little more than the last.
const RESIDENT_BYTES: u64 = 1920 * 1024;
/// Calls between passes while passes find work.
const EVERY: u64 = 64;
/// Calls between passes at most, while they find none.
const EVERY_MOST: u64 = 1 << 16;

/// When the next pass is due, counted in calls freed.
pub(in crate::runtime) struct Residency {
    freed: AtomicU64,
    next: AtomicU64,
    every: AtomicU64,
    running: AtomicBool,
}

impl Default for Residency {
    fn default() -> Self {
        Self {
            freed: AtomicU64::new(0),
            next: AtomicU64::new(1),
            every: AtomicU64::new(EVERY),
            running: AtomicBool::new(false),
        }
    }
}

impl Residency {
    /// Counts a call freed; the pass due (when none runs), which the caller
    /// then runs before the call's store is dropped.
    pub fn due(self: &Arc<Self>) -> Option<Pass> {
        let freed = self.freed.fetch_add(1, Ordering::Relaxed) + 1;
        if freed < self.next.load(Ordering::Relaxed) || self.running.swap(true, Ordering::Acquire) {
            return None;
        }
        // The turn is ours; a pass that ended meanwhile may have moved the
        // next one further (then this turn is given back as it drops).
        let turn = Pass(self.clone());
        (freed >= self.next.load(Ordering::Relaxed)).then_some(turn)
    }

    /// Coalesces every slot's written pages, and sets when the next pass is
    /// due.
    fn pass(&self) {
        let began = std::time::Instant::now();
        let filled = sys::coalesce_slots();
        tracing::debug!(
            filled,
            took_us = began.elapsed().as_micros() as u64,
            "memory slots' written pages joined"
        );
        let every = match filled {
            0 => (self.every.load(Ordering::Relaxed) * 2).min(EVERY_MOST),
            _ => EVERY,
        };
        self.every.store(every, Ordering::Relaxed);
        let freed = self.freed.load(Ordering::Relaxed);
        self.next
            .store(freed + spread(freed, every), Ordering::Relaxed);
    }
}

/// A pass due, to [`run`](Pass::run); one dropped unrun (its runtime shut
/// down first, say) lets the next call freed run it instead.
pub(in crate::runtime) struct Pass(Arc<Residency>);

impl Pass {
    /// Runs the pass.
    pub fn run(self) {
        self.0.pass();
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// Calls until the next pass: `every` on average, but spread over
/// `every / 2 ..= every * 3 / 2` by `freed`, so that a pass does not always
/// find the same slot freeing its instance (calls taking turns over slots).
fn spread(freed: u64, every: u64) -> u64 {
    let mixed = freed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    every / 2 + mixed % (every + 1)
}

/// The gaps to fill between `runs` (sorted `[start, end)` byte ranges) for
/// them to form at most [`RUNS`], smallest first, while all come to no more
/// than [`RESIDENT_BYTES`].
fn gaps_to_fill(runs: &[(u64, u64)]) -> Vec<(u64, u64)> {
    if runs.len() <= RUNS {
        return Vec::new();
    }
    let mut gaps: Vec<(u64, u64)> = runs.windows(2).map(|w| (w[0].1, w[1].0)).collect();
    gaps.sort_by_key(|(from, to)| to - from);
    gaps.truncate(runs.len() - RUNS);
    let mut bytes: u64 = runs.iter().map(|(from, to)| to - from).sum();
    gaps.into_iter()
        .take_while(|(from, to)| {
            bytes += to - from;
            bytes <= RESIDENT_BYTES
        })
        .collect()
}

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod slots;
#[cfg(target_os = "linux")]
use linux as sys;

#[cfg(not(target_os = "linux"))]
mod sys {
    /// No pass where the kernel cannot tell which pages were written.
    pub(super) fn coalesce_slots() -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn runs(count: u64, gap_pages: impl Fn(u64) -> u64) -> Vec<(u64, u64)> {
        let mut at = 0;
        (0..count)
            .map(|i| {
                let run = (at, at + PAGE);
                at += PAGE * (1 + gap_pages(i));
                run
            })
            .collect()
    }

    #[test]
    fn one_pass_runs_at_a_time_and_one_dropped_unrun_is_due_again() {
        // Not run here: a pass scans this process's slots, which another
        // test maps and checks.
        let residency = Arc::new(Residency::default());
        let first = residency.due().expect("a pass after the first call");
        assert!(residency.due().is_none(), "a second pass while one is due");
        drop(first);
        assert!(
            residency.due().is_some(),
            "due again once the first was dropped unrun"
        );
    }

    #[test]
    fn passes_are_spread_around_their_interval() {
        let gaps: Vec<u64> = (1..200).map(|freed| spread(freed, EVERY)).collect();
        assert!(
            gaps.iter()
                .all(|&gap| (EVERY / 2..=EVERY * 3 / 2).contains(&gap))
        );
        let odd = gaps.iter().filter(|&&gap| gap % 2 == 1).count();
        assert!((50..150).contains(&odd), "{odd} of 199 odd");
    }

    #[test]
    fn few_runs_are_left_as_they_are() {
        assert!(gaps_to_fill(&runs(RUNS as u64, |_| 3)).is_empty());
    }

    #[test]
    fn the_smallest_gaps_are_filled_until_the_runs_are_few() {
        // Every other gap is one page; the rest are ten.
        let written = runs(40, |i| if i % 2 == 0 { 1 } else { 10 });
        let gaps = gaps_to_fill(&written);
        assert_eq!(gaps.len(), 40 - RUNS);
        assert!(gaps.iter().all(|(from, to)| to - from == PAGE));
    }

    #[test]
    fn a_slot_s_pages_stay_within_what_a_reset_keeps() {
        // 100 written pages, 50 apart.
        let written = runs(100, |_| 50);
        let gaps = gaps_to_fill(&written);
        let filled: u64 = gaps.iter().map(|(from, to)| to - from).sum();
        assert!(100 * PAGE + filled <= RESIDENT_BYTES, "{filled}");
        assert_eq!(gaps.len(), ((RESIDENT_BYTES / PAGE - 100) / 50) as usize);
        // Already at the bound: nothing is filled.
        let at_the_bound = RESIDENT_BYTES / PAGE;
        assert!(gaps_to_fill(&runs(at_the_bound, |_| 1)).is_empty());
    }
}
