//! Links `wasm-agent` with packed relative relocations (DT_RELR) where the C
//! library it is built against can load them (glibc 2.36 and newer).
//!
//! The binary is position-independent, so its ~85 000 relative relocations
//! are applied at every start: as classic RELA entries they take 2 MB, read
//! in full by the loader, which stayed resident (with their neighbourhood)
//! for the process's life; packed, they take about 23 KB, and a server's RSS
//! was 3.6-6.4 MiB lower. Where the library or the target differs, the
//! binary links as before.
//!
//! It also lays out the functions a serving `wasm-agent` runs together, in
//! the order `hot-code.order` lists them (written by `make hot-code`), where
//! the linker is LLD (Rust's default on x86_64 Linux): once a server drops
//! its start's pages, what serving runs is mapped again 64 KiB at a time,
//! and scattered over the binary's 40 MiB of code it kept ~10 MiB resident.
//! Names the list has and the binary does not are skipped.

use std::path::PathBuf;
use std::process::Command;

/// The symbol version glibc defines once its loader understands DT_RELR
/// (the linker then records the binary's need for it).
const RELR_VERSION: &[u8] = b"GLIBC_ABI_DT_RELR";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target == host && target.ends_with("-linux-gnu") && c_library_loads_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed={HOT_CODE}");
    if target == "x86_64-unknown-linux-gnu" && links_with_default_linker() {
        let order = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
        let order = order.join(HOT_CODE);
        println!(
            "cargo:rustc-link-arg-bin=wasm-agent=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=wasm-agent=-Wl,--no-warn-symbol-ordering");
    }
}

/// The functions serving runs, in order.
const HOT_CODE: &str = "hot-code.order";

/// Whether no linker other than Rust's default (LLD on this target) was
/// asked for: by a Cargo setting (`RUSTC_LINKER`, from `.cargo/config.toml`
/// or `CARGO_TARGET_..._LINKER`) or by flags naming a linker or its
/// arguments.
fn links_with_default_linker() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    std::env::var_os("RUSTC_LINKER").is_none() && !flags.contains("link")
}

/// Whether the `libc.so.6` the C compiler links against defines
/// [`RELR_VERSION`]; any doubt answers no.
fn c_library_loads_relr() -> bool {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(found) = Command::new(compiler)
        .arg("-print-file-name=libc.so.6")
        .output()
    else {
        return false;
    };
    let path = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
    // Without the library, the compiler prints the bare name back.
    if !found.status.success() || !path.is_absolute() {
        return false;
    }
    std::fs::read(&path).is_ok_and(|library| {
        library
            .windows(RELR_VERSION.len())
            .any(|window| window == RELR_VERSION)
    })
}
