//! `pipespeed2t COUNT BYTES`: see the crate documentation.

use clap::Parser;
use labkit::limits::size_in;
use pipespeed2::Report;
use pipespeed2t::ladder::{self, Check, Method};
use pipespeed2t::{Options, Transport};

/// Write COUNT blocks of BYTES into a pipe from one thread while a second
/// thread reads them (Bradford's pipespeed2t); the clock stops when every
/// byte has been read, checked and the reader joined. Prints the rate in
/// MB/s (10^6 bytes). Exit status: 0 ok, 1 failed (including bytes lost or
/// changed, or a reader that went away), 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(flatten)]
    blocks: pipespeed2::Blocks,

    /// Use a named pipe (mkfifo in a temporary directory) instead of an
    /// unnamed one [default: unnamed pipe]
    #[arg(long, conflicts_with = "socketpair")]
    fifo: bool,

    /// Use a Unix stream socket pair instead of a pipe
    #[arg(long)]
    socketpair: bool,

    /// Ask for a pipe buffer of this size (F_SETPIPE_SZ; the kernel rounds
    /// up to a power of two pages) [default: the kernel's, F_GETPIPE_SZ]
    #[arg(long, value_name = "BYTES", value_parser = size_in(1, 1 << 30),
          conflicts_with = "socketpair")]
    pipe_size: Option<u64>,

    /// Read in a forked child process instead of a second thread
    #[arg(long)]
    processes: bool,

    /// Write with vmsplice(2): the pipe takes the writer's pages instead of
    /// a copy, so each byte is copied once (by the reader), not twice
    #[arg(long, conflicts_with = "socketpair")]
    vmsplice: bool,

    /// Run a rung of the pipe ladder instead of the article's loop: blocks
    /// from a ring of page-aligned buffers, each stamped with its sequence
    /// number; the reader checks the number and a checksum of every block
    /// (write, vmsplice), or splices them to /dev/null unchecked
    /// (splice-null, reported as not verified). A pipe and threads only.
    #[arg(long, value_enum,
          conflicts_with_all = ["fifo", "socketpair", "processes", "vmsplice",
                                "reader_stops_after"])]
    method: Option<Method>,

    /// With --method: back the ring and the reader's buffer with huge pages
    /// (MAP_HUGETLB if the kernel has a pool, else MADV_HUGEPAGE; the
    /// report says which took)
    #[arg(long, requires = "method")]
    huge_pages: bool,

    /// With --method: slots in the writer's ring; vmsplice refuses fewer
    /// than the pipe's capacity in blocks plus two [default: 1 for write,
    /// that least for vmsplice]
    #[arg(long, value_name = "SLOTS", requires = "method",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    ring: Option<u64>,

    /// With --method: what the reader checks in every block
    #[arg(long, value_enum, default_value_t = Check::Checksum, requires = "method")]
    check: Check,

    /// With --method: make both ends non-blocking and spin on EAGAIN
    /// instead of sleeping (no wake-ups, two CPUs busy; compare the CPU
    /// time in --json)
    #[arg(long, requires = "method")]
    busy_poll: bool,

    /// Pin the writer to CPU A and the reader (thread, or child process with
    /// --processes) to CPU B: A,A puts both on one CPU, A,B one on each;
    /// the report then says where each loop ended [default: where the
    /// scheduler puts them]
    #[arg(long, value_name = "A,B", value_parser = parse_cpus,
          conflicts_with = "method")]
    cpus: Option<[usize; 2]>,

    /// Fault drill: the reader closes its end after this many bytes, so the
    /// writer meets EPIPE (the run then fails, exit 1) [default: never]
    #[arg(long, value_name = "BYTES", value_parser = labkit::limits::parse_size)]
    reader_stops_after: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    json: bool,
}

/// `A,B`: two CPUs (the same one twice for one CPU), each one this process
/// may run on.
fn parse_cpus(text: &str) -> Result<[usize; 2], String> {
    let bad = || format!("'{text}' is not two CPUs like 0,1 or 0,0");
    let (a, b) = text.split_once(',').ok_or_else(bad)?;
    let cpu = |c: &str| c.trim().parse::<usize>().map_err(|_| bad());
    let cpus = [cpu(a)?, cpu(b)?];
    labkit::affinity::check_allowed(&cpus).map_err(|e| e.message)?;
    Ok(cpus)
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("pipespeed2t", |cli: &Cli| {
        let transport = match (cli.fifo, cli.socketpair) {
            (true, _) => Transport::Fifo,
            (_, true) => Transport::Socketpair,
            _ => Transport::Pipe,
        };
        if let Some(method) = cli.method {
            let opts = ladder::Options {
                count: cli.blocks.count,
                block: cli.blocks.bytes,
                method,
                pipe_size: cli.pipe_size,
                huge_pages: cli.huge_pages,
                ring: cli.ring,
                check: cli.check,
                busy_poll: cli.busy_poll,
            };
            return ladder::run(&opts).and_then(|ladder| {
                // Without --json, the program's usual line.
                labkit::cli::emit(cli.json, &ladder, |l| l.report.text())
            });
        }
        let opts = Options {
            count: cli.blocks.count,
            block: cli.blocks.bytes,
            transport,
            pipe_size: cli.pipe_size,
            processes: cli.processes,
            vmsplice: cli.vmsplice,
            reader_stops_after: cli.reader_stops_after,
            cpus: cli.cpus,
        };
        pipespeed2t::run(&opts)
            .and_then(|report| labkit::cli::emit(cli.json, &report, Report::text))
    })
}
