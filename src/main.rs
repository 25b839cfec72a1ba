//! The `weir` command. All of it lives in the `weir-cli` crate; see `weir --help`.

/// mimalloc instead of the system allocator: records parsed on one thread are freed on
/// another, and glibc's allocator serialises those frees on the allocating thread's arena
/// lock. A NEXMark replay that keeps every string ran in 0.93 s instead of 1.73 s with it
/// (BENCHMARKS.md, issue 14).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    weir_cli::main()
}
