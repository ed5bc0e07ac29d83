//! `load --addr HOST:PORT --senders 100 --receivers 100 --queues 4 --size
//! 1024 --duration 10`: see the crate documentation; its flags are
//! [`mq::load::Options`].

use std::time::Duration;

use labkit::Error;
use mq::load::Options;

fn main() -> std::process::ExitCode {
    labkit::cli::main("load", run)
}

fn run(o: &Options) -> labkit::Result<()> {
    o.shape.check()?;
    let Some(addr) = o.addr.filter(|_| !o.floor) else {
        let d = Duration::from_secs_f64(o.duration.max(0.01));
        let f = mq::load::floor(o.shape.size as usize, o.pipeline as usize, d)?;
        return labkit::cli::emit(o.json, &f, mq::load::FloorReport::human);
    };
    let report = mq::load::run(&o.config(addr))?;
    labkit::cli::emit(o.json, &report, mq::load::LoadReport::human)?;
    if let Some(e) = &report.error {
        return Err(Error::failed(e.clone()));
    }
    if !report.ok() {
        return Err(Error::failed(format!(
            "delivery check failed: {} lost, {} duplicated, {} corrupt of {} sent",
            report.lost, report.duplicated, report.corrupt, report.sent
        )));
    }
    Ok(())
}
