//! `pthreadcreat --iterations N [--stack-size B]`: see the crate
//! documentation.

use labkit::Error;
use labkit::error::calls_failed;
use labkit::limits::pthread_default_stack;
use pthreadcreat::Options;

fn main() -> std::process::ExitCode {
    labkit::cli::main("pthreadcreat", run)
}

fn run(cli: &Options) -> labkit::Result<()> {
    let stack = cli.stack_size.unwrap_or_else(pthread_default_stack);
    let r = pthreadcreat::run(cli.iterations, stack, cli.api);
    labkit::cli::emit(cli.json, &r, |r| r.text())?;
    if r.failed > 0 {
        let call = match r.api {
            pthreadcreat::Api::Pthread => "pthread_create",
            pthreadcreat::Api::Std => "std::thread spawn",
        };
        return Err(Error::failed(format!(
            "{}; joined all {} created",
            calls_failed(r.failed, r.iterations, call, r.end.first_error.as_deref()),
            r.joined
        )));
    }
    if r.panicked > 0 {
        return Err(Error::failed(format!(
            "{} threads panicked or could not be joined",
            r.panicked
        )));
    }
    Ok(())
}
