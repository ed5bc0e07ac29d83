//! `pipespeed2 COUNT BYTES`: see the crate documentation.

use clap::Parser;
use labkit::limits::size_in;
use pipespeed2::Report;

/// Write a block of BYTES into a pipe and read it back, COUNT times, in one
/// thread (Bradford's pipespeed2), and print the rate in MB/s (10^6 bytes).
/// A block larger than the pipe's buffer is refused, since one thread would
/// wait forever. Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(flatten)]
    blocks: pipespeed2::Blocks,

    /// Ask for a pipe buffer of this size (F_SETPIPE_SZ; the kernel rounds
    /// up to a power of two pages) [default: the kernel's, F_GETPIPE_SZ]
    #[arg(long, value_name = "BYTES", value_parser = size_in(1, 1 << 30))]
    pipe_size: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("pipespeed2", |cli: &Cli| {
        pipespeed2::run(cli.blocks.count, cli.blocks.bytes, cli.pipe_size)
            .and_then(|report| labkit::cli::emit(cli.json, &report, Report::text))
    })
}
