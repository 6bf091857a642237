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
    for (start, end) in clean_read_only_files(&smaps) {
        // SAFETY: [start, end) is a file mapping without write permission
        // whose pages were never written (no anonymous copies, resident or
        // swapped out), so none can be written now either. MADV_DONTNEED on
        // it only drops page-table entries: the next access maps the same
        // clean page of the file again, so no code or data changes.
        let result =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if result == 0 {
            unmapped += end - start;
        }
    }
    tracing::debug!(
        "start pages unmapped: {} KiB of mappings in {:?}",
        unmapped / 1024,
        started.elapsed()
    );
}

/// The `[start, end)` of each mapping in a `/proc/PID/smaps` text that is
/// of a file, not writable, and holds no written pages: none anonymous, and
/// none swapped out (a written page that was swapped shows only there).
fn clean_read_only_files(smaps: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    let mut written = false;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let perms = fields.next().unwrap_or_default();
            let path = fields.nth(3).unwrap_or_default();
            let readable_only = perms.starts_with('r') && perms.as_bytes().get(1) == Some(&b'-');
            current = match (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) {
                (Ok(start), Ok(end)) if readable_only && path.starts_with('/') => {
                    Some((start, end))
                }
                _ => None,
            };
            written = false;
        } else if first == "Anonymous:" || first == "Swap:" {
            written |= fields.next().and_then(|kib| kib.parse::<u64>().ok()) != Some(0);
            // Swap comes after Anonymous: the mapping's last word.
            if first == "Swap:"
                && let Some(range) = current.take().filter(|_| !written)
            {
                ranges.push(range);
            }
        }
    }
    ranges
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
        assert_eq!(
            clean_read_only_files(SMAPS),
            [
                (0x5600a000, 0x5600b000),
                (0x5600b000, 0x5600f000),
                (0x7f00a000, 0x7f00c000)
            ]
        );
    }

    /// KiB of this binary's executable mappings resident now.
    fn resident_code_kib() -> usize {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields
                .first()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                ours = fields.get(1) == Some(&"r-xp") && fields.get(5) == Some(&&*exe);
            } else if ours && fields.first() == Some(&"Rss:") {
                kib += fields[1].parse::<usize>().unwrap();
            }
        }
        kib
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
