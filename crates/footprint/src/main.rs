//! `footprint --kind threads|procs --workers N [--touch BYTES]`: see the
//! crate documentation; its flags are [`footprint::Options`].

use footprint::{Kind, Options, Snapshot};

fn main() -> std::process::ExitCode {
    labkit::cli::main("footprint", |cli: &Options| {
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
