//! The article-style tables, the headline and the charts of a run, made
//! from the engine's observations.

use std::collections::BTreeSet;

use crate::chart::{Chart, Kind, Meaning};
use crate::engine::{Observations, Placement, clusters, distribution, setting};
use crate::report::Headline;
use crate::stats::{Summary, median};
use crate::table::{Table, col, range_or_dash, sig};

use super::{
    ARTICLE_PEAK_2T_MB_S, ARTICLE_PIPE_BUFFER, ARTICLE_PLATEAU_2T_MB_S, COPY, Data,
    Placed, grid,
};

/// The blocks `key` ran at, at `placement`, in order.
fn blocks(obs: Observations, key: &str, placement: &str) -> Vec<u64> {
    let at = setting([("part", "grid".into()), ("placement", placement.into())]);
    obs.levels(&at, key, "block_bytes")
}

/// `key`'s MB/s at `block` and `placement`; its median is a cell's figure,
/// and what the best block is judged by.
fn rate(obs: Observations, key: &str, b: u64, placement: &str) -> Option<Summary> {
    obs.summary(&grid(b, placement), key, "mb_per_s")
}

/// Rounds that fall in separate clusters (unpinned rounds that ran on one
/// CPU and on two), each cluster's range and count: one median would
/// describe none of them.
fn split(rounds: &[f64]) -> Option<String> {
    (clusters(rounds).len() > 1).then(|| distribution(rounds, 0))
}

/// The copy limit at `block`: the faster of the medians of memcpy and the
/// vector loop, both copying each byte twice.
pub(super) fn limit(obs: Observations, block: u64) -> Option<f64> {
    let m = |metric| obs.median(&grid(block, "unpinned"), COPY, metric);
    Some(m("memcpy_mb_per_s")?.max(m("vector_loop_mb_per_s")?))
}

/// A rate's cell: its median, or its clusters when its rounds split.
fn cell(obs: Observations, key: &str, block: u64, placement: &str) -> String {
    let rounds = obs.rounds(&grid(block, placement), key, "mb_per_s");
    rounds.map_or("-".into(), |r| split(&r).unwrap_or_else(|| sig(median(&r))))
}

/// The block of `key`'s best median rate at `placement`, and its largest.
fn peak_and_largest(
    obs: Observations,
    key: &str,
    placement: &str,
) -> (Option<u64>, Option<u64>) {
    let blocks = blocks(obs, key, placement);
    let best =
        |b: &u64| rate(obs, key, *b, placement).map_or(f64::NAN, |r| r.median);
    let peak = blocks.iter().copied().max_by(|a, b| best(a).total_cmp(&best(b)));
    (peak, blocks.last().copied())
}

/// A peak's median rate and its block: `2409 at 4096-byte blocks`, and its
/// rounds' clusters if they split.
fn rate_at(obs: Observations, block: u64, placement: &str) -> String {
    let rounds = obs.rounds(&grid(block, placement), "pipe", "mb_per_s");
    let rounds = rounds.unwrap_or_default();
    let split = split(&rounds)
        .map_or(String::new(), |s| format!(" (its rounds in clusters: {s})"));
    format!("{} at {block}-byte blocks{split}", sig(median(&rounds)))
}

/// Then and now, one thread, two threads, and the pipe by placement.
pub(super) fn tables(d: &Data, obs: Observations) -> Vec<Table> {
    let mut tables = vec![then_and_now(d, obs), one_thread(obs), two_threads(obs)];
    tables.extend(by_placement(d, obs));
    tables
}

fn then_and_now(d: &Data, obs: Observations) -> Table {
    let mut t = Table::new(
        "Then and now: the article's Linux 2.4.2 figures beside this machine's",
        &["", "article (Linux 2.4.2)", "today"],
    );
    let max = d.pipe.max_buffer_bytes.map_or("unknown".into(), |n| n.to_string());
    t.row(vec![
        "pipe buffer (bytes)".into(),
        format!("{ARTICLE_PIPE_BUFFER}, fixed"),
        format!(
            "{} by default (F_GETPIPE_SZ), up to {max} (pipe-max-size)",
            d.pipe.default_buffer_bytes
        ),
    ]);
    let (peak, largest) = peak_and_largest(obs, "pipe", "unpinned");
    if let Some(peak) = peak {
        t.row(vec![
            "two threads, peak MB/s".into(),
            format!("about {ARTICLE_PEAK_2T_MB_S:.0}"),
            rate_at(obs, peak, "unpinned"),
        ]);
    }
    for p in pinned(d) {
        if let Some(peak) = peak_and_largest(obs, "pipe", p.name()).0 {
            let row = format!("two threads, peak MB/s, {}", p.describe());
            t.row(vec![row, "-".into(), rate_at(obs, peak, p.name())]);
        }
    }
    if let Some(largest) = largest {
        let big = rate(obs, "pipe-1M", largest, "unpinned").map(|r| sig(r.median));
        let big = big.map_or(String::new(), |m| format!("; {m} with a 1 MiB pipe"));
        t.row(vec![
            "two threads, very large blocks, MB/s".into(),
            format!("about {ARTICLE_PLATEAU_2T_MB_S:.0} (plateau)"),
            rate_at(obs, largest, "unpinned") + &big,
        ]);
    }
    let ratios: Vec<f64> = blocks(obs, "fifo", "unpinned")
        .into_iter()
        .filter_map(|b| {
            let median = |key| Some(rate(obs, key, b, "unpinned")?.median);
            Some(median("fifo")? / median("pipe")?)
        })
        .collect();
    if let Some(r) = Summary::of(&ratios) {
        t.row(vec![
            "named / unnamed pipe".into(),
            "no difference".into(),
            format!(
                "{:.2} (median over {} block sizes; {:.2}-{:.2})",
                r.median, r.n, r.min, r.max
            ),
        ]);
    }
    t.note(
        "Article: Bradford (2001), figure 4 and its text (Linux 2.4.2 on Red Hat 7.1); \
         see the book's References. MB = 10^6 bytes; today's figures are medians of \
         the rounds, unpinned unless a placement is named (one CPU: writer and reader \
         pinned to one CPU; two CPUs: one on each).",
    );
    t.note(format!(
        "Load average (/proc/loadavg) before the run: {}; after: {}.",
        d.loadavg_before, d.loadavg_after
    ));
    t
}

/// The median rate as a share of the copy limit at its block size.
fn of_limit(obs: Observations, key: &str, block: u64) -> String {
    let share = rate(obs, key, block, "unpinned").zip(limit(obs, block));
    share.map_or("-".into(), |(r, l)| format!("{:.1}%", 100.0 * r.median / l))
}

fn one_thread(obs: Observations) -> Table {
    let count = |b: &u64| {
        let o = obs.at(&grid(*b, "unpinned")).next();
        o.and_then(|o| o.setting["count"].as_u64())
            .map_or("-".into(), |c| c.to_string())
    };
    Table::of(
        "1. One thread (pipespeed2): write a block, read it back",
        &blocks(obs, "pipespeed2", "unpinned"),
        &[
            col("block (bytes)", |b: &u64| b.to_string()),
            col("count", count),
            col("MB/s", |b: &u64| {
                range_or_dash(rate(obs, "pipespeed2", *b, "unpinned"), 1)
            }),
            col("copy limit MB/s", |b: &u64| limit(obs, *b).map_or("-".into(), sig)),
            col("of copy limit", |b: &u64| of_limit(obs, "pipespeed2", *b)),
        ],
    )
    .noted(
        "MB/s: median (min-max) of the rounds, as the program timed its own loop. \
         Copy limit: two copies of each block by the copylimit program (the faster of \
         memcpy and a vector loop), the copying a pipe must do at least.",
    )
}

/// The transports, as table 2 heads them.
const TRANSPORTS: [(&str, &str); 6] = [
    ("pipe", "pipe"),
    ("pipe-1M", "pipe, 1 MiB buffer"),
    ("fifo", "fifo"),
    ("processes", "processes"),
    ("socketpair", "socket pair"),
    ("vmsplice", "vmsplice"),
];

fn switches(obs: Observations, block: u64, placement: &str) -> String {
    let s = obs.median(&grid(block, placement), "pipe", "switches_per_block");
    crate::table::or_dash(s, 2)
}

fn two_threads(obs: Observations) -> Table {
    let mut columns = vec![col("block (bytes)", |b: &u64| b.to_string())];
    for (key, header) in TRANSPORTS {
        columns.push(col(header, move |b: &u64| cell(obs, key, *b, "unpinned")));
    }
    columns.extend([
        col("copy limit", |b: &u64| limit(obs, *b).map_or("-".into(), sig)),
        col("pipe of copy limit", |b: &u64| of_limit(obs, "pipe", *b)),
        col("switches per block (pipe)", |b: &u64| switches(obs, *b, "unpinned")),
    ]);
    Table::of(
        "2. Writer and reader (pipespeed2t), MB/s by transport",
        &blocks(obs, "pipe", "unpinned"),
        &columns,
    )
    .noted(
        "Medians of the rounds (min and max are in the JSON), unpinned; rounds that \
         fall in separate clusters show each cluster's range and count instead. \
         Threads unless \"processes\"; switches: voluntary + involuntary context \
         switches of the whole process (wait4) per block.",
    )
}

/// The placements pinned: one CPU, and two when the run had two.
fn pinned(d: &Data) -> Vec<Placement> {
    let placement = |p: &Placed| match p.cpus? {
        [a, b] if a == b => Some(Placement::OneCpu(a)),
        [a, b] => Some(Placement::TwoCpus(a, b)),
    };
    d.placements.iter().filter_map(placement).collect()
}

/// The two-thread pipe at each placement: pinned, the medians (and their
/// switches per block); unpinned, its rounds as a distribution.
fn by_placement(d: &Data, obs: Observations) -> Option<Table> {
    let pinned = pinned(d);
    if pinned.is_empty() {
        return None;
    }
    let mut columns = vec![col("block (bytes)", |b: &u64| b.to_string())];
    for p in &pinned {
        let name = p.name();
        columns.push(col(p.describe(), move |b: &u64| cell(obs, "pipe", *b, name)));
    }
    columns.push(col("unpinned", |b: &u64| {
        let r = obs.rounds(&grid(*b, "unpinned"), "pipe", "mb_per_s");
        r.map_or("-".into(), |r| distribution(&r, 0))
    }));
    for p in &pinned {
        let (name, header) =
            (p.name(), format!("switches per block, {}", p.describe()));
        columns.push(col(header, move |b: &u64| switches(obs, *b, name)));
    }
    let t = Table::of(
        "3. Writer and reader (pipespeed2t, pipe, threads) by placement, MB/s",
        &blocks(obs, "pipe", "unpinned"),
        &columns,
    );
    Some(t.noted(
        "One CPU: writer and reader pinned to one CPU (pipespeed2t --cpus A,A), each \
         hand-off a context switch there; two CPUs: one on each (--cpus A,B), each \
         hand-off a wake-up across them; medians of the rounds. Unpinned: where the \
         scheduler put them, median (min-max), or, when the rounds fall in separate \
         clusters, each cluster's range (and count of rounds): a run may land on \
         either placement. The other transports by placement are in the JSON.",
    ))
}

/// The figures the claims are judged on: the pipe's buffer, the two-thread
/// pipe's peak and its rate at the largest block, named against unnamed,
/// unpinned as the article ran; then the same at each pinned placement,
/// their keys ending in the placement (`two_threads_peak_mb_s_one_cpu`).
pub(super) fn headline(d: &Data, obs: Observations) -> Headline {
    let one = peak_and_largest(obs, "pipespeed2", "unpinned").0;
    let mut h = crate::report::headline()
        .exact(
            "pipe_buffer_bytes",
            "a new pipe's buffer (F_GETPIPE_SZ)",
            d.pipe.default_buffer_bytes as f64,
            "bytes",
        )
        .rounds(
            "one_thread_peak_mb_s",
            "pipespeed2 (one thread): best rate",
            one.and_then(|b| {
                obs.rounds(&grid(b, "unpinned"), "pipespeed2", "mb_per_s")
            }),
            "MB/s",
        );
    let mut placements = vec![("unpinned", String::new(), String::new())];
    for p in pinned(d) {
        placements.push((
            p.name(),
            format!("_{}", p.name().replace('-', "_")),
            format!(", {}", p.describe()),
        ));
    }
    for (placement, suffix, on) in placements {
        let key = |k: &str| format!("{k}{suffix}");
        let (peak_block, largest_block) = peak_and_largest(obs, "pipe", placement);
        let rounds =
            |b: Option<u64>| obs.rounds(&grid(b?, placement), "pipe", "mb_per_s");
        let (peak, largest) = (rounds(peak_block), rounds(largest_block));
        // Round k of the largest block over round k of the best: the two
        // blocks' rounds, each balanced over its own conditions, may differ
        // in number; the pairs are the rounds both have.
        let n = peak.iter().chain(&largest).map(Vec::len).min().unwrap_or(0);
        let first = |r: &Option<Vec<f64>>| r.as_ref().map(|r| r[..n].to_vec());
        // Round k of every block size both measured: the named pipe over the
        // unnamed, run in the same round at each block, then that round's
        // median over blocks.
        let fifo_over_pipe: Vec<Vec<f64>> = blocks(obs, "fifo", placement)
            .into_iter()
            .filter_map(|b| {
                obs.paired(&grid(b, placement), "fifo", "pipe", "mb_per_s")
            })
            .collect();
        h = h
            .rounds(
                &key("two_threads_peak_mb_s"),
                &format!("pipespeed2t (two threads){on}: best rate"),
                peak.clone(),
                "MB/s",
            )
            .exact(
                &key("two_threads_peak_block"),
                &format!("pipespeed2t{on}: block size of the best rate (median)"),
                peak_block.map(|b| b as f64),
                "bytes",
            )
            .rounds(
                &key("two_threads_largest_mb_s"),
                &format!(
                    "pipespeed2t{on}: rate at the largest block ({} bytes)",
                    largest_block.unwrap_or(0)
                ),
                largest.clone(),
                "MB/s",
            )
            .paired(
                &key("two_threads_largest_over_peak"),
                &format!(
                    "pipespeed2t{on}: round k's rate at the largest block over its rate \
                     at the best block"
                ),
                first(&largest),
                first(&peak),
            )
            .rounds(
                &key("fifo_over_pipe"),
                &format!(
                    "named pipe's rate over the unnamed pipe's{on}, paired per block, \
                     each round's median over block sizes"
                ),
                crate::stats::round_medians(&fifo_over_pipe),
                "x",
            );
    }
    h.build()
}

/// A variant's meaning on the charts: one thread writing and reading its
/// own pipe (pipespeed2), threads or processes on a pipe (the 1 MiB pipe
/// the threads' second form), a named pipe, a socket pair, vmsplice.
pub(super) fn variant_kind(key: &str) -> Kind {
    match key {
        "pipespeed2" => Meaning::EventLoop.into(),
        "pipe-1M" => Meaning::Thread.form(1),
        "processes" => Meaning::Process.into(),
        "fifo" => Meaning::NamedPipe.into(),
        "socketpair" => Meaning::SocketPair.into(),
        "vmsplice" => Meaning::Vmsplice.into(),
        _ => Meaning::Thread.into(),
    }
}

/// A chart of MB/s by block size, both on log scales (the ladder's too).
pub(super) fn mb_chart(title: &str) -> Chart {
    let (x, y) =
        ("block size (bytes, log scale)", "MB/s (median, band: min-max; log scale)");
    Chart { log_x: true, log_y: true, ..Chart::new(title, x, y) }
}

pub(super) fn charts(d: &Data, obs: Observations) -> Vec<(String, Chart)> {
    let line = |key: &str, placement: &str| -> Vec<(f64, Summary)> {
        let blocks = blocks(obs, key, placement).into_iter();
        blocks
            .filter_map(|b| Some((b as f64, rate(obs, key, b, placement)?)))
            .collect()
    };
    let label =
        |key: &str| d.variants.iter().find(|v| v.key == key).map_or("", |v| v.label);
    let mut out = Vec::new();
    for (stem, title, keys) in [
        (
            "one-thread",
            "One thread: pipespeed2 (cf. the article's figure 1)",
            &["pipespeed2"][..],
        ),
        (
            "two-threads",
            "Writer and reader: pipespeed2t (cf. the article's figure 4)",
            &["pipe", "pipe-1M"],
        ),
        (
            "transports",
            "Writer and reader: named pipe, processes, socket pair, vmsplice",
            &["pipe", "fifo", "processes", "socketpair", "vmsplice"],
        ),
    ] {
        let mut chart = mb_chart(title);
        let mut all = BTreeSet::new();
        for &key in keys {
            let points = line(key, "unpinned");
            if !points.is_empty() {
                all.extend(points.iter().map(|p| p.0 as u64));
                chart = chart.summaries(variant_kind(key), label(key), points);
            }
        }
        let limits = all.iter().filter_map(|&b| Some((b as f64, limit(obs, b)?)));
        if !all.is_empty() {
            out.push((
                stem.into(),
                chart.limit("copy limit (2 copies)", limits.collect()),
            ));
        }
    }
    // Each placement its form: unpinned plain, one CPU dashed, two dotted.
    let pinned = pinned(d);
    if !pinned.is_empty() {
        let mut chart =
            mb_chart("Writer and reader by placement: pipe and processes");
        for key in ["pipe", "processes"] {
            let at = [Placement::Unpinned].into_iter().chain(pinned.iter().copied());
            for (form, p) in at.enumerate() {
                let kind = variant_kind(key).meaning.form(form as u8);
                let name = format!("{}, {}", label(key), p.describe());
                chart = chart.summaries(kind, &name, line(key, p.name()));
            }
        }
        out.push(("placement".into(), chart));
    }
    out
}
