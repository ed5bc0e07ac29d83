//! `lab`: list and run the lab's experiments. See `lab --help`.

fn main() -> std::process::ExitCode {
    // First, before any thread: SIGINT/SIGTERM/SIGHUP stop and reap every
    // program started, remove the temporary directories, exit 128 + N.
    if let Err(e) = labkit::cleanup::install("lab") {
        eprintln!("lab: cannot take over SIGINT, SIGTERM and SIGHUP: {e}");
        return std::process::ExitCode::from(1);
    }
    let result = lab::main(std::env::args_os().collect());
    labkit::cleanup::settle();
    labkit::error::report("lab", result)
}
