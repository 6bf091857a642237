//! The pass on Linux: written pages from `PAGEMAP_SCAN` (Linux 6.7) in
//! each memory slot (`slots`), gaps filled with `MADV_POPULATE_WRITE`
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
    let mut runs = vec![PageRegion::default(); MAX_RUNS];
    let mut filled = 0;
    for slot in super::slots::slots() {
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

#[cfg(test)]
pub(super) mod tests {
    use std::io::Write as _;

    use super::*;

    /// A memory image's shape, mapped as wasmtime maps one: a private,
    /// writable mapping of a `.cwasm` file, each page holding its own
    /// number, with [`GUARD`](Image::GUARD) inaccessible pages reserved on
    /// each side.
    pub(in crate::runtime::engine::resident) struct Image {
        pub(in crate::runtime::engine::resident) at: *mut u8,
        pages: usize,
        _file: tempfile::NamedTempFile,
    }

    impl Image {
        const GUARD: usize = 3;

        /// The machine's page size.
        pub(in crate::runtime::engine::resident) fn page_size() -> usize {
            // SAFETY: `sysconf` only reads a system setting.
            unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
        }

        pub(in crate::runtime::engine::resident) fn map(pages: usize) -> Self {
            let size = Self::page_size();
            let mut file = tempfile::Builder::new()
                .suffix(".cwasm")
                .tempfile()
                .unwrap();
            for page in 0..pages {
                file.write_all(&vec![page as u8; size]).unwrap();
            }
            file.flush().unwrap();
            // SAFETY: a new reservation, then a private mapping of a file
            // this test owns within it.
            let at = unsafe {
                let reserved = libc::mmap(
                    std::ptr::null_mut(),
                    (pages + 2 * Self::GUARD) * size,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(reserved, libc::MAP_FAILED);
                libc::mmap(
                    reserved.cast::<u8>().add(Self::GUARD * size).cast(),
                    pages * size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
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
            let end = start + (self.pages * Self::page_size()) as u64;
            let mut runs = vec![PageRegion::default(); MAX_RUNS];
            written_runs(pagemap, (start, end), &mut runs).expect("PAGEMAP_SCAN")
        }
    }

    impl Drop for Image {
        fn drop(&mut self) {
            let size = Self::page_size();
            // SAFETY: unmaps what `map` reserved.
            unsafe {
                libc::munmap(
                    self.at.sub(Self::GUARD * size).cast(),
                    (self.pages + 2 * Self::GUARD) * size,
                )
            };
        }
    }

    #[test]
    fn a_pass_joins_the_written_runs_and_changes_no_byte() {
        let image = Image::map(240);
        // SAFETY: the mapping lives until `image` is dropped, after its
        // last use here, and only this test touches it.
        let size = Image::page_size();
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
}
