//! Code the start alone ran (argument parsing, config, compiling, loading)
//! need not stay mapped once `serve` is up: the binary's executable pages
//! are dropped from the process's page tables, and whatever runs later is
//! mapped again from the page cache on its first use. Those pages are clean
//! copies of the file (text is never written), so nothing is lost; they stay
//! in the page cache, where the system may reclaim them.

/// Unmaps this binary's executable pages (its `r-xp` mappings); the ones
/// still in use come back at their next use. Does nothing where
/// `/proc/self/maps` cannot be read.
pub fn unmap_start_code() {
    let (Ok(maps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/maps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return;
    };
    let mut unmapped = 0usize;
    for (start, end) in executable_ranges(&maps, &exe.to_string_lossy()) {
        // SAFETY: [start, end) is a private, read-only, executable mapping
        // of the binary's file. MADV_DONTNEED on it only drops page-table
        // entries: the next access maps the same clean page again from the
        // page cache, so no code or data changes.
        let result =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if result == 0 {
            unmapped += end - start;
        }
    }
    tracing::debug!(
        "start code unmapped: {} KiB of executable mappings",
        unmapped / 1024
    );
}

/// The `[start, end)` of each private read-execute mapping of `exe` in a
/// `/proc/PID/maps` text.
fn executable_ranges<'a>(maps: &'a str, exe: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
    maps.lines().filter_map(move |line| {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next()?, fields.next()?);
        let path = fields.nth(3)?;
        if perms != "r-xp" || path != exe {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some((
            usize::from_str_radix(start, 16).ok()?,
            usize::from_str_radix(end, 16).ok()?,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_binarys_executable_mappings_are_taken() {
        let maps = "\
5600a000-5600b000 r--p 00000000 08:01 42 /usr/bin/wasm-agent
5600b000-5600f000 r-xp 00001000 08:01 42 /usr/bin/wasm-agent
5600f000-56010000 rw-p 00005000 08:01 42 /usr/bin/wasm-agent
7f00a000-7f00c000 r-xp 00000000 08:01 77 /usr/lib/libc.so.6
7f00c000-7f00d000 r-xp 00000000 08:01 43 /usr/bin/wasm-agent-other
7ffd0000-7ffd1000 r-xp 00000000 00:00 0 [vdso]";
        let ranges: Vec<_> = executable_ranges(maps, "/usr/bin/wasm-agent").collect();
        assert_eq!(ranges, [(0x5600b000, 0x5600f000)]);
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
    fn code_no_longer_run_leaves_the_resident_set_and_the_process_runs_on() {
        let before = resident_code_kib();
        unmap_start_code();
        let after = resident_code_kib();
        assert!(
            after < before,
            "resident code {before} KiB before, {after} KiB after"
        );
        let text: String = (0..3).map(|i| i.to_string()).collect();
        assert_eq!(text, "012");
    }
}
