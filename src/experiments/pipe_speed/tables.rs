//! The article-style tables, the headline and the charts of a run.

use crate::chart::{Chart, Kind, Meaning};
use crate::report::Headline;
use crate::stats::Summary;
use crate::table::{Table, range};

use super::{
    ARTICLE_PEAK_2T_MB_S, ARTICLE_PIPE_BUFFER, ARTICLE_PLATEAU_2T_MB_S, Data, Point,
    VariantResult,
};

/// Then and now, one thread, two threads.
pub(super) fn tables(data: &Data) -> Vec<Table> {
    vec![then_and_now(data), one_thread_table(data), two_thread_table(data)]
}

fn variant<'a>(data: &'a Data, key: &str) -> Option<&'a VariantResult> {
    data.variants.iter().find(|v| v.key == key)
}

fn at(v: Option<&VariantResult>, block: u64) -> Option<&Point> {
    v?.points.iter().find(|p| p.block_bytes == block)
}

/// The two-thread pipe's figures the then-and-now table and the headline
/// both give.
struct Figures<'a> {
    /// The point of the best median rate.
    peak: Option<&'a Point>,
    /// The point of the largest block.
    largest: Option<&'a Point>,
    /// Named over unnamed pipe, at every block size both measured.
    fifo_over_pipe: Option<Summary>,
}

fn figures(data: &Data) -> Figures<'_> {
    let pipe = variant(data, "pipe");
    let points = pipe.map_or(&[][..], |v| &v.points);
    let ratios: Vec<f64> = variant(data, "fifo")
        .map_or(&[][..], |v| &v.points)
        .iter()
        .filter_map(|f| {
            at(pipe, f.block_bytes).map(|p| f.mb_per_s.median / p.mb_per_s.median)
        })
        .collect();
    Figures {
        peak: points
            .iter()
            .max_by(|a, b| a.mb_per_s.median.total_cmp(&b.mb_per_s.median)),
        largest: points.iter().max_by_key(|p| p.block_bytes),
        fifo_over_pipe: Summary::of(&ratios),
    }
}

/// A point's median rate and its block: `2409 at 4096-byte blocks`.
fn rate_at(p: &Point) -> String {
    let rate = crate::table::sig(p.mb_per_s.median);
    format!("{rate} at {}-byte blocks", p.block_bytes)
}

fn then_and_now(data: &Data) -> Table {
    let mut t = Table::new(
        "Then and now: the article's Linux 2.4.2 figures beside this machine's",
        &["", "article (Linux 2.4.2)", "today"],
    );
    let max = data.pipe.max_buffer_bytes.map_or("unknown".into(), |n| n.to_string());
    t.row(vec![
        "pipe buffer (bytes)".into(),
        format!("{ARTICLE_PIPE_BUFFER}, fixed"),
        format!(
            "{} by default (F_GETPIPE_SZ), up to {max} (pipe-max-size)",
            data.pipe.default_buffer_bytes
        ),
    ]);
    let f = figures(data);
    if let Some(peak) = f.peak {
        t.row(vec![
            "two threads, peak MB/s".into(),
            format!("about {ARTICLE_PEAK_2T_MB_S:.0}"),
            rate_at(peak),
        ]);
    }
    if let Some(largest) = f.largest {
        let big = at(variant(data, "pipe-1M"), largest.block_bytes).map_or(
            String::new(),
            |p| {
                format!(
                    "; {} with a 1 MiB pipe",
                    crate::table::sig(p.mb_per_s.median)
                )
            },
        );
        t.row(vec![
            "two threads, very large blocks, MB/s".into(),
            format!("about {ARTICLE_PLATEAU_2T_MB_S:.0} (plateau)"),
            rate_at(largest) + &big,
        ]);
    }
    if let Some(r) = f.fifo_over_pipe {
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
         the rounds, unpinned.",
    );
    t.note(format!(
        "Load average (/proc/loadavg) before the run: {}; after: {}.",
        data.loadavg_before, data.loadavg_after
    ));
    t
}

/// The median rate as a share of the copy limit at its block size.
fn of_limit(p: &Point) -> String {
    format!("{:.1}%", 100.0 * p.mb_per_s.median / p.copy_limit_mb_per_s)
}

fn one_thread_table(data: &Data) -> Table {
    let mut t = Table::new(
        "1. One thread (pipespeed2): write a block, read it back",
        &["block (bytes)", "count", "MB/s", "copy limit MB/s", "of copy limit"],
    );
    for p in variant(data, "pipespeed2").map_or(&[][..], |v| &v.points) {
        t.row(vec![
            p.block_bytes.to_string(),
            p.count.to_string(),
            range(&p.mb_per_s, 1),
            crate::table::sig(p.copy_limit_mb_per_s),
            of_limit(p),
        ]);
    }
    t.note("MB/s: median (min-max) of the rounds, as the program timed its own loop. \
            Copy limit: two copies of each block by the copylimit program (the faster of memcpy and a \
            vector loop), the copying a pipe must do at least.");
    t
}

fn two_thread_table(data: &Data) -> Table {
    let keys = ["pipe", "pipe-1M", "fifo", "processes", "socketpair", "vmsplice"];
    let mut t = Table::new(
        "2. Writer and reader (pipespeed2t), MB/s by transport",
        &[
            "block (bytes)",
            "pipe",
            "pipe, 1 MiB buffer",
            "fifo",
            "processes",
            "socket pair",
            "vmsplice",
            "copy limit",
            "pipe of copy limit",
            "switches per block (pipe)",
        ],
    );
    let pipe = variant(data, "pipe");
    for p in pipe.map_or(&[][..], |v| &v.points) {
        let mut cells = vec![p.block_bytes.to_string()];
        for key in keys {
            cells.push(
                at(variant(data, key), p.block_bytes)
                    .map_or("-".into(), |q| crate::table::sig(q.mb_per_s.median)),
            );
        }
        cells.push(crate::table::sig(p.copy_limit_mb_per_s));
        cells.push(of_limit(p));
        cells.push(format!("{:.2}", p.switches_per_block));
        t.row(cells);
    }
    t.note("Medians of the rounds (min and max are in the JSON). Threads unless \
            \"processes\"; switches: voluntary + involuntary context switches of the whole \
            process (wait4) per block.");
    t
}

/// The figures the claims are judged on: the pipe's buffer, the two-thread
/// pipe's peak and its rate at the largest block, named against unnamed.
pub(super) fn headline(data: &Data) -> Headline {
    let Figures { peak, largest, .. } = figures(data);
    let rates =
        |p: &Point| -> Vec<f64> { p.runs.iter().map(|r| r.mb_per_s).collect() };
    let one = variant(data, "pipespeed2").and_then(|v| {
        v.points
            .iter()
            .max_by(|a, b| a.mb_per_s.median.total_cmp(&b.mb_per_s.median))
    });
    // Round k of every block size: the named pipe over the unnamed, run
    // back to back at each block, then that round's median over blocks.
    let pipe = variant(data, "pipe");
    let pairs: Vec<(Vec<f64>, Vec<f64>)> = variant(data, "fifo")
        .map_or(&[][..], |v| &v.points)
        .iter()
        .filter_map(|f| Some((rates(f), rates(at(pipe, f.block_bytes)?))))
        .collect();
    let rounds = pairs.iter().map(|(f, p)| f.len().min(p.len())).min().unwrap_or(0);
    let fifo_over_pipe = (!pairs.is_empty() && rounds > 0).then(|| {
        (0..rounds)
            .map(|k| {
                let r: Vec<f64> = pairs.iter().map(|(f, p)| f[k] / p[k]).collect();
                crate::stats::median(&r)
            })
            .collect::<Vec<f64>>()
    });
    crate::report::headline()
        .exact(
            "pipe_buffer_bytes",
            "a new pipe's buffer (F_GETPIPE_SZ)",
            data.pipe.default_buffer_bytes as f64,
            "bytes",
        )
        .rounds("one_thread_peak_mb_s", "pipespeed2 (one thread): best rate", one.map(rates), "MB/s")
        .rounds(
            "two_threads_peak_mb_s",
            "pipespeed2t (two threads): best rate",
            peak.map(rates),
            "MB/s",
        )
        .exact(
            "two_threads_peak_block",
            "pipespeed2t: block size of the best rate (median)",
            peak.map(|p| p.block_bytes as f64),
            "bytes",
        )
        .rounds(
            "two_threads_largest_mb_s",
            &format!(
                "pipespeed2t: rate at the largest block ({} bytes)",
                largest.map_or(0, |p| p.block_bytes)
            ),
            largest.map(rates),
            "MB/s",
        )
        .paired(
            "two_threads_largest_over_peak",
            "pipespeed2t: round k's rate at the largest block over its rate at the best block",
            largest.map(rates),
            peak.map(rates),
        )
        .rounds(
            "fifo_over_pipe",
            "named pipe's rate over the unnamed pipe's, paired per block, each round's \
             median over block sizes",
            fifo_over_pipe,
            "x",
        )
        .build()
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

pub(super) fn charts(data: &Data) -> Vec<(String, Chart)> {
    fn line(v: &VariantResult) -> impl Iterator<Item = (f64, &Summary)> {
        v.points.iter().map(|p| (p.block_bytes as f64, &p.mb_per_s))
    }
    let limit = |blocks: &[u64]| -> Vec<(f64, f64)> {
        data.copy_limit
            .iter()
            .filter(|c| blocks.contains(&c.block_bytes))
            .map(|c| (c.block_bytes as f64, c.mb_per_s))
            .collect()
    };
    let mut out = Vec::new();
    let new = |title: &str| Chart {
        log_x: true,
        log_y: true,
        ..Chart::new(
            title,
            "block size (bytes, log scale)",
            "MB/s (median, band: min-max; log scale)",
        )
    };
    if let Some(v) = variant(data, "pipespeed2").filter(|v| !v.points.is_empty()) {
        let blocks: Vec<u64> = v.points.iter().map(|p| p.block_bytes).collect();
        let chart = new("One thread: pipespeed2 (cf. the article's figure 1)")
            .summaries(variant_kind(v.key), v.label, line(v));
        out.push((
            "one-thread".to_string(),
            chart.limit("copy limit (2 copies)", limit(&blocks)),
        ));
    }
    for (stem, title, keys) in [
        (
            "two-threads",
            "Writer and reader: pipespeed2t (cf. the article's figure 4)",
            &["pipe", "pipe-1M"][..],
        ),
        (
            "transports",
            "Writer and reader: named pipe, processes, socket pair, vmsplice",
            &["pipe", "fifo", "processes", "socketpair", "vmsplice"],
        ),
    ] {
        let mut chart = new(title);
        let mut blocks = Vec::new();
        for v in keys.iter().filter_map(|&k| variant(data, k)) {
            if !v.points.is_empty() {
                blocks.extend(v.points.iter().map(|p| p.block_bytes));
                chart = chart.summaries(variant_kind(v.key), v.label, line(v));
            }
        }
        if !blocks.is_empty() {
            out.push((
                stem.to_string(),
                chart.limit("copy limit (2 copies)", limit(&blocks)),
            ));
        }
    }
    out
}
