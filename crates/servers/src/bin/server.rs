//! `server --design NAME`: see the crate documentation.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use labkit::cli::seconds_in;
use servers::{Config, Design, Proto};

/// One of Stevens' chapter 30 server designs, or one of today's. Prints the
/// bound address first, serves the byte-count protocol until SIGINT,
/// SIGTERM or SIGHUP, then prints the CPU time of itself and its reaped
/// children and the connections per pool member, and exits 0.
/// Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The server design
    #[arg(long, value_enum)]
    design: Design,

    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,

    /// Pool members (processes, threads, event loops or runtime workers)
    /// for the designs that have a pool; the book's 15
    #[arg(long, default_value_t = 15,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pool: u32,

    /// Read requests one byte per read(2), as Stevens' threaded servers
    /// did, instead of buffered
    #[arg(long)]
    byte_reads: bool,

    /// Largest byte count a client may ask for, e.g. 16384 or 64M (the
    /// original's MAXN is 16384)
    #[arg(long, value_name = "BYTES", default_value = "16384",
          value_parser = labkit::limits::size_in(1, 1 << 30))]
    max_bytes: u64,

    /// Seconds to wait for a request, or for room to write a reply, before
    /// closing the connection (so a client that never sends cannot hold a
    /// worker forever)
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0,
          value_parser = seconds_in(0.001, 3600.0))]
    timeout: f64,

    /// epoll-exclusive without EPOLLEXCLUSIVE: every loop wakes for every
    /// connection
    #[arg(long)]
    herd: bool,

    /// Print the final stats as one JSON object
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("server", |cli: &Cli| {
        if cli.herd && cli.design != Design::EpollExclusive {
            return Err(labkit::Error::usage(
                "--herd only applies to --design epoll-exclusive",
            ));
        }
        let cfg = Config {
            design: cli.design,
            listen: cli.listen,
            pool: cli.pool as usize,
            proto: Proto {
                max_bytes: cli.max_bytes as usize,
                byte_reads: cli.byte_reads,
                timeout: Duration::from_secs_f64(cli.timeout),
            },
            herd: cli.herd,
        };
        servers::run(&cfg).and_then(|stats| {
            labkit::cli::emit(cli.json, &stats, servers::Stats::text)
        })
    })
}
