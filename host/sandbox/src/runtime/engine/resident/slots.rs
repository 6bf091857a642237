//! Where this process's memory slots are: each run of read-write private
//! mappings that holds a memory image (a `.cwasm` mapped by wasmtime, or its
//! memfd).
//!
//! `PROCMAP_QUERY` (Linux 6.11) visits only the file-backed mappings, and
//! around each image the few mappings of its slot. `/proc/self/maps` lists
//! every mapping instead, among them two for each fiber stack of the pool
//! (the stack and its guard page): some 4000 lines for 1000 calls at once,
//! which took milliseconds to produce and read on every pass. It remains the
//! way on older kernels.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::AsRawFd;

/// The slots, as `[start, end)` byte ranges, in address order.
pub(super) fn slots() -> Vec<(u64, u64)> {
    let Ok(mut maps) = File::open("/proc/self/maps") else {
        return Vec::new();
    };
    if let Ok(slots) = queried(&maps) {
        return slots;
    }
    let mut listing = String::new();
    match maps.read_to_string(&mut listing) {
        Ok(_) => listed(&listing),
        Err(_) => Vec::new(),
    }
}

/// `struct procmap_query` of `linux/fs.h`.
#[repr(C)]
#[derive(Default)]
struct Query {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
const VMA_READABLE: u64 = 0x01;
const VMA_WRITABLE: u64 = 0x02;
const VMA_EXECUTABLE: u64 = 0x04;
const VMA_SHARED: u64 = 0x08;
const COVERING_OR_NEXT_VMA: u64 = 0x10;
const FILE_BACKED_VMA: u64 = 0x20;

/// A `PROCMAP_QUERY` failed: the kernel lacks it (before Linux 6.11), or
/// refused this one.
#[derive(Debug)]
struct QueryFailed;

/// The slots found by `PROCMAP_QUERY` on `maps`.
fn queried(maps: &File) -> Result<Vec<(u64, u64)>, QueryFailed> {
    let mut name = vec![0u8; libc::PATH_MAX as usize];
    let mut slots = Vec::new();
    let mut at = 0;
    while let Some(file) = query(maps, at, COVERING_OR_NEXT_VMA | FILE_BACKED_VMA, &mut name)? {
        at = file.end;
        if !(file.writable && file.image) {
            continue;
        }
        let (mut start, mut end) = (file.start, file.end);
        while let Some(before) = start
            .checked_sub(1)
            .map(|addr| query(maps, addr, 0, &mut name))
        {
            match before? {
                Some(before) if before.writable && before.end == start => start = before.start,
                _ => break,
            }
        }
        while let Some(after) = query(maps, end, 0, &mut name)? {
            if !(after.writable && after.start == end) {
                break;
            }
            end = after.end;
        }
        slots.push((start, end));
        at = end;
    }
    Ok(slots)
}

/// The mapping covering `addr` (or, with [`COVERING_OR_NEXT_VMA`], the next
/// one), `None` when there is none.
fn query(
    maps: &File,
    addr: u64,
    flags: u64,
    name: &mut [u8],
) -> Result<Option<Mapping>, QueryFailed> {
    let mut query = Query {
        size: std::mem::size_of::<Query>() as u64,
        query_flags: flags,
        query_addr: addr,
        vma_name_size: name.len() as u32,
        vma_name_addr: name.as_mut_ptr() as u64,
        ..Query::default()
    };
    // SAFETY: `query` is a `struct procmap_query` of its own size, and the
    // kernel writes at most `vma_name_size` bytes of the name to `name`.
    if unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY, &mut query) } != 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(QueryFailed),
        };
    }
    // The name's size counts its terminating NUL; an anonymous mapping has
    // none.
    let named = (query.vma_name_size as usize)
        .saturating_sub(1)
        .min(name.len());
    let path = std::str::from_utf8(&name[..named]).unwrap_or_default();
    let permissions = query.vma_flags & (VMA_READABLE | VMA_WRITABLE | VMA_EXECUTABLE | VMA_SHARED);
    Ok(Some(Mapping {
        start: query.vma_start,
        end: query.vma_end,
        writable: permissions == VMA_READABLE | VMA_WRITABLE,
        image: is_image(path),
    }))
}

/// The slots in a `/proc/self/maps` listing.
fn listed(maps: &str) -> Vec<(u64, u64)> {
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

/// Whether a mapping's file is a memory image.
fn is_image(path: &str) -> bool {
    let path = path.trim_end().trim_end_matches(" (deleted)");
    path.ends_with(".cwasm") || path == "/memfd:wasm-memory-image"
}

/// One mapping.
struct Mapping {
    start: u64,
    end: u64,
    /// Private, readable and writable.
    writable: bool,
    /// Mapped from a memory image.
    image: bool,
}

impl Mapping {
    /// One line of `/proc/self/maps`.
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_ascii_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?;
        let path = line.find(" /").map_or("", |at| &line[at + 1..]);
        Some(Self {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            writable: perms == "rw-p",
            image: is_image(path),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::linux::tests::Image;
    use super::*;

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
            listed(maps),
            [
                (0x7b6e_d800_0000, 0x7b6e_d8d1_0000),
                (0x7f_1000_0000, 0x7f_1000_1000),
                (0x7f_2000_0000, 0x7f_2000_1000),
            ]
        );
    }

    /// An image with anonymous read-write pages on both sides, as a slot's
    /// are around its image, and inaccessible ones beyond them.
    #[test]
    fn the_query_finds_the_slots_the_listing_does() {
        let image = Image::map(8);
        let page = Image::page_size();
        let (start, end) = (image.at as usize, image.at as usize + 8 * page);
        for side in [start - 2 * page, end] {
            // SAFETY: two pages of the image's reservation, inaccessible
            // until now and unmapped with it.
            let at = unsafe {
                libc::mmap(
                    side as *mut libc::c_void,
                    2 * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            assert_eq!(at as usize, side);
        }
        let maps = File::open("/proc/self/maps").unwrap();
        let queried = queried(&maps).expect("PROCMAP_QUERY (Linux 6.11)");
        let listing = std::fs::read_to_string("/proc/self/maps").unwrap();
        let slot = (start as u64 - 2 * page as u64, end as u64 + 2 * page as u64);
        assert!(queried.contains(&slot), "{slot:x?} not in {queried:x?}");
        assert!(listed(&listing).contains(&slot));
    }
}
