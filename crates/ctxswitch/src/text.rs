//! The report as people read it (without `--json`).

use crate::{Mode, Report};

/// The report as the program prints it.
pub fn render(r: &Report) -> String {
    let place = match r.cpus {
        Some([a, b]) if a == b => format!("both pinned to CPU {a}"),
        Some([a, b]) => format!("A pinned to CPU {a}, B to CPU {b}"),
        None => format!(
            "not pinned (ended on CPUs {} and {})",
            r.last_cpus[0], r.last_cpus[1]
        ),
    };
    let s = &r.switches;
    format!(
        "ctxswitch: {}, {place}, {} round trips (+{} warm-up)\n\
         round trip               {:>9.3} us\n\
         per switch (raw)         {:>9.3} us   half a round trip\n\
         pipe write+read alone    {:>9.3} us   one task, no switch\n\
         per switch (net)         {:>9.3} us   (round trip - 2 x pipe) / 2\n\
         switches: kernel counted {} ({} voluntary, {} involuntary), \
         expected {} (2 per round trip): {}\n",
        if r.mode == Mode::Threads {
            "two threads of one process"
        } else {
            "two processes"
        },
        r.iterations,
        r.warmup,
        r.us_per_round_trip,
        r.us_per_switch,
        r.pipe_us,
        r.net_us_per_switch,
        s.voluntary + s.involuntary,
        s.voluntary,
        s.involuntary,
        s.expected,
        if s.holds { "ok" } else { "MISMATCH" },
    )
}
