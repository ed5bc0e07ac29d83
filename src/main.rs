//! `lab`: list and run the lab's experiments. See `lab --help`.

fn main() -> std::process::ExitCode {
    // First, before any thread: SIGINT/SIGTERM/SIGHUP stop and reap every
    // program started, remove the temporary directories, exit 128 + N.
    if let Err(e) = supervisor::install("lab", remove_half_written_run) {
        eprintln!("lab: cannot take over SIGINT, SIGTERM and SIGHUP: {e}");
        return std::process::ExitCode::from(1);
    }
    // On a thread of its own if `ulimit -s` is tiny (labkit::limits).
    let args = std::env::args_os().collect();
    let result = labkit::limits::enough_stack(|| lab::main(args));
    labkit::cleanup::settle();
    // The guard finds nothing left to clean up, and is reaped.
    supervisor::finish();
    labkit::error::report("lab", result)
}

/// What an interrupt removes besides the temporary directories: the
/// experiment folder being written (lab::runs), and the reader's run folder
/// it was in if that is left empty, as a failed run leaves nothing; under
/// `lab run all`, the run folder if no step in it finished.
fn remove_half_written_run() -> Vec<std::path::PathBuf> {
    let mut held = lab::runs::pending();
    let mut removed = held.take().map(|p| p.discard()).unwrap_or_default();
    removed.extend(lab::runs::remove_unfinished_run());
    // Held until the exit that follows: the runner cannot commit, discard
    // or report the experiment after this.
    std::mem::forget(held);
    removed
}
