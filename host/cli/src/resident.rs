//! Pages the start alone used (argument parsing, config, compiling and
//! loading code, the components' load-time metadata) need not stay mapped
//! once `serve` is up. Every read-only file mapping none of whose pages was
//! ever written (the binary's code and constants, the components' compiled
//! code, the libraries) is dropped from the process's page tables; whatever
//! runs later is mapped again from the page cache at its first use. Nothing
//! is lost: such pages are clean copies of their files, and they stay in the
//! page cache, where the system may reclaim them.

/// Unmaps every clean read-only file mapping (see the module's text); the
/// pages still in use come back at their next use. Does nothing where
/// `/proc/self/smaps` cannot be read.
pub fn unmap_start_pages() {
    let started = std::time::Instant::now();
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    let mut unmapped = 0usize;
    for mapping in mappings(&smaps)
        .iter()
        .filter(|m| m.is_clean_read_only_file())
    {
        let (start, len) = (mapping.start, mapping.end - mapping.start);
        // SAFETY: [start, start + len) is a file mapping without write
        // permission whose pages were never written (no anonymous copies,
        // resident or swapped out), so none can be written now either.
        // MADV_DONTNEED on it only drops page-table entries: the next access
        // maps the same clean page of the file again, so no code or data
        // changes.
        let result = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        if result == 0 {
            unmapped += len;
        }
    }
    tracing::debug!(
        "start pages unmapped: {} KiB of mappings in {:?}",
        unmapped / 1024,
        started.elapsed()
    );
}

/// One mapping of a `/proc/PID/smaps` text, with the sizes this module reads.
#[derive(Debug, Default, PartialEq)]
struct Mapping<'a> {
    start: usize,
    end: usize,
    perms: &'a str,
    /// The file mapped; empty or `[name]` for anything else.
    path: &'a str,
    rss_kib: u64,
    anonymous_kib: u64,
    swap_kib: u64,
}

impl Mapping<'_> {
    /// Of a file, not writable, and holding no written page: none anonymous,
    /// and none swapped out (a written page that was swapped shows only
    /// there).
    fn is_clean_read_only_file(&self) -> bool {
        let read_only = self.perms.starts_with('r') && self.perms.as_bytes().get(1) == Some(&b'-');
        read_only && self.path.starts_with('/') && self.anonymous_kib == 0 && self.swap_kib == 0
    }
}

/// Every mapping of a `/proc/PID/smaps` text; unreadable lines are skipped.
fn mappings(smaps: &str) -> Vec<Mapping<'_>> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            let perms = fields.next().unwrap_or_default();
            let path = fields.nth(3).unwrap_or_default();
            mappings.push(Mapping {
                start,
                end,
                perms,
                path,
                ..Mapping::default()
            });
            continue;
        }
        let (Some(mapping), Some(kib)) = (
            mappings.last_mut(),
            fields.next().and_then(|kib| kib.parse::<u64>().ok()),
        ) else {
            continue;
        };
        match first {
            "Rss:" => mapping.rss_kib = kib,
            "Anonymous:" => mapping.anonymous_kib = kib,
            "Swap:" => mapping.swap_kib = kib,
            _ => {}
        }
    }
    mappings
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5600a000-5600b000 r--p 00000000 08:01 42 /usr/bin/wasm-agent
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
5600b000-5600f000 r-xp 00001000 08:01 42 /usr/bin/wasm-agent
Anonymous:             0 kB
Swap:                  0 kB
5600f000-56010000 r--p 00005000 08:01 42 /usr/bin/wasm-agent
Anonymous:             4 kB
Swap:                  0 kB
56010000-56011000 rw-p 00006000 08:01 42 /usr/bin/wasm-agent
Anonymous:             0 kB
Swap:                  0 kB
56011000-56012000 r--p 00007000 08:01 42 /usr/bin/wasm-agent
Anonymous:             0 kB
Swap:                  4 kB
7f00a000-7f00c000 r-xp 00000000 08:01 77 /cache/ab.cwasm
Anonymous:             0 kB
Swap:                  0 kB
7f00c000-7f00d000 r-xp 00000000 08:01 78 /cache/cd.cwasm
Anonymous:             8 kB
Swap:                  0 kB
7f00d000-7f00e000 r--p 00000000 00:00 0
Anonymous:             0 kB
Swap:                  0 kB
7ffd0000-7ffd1000 r--p 00000000 00:00 0 [vvar]
Anonymous:             0 kB
Swap:                  0 kB
7ffd1000-7ffd2000 r-xp 00000000 00:00 0 [vdso]
Anonymous:             0 kB
Swap:                  0 kB";

    #[test]
    fn only_clean_read_only_file_mappings_are_taken() {
        let clean: Vec<(usize, usize)> = mappings(SMAPS)
            .iter()
            .filter(|m| m.is_clean_read_only_file())
            .map(|m| (m.start, m.end))
            .collect();
        assert_eq!(
            clean,
            [
                (0x5600a000, 0x5600b000),
                (0x5600b000, 0x5600f000),
                (0x7f00a000, 0x7f00c000)
            ]
        );
    }

    /// KiB of this binary's executable mappings resident now.
    fn resident_code_kib() -> u64 {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        mappings(&smaps)
            .iter()
            .filter(|m| m.perms == "r-xp" && m.path == exe.to_string_lossy())
            .map(|m| m.rss_kib)
            .sum()
    }

    #[test]
    fn pages_no_longer_used_leave_the_resident_set_and_the_process_runs_on() {
        let before = resident_code_kib();
        unmap_start_pages();
        let after = resident_code_kib();
        assert!(
            after < before,
            "resident code {before} KiB before, {after} KiB after"
        );
        let text: String = (0..3).map(|i| i.to_string()).collect();
        assert_eq!(text, "012");
    }
}
