//! `ctxswitch --mode threads|processes --pin same|cross|none`: see the
//! crate documentation; its flags are [`ctxswitch::Options`].

use ctxswitch::{Config, Options};
use labkit::Error;

fn main() -> std::process::ExitCode {
    labkit::cli::main("ctxswitch", |o: &Options| run(&o.config(), o.json))
}

fn run(cfg: &Config, json: bool) -> labkit::Result<()> {
    let report = ctxswitch::run(cfg)?;
    labkit::cli::emit(json, &report, ctxswitch::render)?;
    let s = &report.switches;
    if s.holds {
        Ok(())
    } else {
        Err(Error::failed(format!(
            "the kernel counted {} switches, expected about {} (2 per round \
             trip): these figures are not the cost of one switch",
            s.voluntary + s.involuntary,
            s.expected
        )))
    }
}
