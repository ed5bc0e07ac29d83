//! `copylimit BYTES`: see `pipespeed2t::copy`.

use clap::Parser;
use labkit::limits::size_in;
use pipespeed2t::copy::{self, Options};

/// The limit memory copying sets for a pipe: MB/s (10^6 bytes) of blocks
/// of BYTES copied twice (source, buffer, destination: what write and read
/// do) or once from a ring of page-aligned slots (what a vmsplice pipe's
/// reader does), with the C library's memcpy and with a loop of 64-byte
/// moves; the limit is the faster. Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Bytes per block, e.g. 4096, 64k, 256M
    #[arg(value_parser = size_in(1, 1 << 32))]
    bytes: u64,

    /// Copies of each block: 2 (a pipe's write and read) or 1
    #[arg(long, default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=2))]
    copies: u32,

    /// Slots in the source ring, each starting on a page
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    ring: u64,

    /// Blocks per timing [default: about 8 MB copied for 2 copies (8 to
    /// 20,000 blocks); 16 MB or twice round the ring for 1]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iterations: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("copylimit", |cli: &Cli| {
        let o = Options {
            block: cli.bytes,
            copies: cli.copies,
            ring: cli.ring,
            iterations: cli.iterations,
        };
        labkit::cli::emit(cli.json, &copy::run(&o)?, copy::CopyReport::text)
    })
}
