//! `forkcreat --iterations N [--reap wait|sigchld]`: see the crate
//! documentation.

use forkcreat::Options;
use labkit::Error;
use labkit::error::calls_failed;

fn main() -> std::process::ExitCode {
    labkit::cli::main("forkcreat", run)
}

fn run(cli: &Options) -> labkit::Result<()> {
    let r = forkcreat::run(cli.iterations, cli.reap);
    if let Some(sig) = r.interrupted {
        return Err(labkit::relay::interrupted(
            sig,
            &format!("stopped after {} forks; reaped all {}", r.created, r.reaped),
        ));
    }
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    if r.failed > 0 {
        return Err(Error::failed(format!(
            "{}; reaped all {} created",
            calls_failed(
                r.failed,
                r.iterations,
                "fork",
                r.end.first_error.as_deref()
            ),
            r.reaped
        )));
    }
    if r.bad_exits > 0 || r.reaped != r.created || r.left_behind > 0 {
        return Err(Error::failed(format!(
            "created {}, reaped {} ({} did not exit with 0), {} left behind",
            r.created, r.reaped, r.bad_exits, r.left_behind
        )));
    }
    Ok(())
}
