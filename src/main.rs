//! `lab`: list and run the lab's experiments. See `lab --help`.

fn main() -> std::process::ExitCode {
    // First, before any thread: SIGINT/SIGTERM/SIGHUP stop and reap every
    // program started, remove the temporary directories, exit 128 + N.
    if let Err(e) = labkit::cleanup::install("lab") {
        eprintln!("lab: cannot take over SIGINT, SIGTERM and SIGHUP: {e}");
        return std::process::ExitCode::from(1);
    }
    // On a thread of its own if `ulimit -s` is tiny (labkit::limits).
    let args = std::env::args_os().collect();
    let result = labkit::limits::enough_stack(|| lab::main(args));
    labkit::cleanup::settle();
    labkit::error::report("lab", result)
}
