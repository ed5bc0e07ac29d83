//! `creattime SAMPLES`: see the crate documentation.

use creattime::Options;
use labkit::Error;
use labkit::error::calls_failed;
use labkit::error::describe_errno;
use labkit::pthread::Attr;

fn main() -> std::process::ExitCode {
    labkit::cli::main("creattime", run)
}

fn run(cli: &Options) -> labkit::Result<()> {
    // No --stack-size: a NULL attr, the default stack, as the C passes.
    let attr = match cli.stack_size {
        None => Attr::default_stack(),
        Some(bytes) => Attr::stack_size(bytes as usize).map_err(|e| {
            Error::usage(format!("--stack-size {bytes}: {}", describe_errno(e)))
        })?,
    };
    let r = creattime::run(cli.samples, &attr);
    if let Some(sig) = r.interrupted {
        return Err(labkit::relay::interrupted(
            sig,
            &format!(
                "reaped all {} children, joined all {} threads",
                r.reaped, r.joined
            ),
        ));
    }
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    let mut failed = Vec::new();
    for (what, kind) in [("fork", &r.fork), ("pthread_create", &r.thread)] {
        if kind.failures > 0 {
            let first = kind.first_error.as_deref();
            failed.push(calls_failed(kind.failures, r.samples, what, first));
        }
    }
    if !failed.is_empty() {
        return Err(Error::failed(format!(
            "{}; reaped {} children, joined {} threads",
            failed.join("; "),
            r.reaped,
            r.joined
        )));
    }
    if r.left_behind > 0 {
        return Err(Error::failed(format!(
            "{} children left behind",
            r.left_behind
        )));
    }
    Ok(())
}
