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
mod sys {
    //! The pass on Linux: slots from `/proc/self/maps`, written pages from
    //! `PAGEMAP_SCAN` (Linux 6.7), gaps filled with `MADV_POPULATE_WRITE`
    //! (Linux 5.14).

    use std::fs::File;
    use std::os::fd::AsRawFd;

    /// `struct pm_scan_arg` of `linux/fs.h`.
    #[repr(C)]
    #[derive(Default)]
    struct ScanArg {
        size: u64,
        flags: u64,
        start: u64,
        end: u64,
        walk_end: u64,
        vec: u64,
        vec_len: u64,
        max_pages: u64,
        category_inverted: u64,
        category_mask: u64,
        category_anyof_mask: u64,
        return_mask: u64,
    }

    /// `struct page_region` of `linux/fs.h`.
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct PageRegion {
        start: u64,
        end: u64,
        categories: u64,
    }

    const PAGE_IS_WRITTEN: u64 = 1 << 1;
    const PAGE_IS_FILE: u64 = 1 << 2;
    const PAGE_IS_PRESENT: u64 = 1 << 3;
    const PAGE_IS_PFNZERO: u64 = 1 << 5;
    /// `_IOWR('f', 16, struct pm_scan_arg)`.
    const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
    /// Runs one scan reports at most.
    const MAX_RUNS: usize = 512;

    /// Coalesces the written pages of every memory slot; the slots filled.
    pub(super) fn coalesce_slots() -> usize {
        let Ok(pagemap) = File::open("/proc/self/pagemap") else {
            return 0;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return 0;
        };
        let mut runs = vec![PageRegion::default(); MAX_RUNS];
        let mut filled = 0;
        for slot in slots(&maps) {
            let Some(written) = written_runs(&pagemap, slot, &mut runs) else {
                continue;
            };
            let gaps = super::gaps_to_fill(&written);
            for &(from, to) in &gaps {
                // SAFETY: populating for writing changes no byte of the
                // range (it makes private copies of the pages mapped there);
                // a range unmapped meanwhile fails, which is ignored.
                unsafe {
                    libc::madvise(
                        from as *mut libc::c_void,
                        (to - from) as usize,
                        libc::MADV_POPULATE_WRITE,
                    )
                };
            }
            filled += usize::from(!gaps.is_empty());
        }
        filled
    }

    /// The runs of pages written in `slot` (as wasmtime's reset finds
    /// them), when the kernel can tell.
    fn written_runs(
        pagemap: &File,
        (start, end): (u64, u64),
        runs: &mut [PageRegion],
    ) -> Option<Vec<(u64, u64)>> {
        let mut arg = ScanArg {
            size: std::mem::size_of::<ScanArg>() as u64,
            start,
            end,
            vec: runs.as_mut_ptr() as u64,
            vec_len: runs.len() as u64,
            category_inverted: PAGE_IS_PFNZERO | PAGE_IS_FILE,
            category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_PFNZERO | PAGE_IS_FILE,
            ..ScanArg::default()
        };
        // SAFETY: `arg` describes `runs`, which the kernel fills with at
        // most `vec_len` regions; the scan only reads page tables.
        let found = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
        let found = usize::try_from(found).ok()?;
        Some(runs[..found].iter().map(|r| (r.start, r.end)).collect())
    }

    /// The memory slots holding a memory image: the read-write private
    /// mappings adjacent to one mapped from a `.cwasm` or wasmtime's memfd.
    fn slots(maps: &str) -> Vec<(u64, u64)> {
        let mappings: Vec<Mapping> = maps.lines().filter_map(Mapping::parse).collect();
        let mut slots = Vec::new();
        let mut at = 0;
        while at < mappings.len() {
            if !mappings[at].writable {
                at += 1;
                continue;
            }
            let mut end = at;
            while end + 1 < mappings.len()
                && mappings[end + 1].writable
                && mappings[end + 1].start == mappings[end].end
            {
                end += 1;
            }
            let run = &mappings[at..=end];
            if run.iter().any(|m| m.image) {
                slots.push((run[0].start, run[run.len() - 1].end));
            }
            at = end + 1;
        }
        slots
    }

    /// One line of `/proc/self/maps`.
    struct Mapping {
        start: u64,
        end: u64,
        /// Private, readable and writable.
        writable: bool,
        /// Mapped from a memory image.
        image: bool,
    }

    impl Mapping {
        fn parse(line: &str) -> Option<Self> {
            let mut fields = line.split_ascii_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let path = line.find(" /").map_or("", |at| &line[at + 1..]);
            let path = path.trim_end().trim_end_matches(" (deleted)");
            Some(Self {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                writable: perms == "rw-p",
                image: path.ends_with(".cwasm") || path == "/memfd:wasm-memory-image",
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use std::io::Write as _;

        use super::*;

        /// The machine's page size.
        fn page_size() -> usize {
            // SAFETY: `sysconf` only reads a system setting.
            unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
        }

        /// A memory image's shape, mapped as wasmtime maps one: a private,
        /// writable mapping of a `.cwasm` file, each page holding its own
        /// number.
        struct Image {
            at: *mut u8,
            pages: usize,
            _file: tempfile::NamedTempFile,
        }

        impl Image {
            fn map(pages: usize) -> Self {
                let mut file = tempfile::Builder::new()
                    .suffix(".cwasm")
                    .tempfile()
                    .unwrap();
                for page in 0..pages {
                    file.write_all(&vec![page as u8; page_size()]).unwrap();
                }
                file.flush().unwrap();
                // SAFETY: a new private mapping of a file this test owns.
                let at = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        pages * page_size(),
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE,
                        file.as_file().as_raw_fd(),
                        0,
                    )
                };
                assert_ne!(at, libc::MAP_FAILED);
                Self {
                    at: at.cast(),
                    pages,
                    _file: file,
                }
            }

            fn runs(&self, pagemap: &File) -> Vec<(u64, u64)> {
                let start = self.at as u64;
                let end = start + (self.pages * page_size()) as u64;
                let mut runs = vec![PageRegion::default(); MAX_RUNS];
                written_runs(pagemap, (start, end), &mut runs).expect("PAGEMAP_SCAN")
            }
        }

        impl Drop for Image {
            fn drop(&mut self) {
                // SAFETY: unmaps what `map` mapped.
                unsafe { libc::munmap(self.at.cast(), self.pages * page_size()) };
            }
        }

        #[test]
        fn a_pass_joins_the_written_runs_and_changes_no_byte() {
            let image = Image::map(240);
            // SAFETY: the mapping lives until `image` is dropped, after its
            // last use here, and only this test touches it.
            let size = page_size();
            let bytes = unsafe { std::slice::from_raw_parts_mut(image.at, 240 * size) };
            // Read every page, then write 60 of them, three apart, as an
            // interpreter's call does.
            let read: usize = (0..240).map(|page| usize::from(bytes[page * size])).sum();
            assert_eq!(read, (0..240usize).sum::<usize>());
            for page in (0..240).step_by(4) {
                bytes[page * size + 7] = 0xee;
            }
            let pagemap = File::open("/proc/self/pagemap").unwrap();
            assert_eq!(image.runs(&pagemap).len(), 60);

            assert!(coalesce_slots() >= 1);

            let runs = image.runs(&pagemap);
            assert!(runs.len() <= super::super::RUNS, "{} runs", runs.len());
            for page in 0..240 {
                let want = page as u8;
                let bytes = &bytes[page * size..][..size];
                let written = page % 4 == 0;
                for (at, &byte) in bytes.iter().enumerate() {
                    let want = if written && at == 7 { 0xee } else { want };
                    assert_eq!(byte, want, "page {page}, byte {at}");
                }
            }
        }

        #[test]
        fn a_slot_is_the_writable_mappings_around_an_image() {
            let maps = "\
7b6ed6000000-7b6ed8000000 ---p 00000000 00:00 0
7b6ed8000000-7b6ed80f0000 rw-p 00000000 00:00 0
7b6ed80f0000-7b6ed8d00000 rw-p 016eb000 fe:00 10117399                   /c/e43c.cwasm
7b6ed8d00000-7b6ed8d10000 rw-p 00000000 00:00 0
7b6ed8d10000-7b6fda000000 ---p 00000000 00:00 0
7b6fda000000-7b6fda0f0000 rw-p 00000000 00:00 0
7b6fda0f0000-7b6fda100000 rw-p 00000000 00:00 0
7f00000000-7f00001000 r--p 00000000 fe:00 2   /usr/lib/libc.so.6
7f00001000-7f00002000 rw-p 00001000 fe:00 2   /usr/lib/libc.so.6
7f00002000-7f00003000 rw-p 00000000 00:00 0
7f10000000-7f10001000 rw-p 00000000 00:01 7   /memfd:wasm-memory-image (deleted)
7f20000000-7f20001000 rw-p 00000000 fe:00 9   /home/a b/x.cwasm (deleted)
";
            assert_eq!(
                slots(maps),
                [
                    (0x7b6e_d800_0000, 0x7b6e_d8d1_0000),
                    (0x7f_1000_0000, 0x7f_1000_1000),
                    (0x7f_2000_0000, 0x7f_2000_1000),
                ]
            );
        }
    }
}

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
