//! The `weir` command. All of it lives in the `weir-cli` crate; see `weir --help`.

fn main() -> std::process::ExitCode {
    weir_cli::main()
}
