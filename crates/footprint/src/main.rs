//! `footprint --kind threads|procs --workers N [--touch BYTES]`: see the
//! crate documentation.

use clap::Parser;
use footprint::{Kind, Snapshot};
use labkit::limits::size_in;

/// Create N idle threads or N idle processes and report what they cost in
/// memory (PSS and RSS from /proc/<pid>/smaps_rollup, kernel stacks, page
/// tables and slab from /proc/meminfo), per worker. Exit status: 0 ok,
/// 1 failed (a worker that died is named), 2 bad usage,
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Threads or processes
    #[arg(long, value_enum, default_value_t = Kind::Threads)]
    kind: Kind,

    /// Workers to create
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    workers: u32,

    /// Fill a buffer of this size first, then let every worker write one
    /// byte to each of its pages (copy-on-write for processes)
    #[arg(long, value_name = "BYTES", default_value = "0",
          value_parser = size_in(0, 1 << 30))]
    touch: u64,

    /// Print the measurements as one JSON object
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("footprint", |cli: &Cli| {
        footprint::run(cli.kind, cli.workers, cli.touch).and_then(|f| {
            labkit::cli::emit(cli.json, &f, |f| {
                let per = |g: fn(&Snapshot) -> u64| format!("{:.0}", f.per_worker(g));
                format!(
                    "{} idle {}: per worker PSS +{} KiB, RSS +{} KiB, kernel stack +{} KiB, \
                     page tables +{} KiB, slab +{} KiB, address space +{} KiB; all ready in {:.3} s\n",
                    f.workers,
                    if f.kind == Kind::Threads { "threads" } else { "processes" },
                    per(|s| s.pss_kib),
                    per(|s| s.rss_kib),
                    per(|s| s.kernel_stack_kib),
                    per(|s| s.vm_pte_kib),
                    per(|s| s.slab_unreclaimable_kib),
                    per(|s| s.vm_size_kib),
                    f.ready_s
                )
            })
        })
    })
}
