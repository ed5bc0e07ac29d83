//! The ladder's tables (its own file, `ladder.md`) and its chart.

use crate::chart::{Chart, Kind, Meaning};
use crate::results::Header;
use crate::table::{Table, range};
use labkit::limits::format_size;

use super::{KIB_64, Ladder};

/// The ladder's tables: the climb, the limits, and where the time goes.
pub(super) fn tables(l: &Ladder) -> Vec<Table> {
    let sizes: Vec<String> = l.blocks.iter().map(|&b| format_size(b)).collect();
    let middle = profile_block(l);
    let gain_header = format!("gain at {}", format_size(middle));
    let at = |rung: u32, block| {
        l.rows.iter().find(|x| x.rung == rung && x.block == block)
    };
    // Two tables, so that each fits the book's column: what each rung
    // takes away, then its rates.
    let mut steps = Table::new(
        "The pipe ladder: what each rung takes away",
        &["rung", "what it takes away", gain_header.as_str()],
    );
    let mut headers = vec!["rung"];
    headers.extend(sizes.iter().map(String::as_str));
    let mut climb = Table::new(
        "The pipe ladder: MB/s by block size (of the same-working-set copy)",
        &headers,
    );
    for r in &l.rungs {
        let gain = match (at(r.rung, middle), at(r.rung.wrapping_sub(1), middle)) {
            (Some(x), Some(before)) => {
                format!("{:.2}x", x.mb_per_s / before.mb_per_s)
            }
            _ => "-".into(),
        };
        let name = format!("{}. {}", r.rung, r.label);
        steps.row(vec![name.clone(), r.removes.to_string(), gain]);
        let mut cells = vec![name];
        for &block in &l.blocks {
            cells.push(at(r.rung, block).map_or("-".into(), |x| {
                format!(
                    "{} ({})",
                    crate::table::sig(x.mb_per_s),
                    crate::table::percent(x.fraction_of_memcpy)
                )
            }));
        }
        climb.row(cells);
    }
    steps.note(
        "Gain: MB/s over the rung above's, at the block size named. Rungs 1 to 4 \
         (and 6) check every block's sequence number and checksum inside the timed \
         loop; rung 5 checks nothing (it moves page references to /dev/null).",
    );
    climb.note(
        "Medians of the rounds, as pipespeed2t timed its own loop (MB = 10^6 bytes); \
         in brackets, the fraction of one thread's copy rate over the same working set \
         (the rung's ring and the reader's buffer) measured in the same round. The \
         fraction of the DRAM copy is in the JSON (fraction_of_dram) and, for the best \
         verified rung, in the copy table below.",
    );
    let g = &l.goals;
    if let Some(b) = &g.best_verified {
        climb.note(format!(
            "The best verified rung from 64 KiB to 1 MiB, rung {} at {}, reached {} of \
             the same-working-set copy.",
            b.rung,
            format_size(b.block),
            crate::table::percent(b.fraction_of_memcpy),
        ));
    }
    if let Some(gain) = g.gain_over_rung_1_at_64k {
        climb.note(format!(
            "At 64 KiB the best verified rung moved {gain:.1} times rung 1's bytes per \
             second."
        ));
    }
    climb.note(format!(
        "Load average (/proc/loadavg) before the ladder: {}; after: {}.",
        l.loadavg_before, l.loadavg_after
    ));

    let mut limits = Table::new(
        "The same-working-set copy, and the DRAM copy",
        &[
            "block",
            "copy, rungs 1-2 (MB/s)",
            "copy, rungs 3-5 (MB/s)",
            "best verified of DRAM",
        ],
    );
    for &block in &l.blocks {
        let at = |rung| l.rows.iter().find(|x| x.rung == rung && x.block == block);
        let best = l
            .rows
            .iter()
            .filter(|x| x.block == block && x.verified)
            .map(|x| x.fraction_of_dram)
            .fold(f64::NAN, f64::max);
        let copy = |rung| {
            at(rung).map_or("-".into(), |x| {
                format!(
                    "{} ({} working set)",
                    crate::table::sig(x.memcpy_mb_per_s),
                    format_size(x.working_set_bytes)
                )
            })
        };
        limits.row(vec![
            format_size(block),
            copy(2),
            copy(3),
            crate::table::percent(best),
        ]);
    }
    limits.note(match l.dram_mb_per_s {
        Some(d) => format!(
            "DRAM: one copy of {} into another, {} MB/s (median, min-max of {} rounds). \
             A verified transfer copies each byte once and reads it once, so one copy is \
             its ceiling.",
            format_size(l.dram_bytes),
            range(&d, 0),
            d.n
        ),
        None => "DRAM: not measured (less than 768 MiB of memory available).".into(),
    });

    let profile_block = profile_block(l);
    let mut profile = Table::new(
        format!(
            "Where the time goes, per {} block (medians)",
            format_size(profile_block)
        ),
        &[
            "rung",
            "writer calls",
            "reader calls",
            "page faults",
            "context switches",
            "CPU s per GB",
            "CPUs busy",
        ],
    );
    for x in l.rows.iter().filter(|x| x.block == profile_block) {
        let p = &x.per_block;
        profile.row(vec![
            format!("{}. {}", x.rung, x.label),
            format!("{:.2}", p.writer_calls),
            format!("{:.2}", p.reader_calls),
            format!("{:.3}", p.minor_faults),
            format!("{:.2}", p.switches),
            format!("{:.3}", p.cpu_s_per_gb),
            format!("{:.2}", p.cpus_busy),
        ]);
    }
    profile.note(
        "Calls: the write or vmsplice calls of the writer's loop and the read or splice \
         calls of the reader's, counted by the program; page faults: minor faults of both \
         loops (getrusage RUSAGE_THREAD); switches and CPU s per GB: the whole process \
         (wait4); CPUs busy: CPU time of the two loops over their wall time (2: both \
         threads ran all along; 1 or less: they took turns, or waited for a CPU).",
    );
    vec![steps, climb, limits, profile]
}

/// The block size the gains and the profile are shown at: 64 KiB, or the
/// middle of the list.
fn profile_block(l: &Ladder) -> u64 {
    if l.blocks.contains(&KIB_64) { KIB_64 } else { l.blocks[l.blocks.len() / 2] }
}

/// A rung's meaning on the charts: `write` into a pipe between threads
/// (the big pipe its second form), `vmsplice` (on huge pages its second
/// form, busy-polling its third), and `splice` to /dev/null.
fn rung_kind(r: &super::RungInfo) -> Kind {
    // The rung as declared, not its command line.
    let Some(rung) = super::RUNGS.iter().find(|x| x.rung == r.rung) else {
        return Meaning::Thread.into();
    };
    match rung.method {
        "vmsplice" if rung.busy_poll => Meaning::Vmsplice.form(2),
        "vmsplice" if rung.huge_pages => Meaning::Vmsplice.form(1),
        "vmsplice" => Meaning::Vmsplice.into(),
        "splice-null" => Meaning::Splice.into(),
        _ if rung.big_pipe => Meaning::Thread.form(1),
        _ => Meaning::Thread.into(),
    }
}

/// The ladder's chart: MB/s by block size per rung (band: the rounds'
/// min-max), and the limits.
pub(in crate::experiments::pipe_speed) fn chart(l: &Ladder) -> (String, Chart) {
    let mut chart = Chart {
        log_x: true,
        log_y: true,
        ..Chart::new(
            "The pipe ladder: MB/s by block size",
            "block size (bytes, log scale)",
            "MB/s (median, band: min-max; log scale)",
        )
    };
    for r in &l.rungs {
        let points = l.rows.iter().filter(|x| x.rung == r.rung);
        chart = chart.summaries(
            rung_kind(r),
            &format!("{}. {}", r.rung, r.label),
            points.map(|x| (x.block as f64, &x.range)),
        );
    }
    let copy = l.rows.iter().filter(|x| x.rung == 3);
    chart = chart.limit(
        "same-working-set copy (rung 3)",
        copy.map(|x| (x.block as f64, x.memcpy_mb_per_s)).collect(),
    );
    if let Some(d) = l.dram_mb_per_s {
        let line = l.blocks.iter().map(|&b| (b as f64, d.median)).collect();
        chart = chart.limit("DRAM copy", line);
    }
    ("ladder".to_string(), chart)
}

/// `ladder.md`, which the book includes: the ladder's tables.
pub(in crate::experiments::pipe_speed) fn markdown(
    l: &Ladder,
    header: &Header,
) -> String {
    crate::report::markdown(header, &tables(l))
}
