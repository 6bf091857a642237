//! The `wasm-agent` binary.

mod cli;

/// Instantiating a component per call allocates many small objects; mimalloc
/// handles that pattern markedly faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
