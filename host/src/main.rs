//! The `wasm-agent` binary.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
