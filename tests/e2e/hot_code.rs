//! The functions a serving `wasm-agent` runs are laid out together, in the
//! order `host/cli/hot-code.order` lists them (`host/cli/build.rs`), so what
//! serving maps again after the start's pages are dropped stays small.

use std::collections::HashMap;
use std::process::Command;

use crate::common::root;

/// Each defined function's address and size in the built binary.
fn functions() -> HashMap<String, (u64, u64)> {
    let binary = env!("CARGO_BIN_EXE_wasm-agent");
    let listed = Command::new("nm")
        .args(["-S", "--defined-only", binary])
        .output()
        .expect("nm runs (binutils)");
    assert!(listed.status.success(), "nm {binary} failed");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [address, size, "t" | "T" | "W", name] => Some((
                    name.to_owned(),
                    (
                        u64::from_str_radix(address, 16).ok()?,
                        u64::from_str_radix(size, 16).ok()?,
                    ),
                )),
                _ => None,
            },
        )
        .collect()
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "the list names the functions of release builds"
)]
fn the_functions_serving_runs_are_laid_out_together_in_the_listed_order() {
    let order = std::fs::read_to_string(root().join("host/cli/hot-code.order")).unwrap();
    let listed: Vec<&str> = order.lines().filter(|line| !line.is_empty()).collect();
    let functions = functions();
    let placed: Vec<(u64, u64)> = listed
        .iter()
        .filter_map(|name| functions.get(*name).copied())
        .collect();
    // The names carry hashes of the crates' features, which differ between
    // `cargo build -p wasm-agent-cli` (what `make setup` builds, and what the
    // list was made from; `make bench` prints how much of it that binary
    // has) and a test build with the whole workspace's features; the linker
    // skips names it does not find. What it does find, it must honour.
    assert!(
        placed.len() >= 100,
        "only {} of the {} functions in host/cli/hot-code.order are in the binary: \
         run `make hot-code`",
        placed.len(),
        listed.len()
    );
    // In the listed order (two names of one function share its address).
    let out_of_order = placed.windows(2).filter(|w| w[1].0 < w[0].0).count();
    assert_eq!(
        out_of_order,
        0,
        "{out_of_order} of {} listed functions are placed before the one listed before them",
        placed.len()
    );
    // Together: spanning little more than their own size (alignment).
    let start = placed.iter().map(|(address, _)| *address).min().unwrap();
    let end = placed.iter().map(|(a, size)| a + size).max().unwrap();
    let own: u64 = placed.iter().map(|(_, size)| *size).sum();
    assert!(
        end - start <= own + own / 2 + 64 * 1024,
        "the listed functions span {} KiB for {} KiB of code",
        (end - start) / 1024,
        own / 1024
    );
}
