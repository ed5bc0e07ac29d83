//! `pipespeed2 COUNT BYTES`: see the crate documentation.

use pipespeed2::{Options, Report};

fn main() -> std::process::ExitCode {
    labkit::cli::main("pipespeed2", |cli: &Options| {
        pipespeed2::run(cli.blocks.count, cli.blocks.bytes, cli.pipe_size)
            .and_then(|report| labkit::cli::emit(cli.json, &report, Report::text))
    })
}
