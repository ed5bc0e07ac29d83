//! `pipespeed2t COUNT BYTES`: see the crate documentation.

use pipespeed2::Report;
use pipespeed2t::{Options, ladder};

fn main() -> std::process::ExitCode {
    labkit::cli::main("pipespeed2t", |o: &Options| match o.ladder() {
        Some(settings) => ladder::run(&settings).and_then(|ladder| {
            // Without --json, the program's usual line.
            labkit::cli::emit(o.json, &ladder, |l| l.report.text())
        }),
        None => pipespeed2t::run(&o.settings())
            .and_then(|report| labkit::cli::emit(o.json, &report, Report::text)),
    })
}
