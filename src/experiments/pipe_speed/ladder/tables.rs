//! The ladder's tables (its own file, `ladder.md`) and its chart.

use crate::chart::{Chart, Kind, Meaning};
use crate::engine::Observations;
use crate::table::{Table, col, percent, range, sig};
use labkit::limits::format_size;
use pipespeed2t::ladder::Method;

use super::{KIB_64, Ladder, PROFILE, Row, RungInfo, dram, rows};

/// The ladder's tables: the climb, the limits, and where the time goes.
pub(in crate::experiments::pipe_speed) fn tables(
    l: &Ladder,
    obs: Observations,
) -> Vec<Table> {
    let rows = rows(&l.rungs, &l.blocks, obs);
    let middle = profile_block(l);
    let at = |rung: u32, block| {
        rows.iter().find(|x| x.rung.rung == rung && x.block == block)
    };
    // Two tables, so that each fits the book's column: what each rung
    // takes away, then its rates.
    let steps = Table::of(
        "The pipe ladder: what each rung takes away",
        &l.rungs,
        &[
            col("rung", RungInfo::title),
            col("what it takes away", |r: &RungInfo| r.removes.to_string()),
            col(format!("gain at {}", format_size(middle)), |r: &RungInfo| {
                let (x, before) =
                    (at(r.rung, middle), at(r.rung.wrapping_sub(1), middle));
                let gain = x.zip(before).map(|(x, b)| x.mb.median / b.mb.median);
                gain.map_or("-".into(), |g| format!("{g:.2}x"))
            }),
        ],
    )
    .noted(
        "Gain: MB/s over the rung above's, at the block size named. Rungs 1 to 4 \
         (and 6) check every block's sequence number and checksum inside the timed \
         loop; rung 5 checks nothing (it moves page references to /dev/null).",
    );
    let mut columns = vec![col("rung", RungInfo::title)];
    for &block in &l.blocks {
        columns.push(col(format_size(block), move |r: &RungInfo| {
            at(r.rung, block).map_or("-".into(), |x| {
                format!("{} ({})", sig(x.mb.median), percent(x.fraction_of_memcpy))
            })
        }));
    }
    let mut climb = Table::of(
        "The pipe ladder: MB/s by block size (of the same-working-set copy)",
        &l.rungs,
        &columns,
    )
    .noted(
        "Medians of the rounds, as pipespeed2t timed its own loop (MB = 10^6 bytes); \
         in brackets, the fraction of one thread's copy rate over the same working set \
         (the rung's ring and the reader's buffer) measured in the same round. The \
         fraction of the DRAM copy is, for the best verified rung, in the copy table \
         below.",
    );
    let g = &l.goals;
    if let Some(b) = &g.best_verified {
        climb.note(format!(
            "The best verified rung from 64 KiB to 1 MiB, rung {} at {}, reached {} of \
             the same-working-set copy.",
            b.rung,
            format_size(b.block),
            percent(b.fraction_of_memcpy),
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

    let copy = |rung| {
        move |b: &u64| {
            at(rung, *b).map_or("-".into(), |x| {
                let set = format_size(x.working_set as u64);
                format!("{} ({set} working set)", sig(x.copy))
            })
        }
    };
    let dram = dram(obs);
    let limits = Table::of(
        "The same-working-set copy, and the DRAM copy",
        &l.blocks,
        &[
            col("block", |b: &u64| format_size(*b)),
            col("copy, rungs 1-2 (MB/s)", copy(2)),
            col("copy, rungs 3-5 (MB/s)", copy(3)),
            col("best verified of DRAM", |b: &u64| {
                let verified = rows.iter().filter(|x| x.block == *b && x.verified);
                percent(verified.map(|x| x.fraction_of_dram).fold(f64::NAN, f64::max))
            }),
        ],
    )
    .noted(match dram {
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

    let profile: Vec<&Row> = rows.iter().filter(|x| x.block == middle).collect();
    let mut columns = vec![col("rung", |x: &&Row| x.rung.title())];
    for (i, (_, header, digits)) in PROFILE.into_iter().enumerate() {
        columns.push(col(header, move |x: &&Row| {
            format!("{:.digits$}", x.per_block[i])
        }));
    }
    let profile = Table::of(
        format!("Where the time goes, per {} block (medians)", format_size(middle)),
        &profile,
        &columns,
    )
    .noted(
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
fn rung_kind(r: &RungInfo) -> Kind {
    // The rung as declared, not its command line.
    let Some(rung) = super::RUNGS.iter().find(|x| x.rung == r.rung) else {
        return Meaning::Thread.into();
    };
    match rung.method {
        Method::Vmsplice if rung.busy_poll => Meaning::Vmsplice.form(2),
        Method::Vmsplice if rung.huge_pages => Meaning::Vmsplice.form(1),
        Method::Vmsplice => Meaning::Vmsplice.into(),
        Method::SpliceNull => Meaning::Splice.into(),
        _ if rung.big_pipe => Meaning::Thread.form(1),
        _ => Meaning::Thread.into(),
    }
}

/// The ladder's chart: MB/s by block size per rung (band: the rounds'
/// min-max), and the limits.
pub(in crate::experiments::pipe_speed) fn chart(
    l: &Ladder,
    obs: Observations,
) -> (String, Chart) {
    let rows = rows(&l.rungs, &l.blocks, obs);
    let mut chart =
        super::super::tables::mb_chart("The pipe ladder: MB/s by block size");
    for r in &l.rungs {
        let points = rows.iter().filter(|x| x.rung.rung == r.rung);
        chart = chart.summaries(
            rung_kind(r),
            &r.title(),
            points.map(|x| (x.block as f64, x.mb)),
        );
    }
    let copy = rows.iter().filter(|x| x.rung.rung == 3);
    chart = chart.limit(
        "same-working-set copy (rung 3)",
        copy.map(|x| (x.block as f64, x.copy)).collect(),
    );
    if let Some(d) = dram(obs) {
        let line = l.blocks.iter().map(|&b| (b as f64, d.median)).collect();
        chart = chart.limit("DRAM copy", line);
    }
    ("ladder".to_string(), chart)
}
