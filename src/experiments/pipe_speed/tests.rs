//! pipe-speed's counts, and its tables, headline and charts on small
//! observations made by hand.

use super::*;
use crate::engine::{Observation, Observations};
use crate::stats::Summary;

#[test]
fn counts_follow_the_article() {
    assert_eq!(count_for(1, true), 500_000);
    assert_eq!(count_for(4096, true), 100_000);
    assert_eq!(count_for(100, true), 100_000);
    assert_eq!(count_for(1 << 20, true), 381);
    assert_eq!(count_for(1, false), 20_000);
    assert_eq!(count_for(1 << 20, false), 16);
    assert_eq!(ARTICLE_BLOCKS.len(), 62);
    assert_eq!(pair_count(1), 50_000);
    assert_eq!(pair_count(1 << 20), 38);
}

/// A command's words after the program, as one string.
fn line(cmd: &Command) -> String {
    shell_words(cmd.get_args().map(Into::into))
}

/// The words the reference results were measured with: each form's flags
/// after `COUNT BYTES --json`, then the placement's `--cpus`; the C twins
/// and pipespeed2 take `COUNT BYTES --json` alone.
#[test]
fn each_variant_runs_its_programs_words() {
    let path = Path::new("pipespeed2t");
    for (i, flags) in
        ["", "--pipe-size 1M", "--fifo", "--processes", "--socketpair", "--vmsplice"]
            .into_iter()
            .enumerate()
    {
        let (key, label, form) = FORMS[i];
        let two = Line { form: Some(form), c: false };
        let v = Variant::new((key, label), path, two, vec![]);
        assert_eq!(v.flags.join(" "), flags, "{key}");
        let pinned = format!("16 4096 --json {flags} --cpus 0,1");
        assert_eq!(
            line(&v.command(16, 4096, Some([0, 1]))),
            pinned.replace("  ", " ")
        );
        let unpinned = format!("16 4096 --json {flags}");
        assert_eq!(line(&v.command(16, 4096, None)), unpinned.trim_end());
    }
    let [one, c, ct] = [ONE, Line { c: true, ..ONE }, Line { c: true, ..TWO }]
        .map(|l| Variant::new(("c", "c"), path, l, vec![]));
    for v in [&one, &c, &ct] {
        assert!(v.flags.is_empty());
        assert_eq!(line(&v.command(50_000, 8, None)), "50000 8 --json");
    }
}

/// A pipe program's run of 10 blocks at `mb` MB/s, with 5 switches.
fn pipe(mb: f64) -> Box<dyn Observed> {
    let report = PipeReport { count: 10, mb_per_s: mb, ..PipeReport::default() };
    Box::new(PipeRun(report, Usage { voluntary_switches: 5, ..Usage::default() }))
}

/// The copy limit: memcpy at `mb` MB/s, the vector loop at half of it.
fn copy(mb: f64) -> Box<dyn Observed> {
    let (memcpy_mb_per_s, vector_loop_mb_per_s) = (mb, mb / 2.0);
    let c = CopyReport {
        memcpy_mb_per_s,
        vector_loop_mb_per_s,
        ..CopyReport::default()
    };
    Box::new(c)
}

/// Each variant's MB/s at `block` and `placement`, with the copy limit
/// `limit` when unpinned: the same in every round.
fn measure(
    e: &mut Engine,
    block: u64,
    placement: &str,
    rates: &[(&str, f64)],
    limit: f64,
) {
    let mut at = grid(block, placement);
    at.insert("count".into(), 10.into());
    let mut names: Vec<&str> = rates.iter().map(|r| r.0).collect();
    names.extend((placement == "unpinned").then_some(COPY));
    let run = |k: usize| Ok(rates.get(k).map_or_else(|| copy(limit), |r| pipe(r.1)));
    e.measure(&at, &names, run).unwrap();
}

fn data(engine: Engine, pinned: bool) -> (Data, Vec<Observation>) {
    let log = engine.finish();
    let keys = ["pipespeed2", "pipe", "pipe-1M", "fifo", "processes"];
    let mut placements = vec![Placed { name: "unpinned", cpus: None }];
    if pinned {
        placements.push(Placed { name: "one-cpu", cpus: Some([0, 0]) });
        placements.push(Placed { name: "two-cpus", cpus: Some([0, 1]) });
    }
    let data = Data {
        rounds: 1,
        full: false,
        placements,
        loadavg_before: "0.1".into(),
        loadavg_after: "0.2".into(),
        pipe: PipeFacts {
            default_buffer_bytes: 65536,
            max_buffer_bytes: Some(1 << 20),
            article_buffer_bytes: 4096,
        },
        copy_limit: Vec::new(),
        variants: keys
            .map(|k| Variant::new((k, k), Path::new("x"), ONE, vec![]))
            .into(),
        series: Observations(&log).series(),
        vs_c: Vec::new(),
        ladder: None,
    };
    (data, log)
}

/// One thread at 1 and 4096 bytes; two threads (pipe) at 4096 and 64 KiB,
/// a fifo at half the pipe's rate.
fn measured() -> (Data, Vec<Observation>) {
    let mut e = Engine::new(1);
    measure(&mut e, 1, "unpinned", &[("pipespeed2", 2.0)], 100.0);
    let at_4k = [("pipespeed2", 500.0), ("pipe", 400.0), ("fifo", 200.0)];
    measure(&mut e, 4096, "unpinned", &at_4k, 2000.0);
    measure(&mut e, 65536, "unpinned", &[("pipe", 1000.0)], 4000.0);
    data(e, false)
}

#[test]
fn the_tables_show_each_rate_beside_its_limit_and_the_share() {
    let (d, log) = measured();
    let t = tables::tables(&d, Observations(&log));
    assert_eq!(t.len(), 3, "no pinned placement, no table by placement");
    let one = &t[1];
    assert_eq!(one.rows.len(), 2);
    assert_eq!(one.rows[1], ["4096", "10", "500.0 (500.0-500.0)", "2000", "25.0%"]);
    let two = &t[2];
    let row = &two.rows[0];
    // block, pipe, pipe-1M, fifo, processes, socketpair, vmsplice, limit,
    // share, switches.
    assert_eq!(row[..4], ["4096", "400", "-", "200"]);
    assert_eq!(row[7..], ["2000", "20.0%", "0.50"]);
    assert_eq!(two.rows[1][8], "25.0%");
    // Then and now: the pipe's peak is 1000 MB/s at 64 KiB; fifo / pipe 0.5.
    let then = t[0].render();
    assert!(then.contains("1000 at 65536-byte blocks"), "{then}");
    assert!(then.contains("0.50 (median over 1 block sizes"), "{then}");
}

#[test]
fn the_headline_takes_the_peak_the_largest_and_the_fifo_ratio() {
    let (d, log) = measured();
    let h = tables::headline(&d, Observations(&log));
    let value = |k: &str| h.get(k).and_then(|f| f["value"].as_f64());
    assert_eq!(value("one_thread_peak_mb_s"), Some(500.0));
    assert_eq!(value("two_threads_peak_mb_s"), Some(1000.0));
    assert_eq!(value("two_threads_peak_block"), Some(65536.0));
    assert_eq!(value("two_threads_largest_over_peak"), Some(1.0));
    assert_eq!(value("fifo_over_pipe"), Some(0.5));
    assert_eq!(value("two_threads_peak_mb_s_one_cpu"), None);
}

#[test]
fn the_charts_draw_each_variant_and_the_limit_at_its_blocks() {
    let (d, log) = measured();
    let charts = tables::charts(&d, Observations(&log));
    let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["one-thread", "two-threads", "transports"]);
    let one = &charts[0].1.series;
    assert_eq!(one[0].points, [(1.0, 2.0), (4096.0, 500.0)]);
    assert_eq!(one[1].label, "copy limit (2 copies)");
    assert_eq!(one[1].points, [(1.0, 100.0), (4096.0, 2000.0)]);
    assert!(vs_c::chart(&d.vs_c).is_none(), "no --vs-c, no chart");
}

/// The pipe pinned to one CPU (800 MB/s) and to two (4000), and unpinned
/// rounds that landed on either: 900 and 1000, 7900 and 8000.
#[test]
fn each_placement_is_a_series_and_split_unpinned_rounds_show_their_clusters() {
    let mut e = Engine::new(4);
    measure(&mut e, 4096, "one-cpu", &[("pipe", 800.0), ("processes", 700.0)], 0.0);
    measure(
        &mut e,
        4096,
        "two-cpus",
        &[("pipe", 4000.0), ("processes", 3000.0)],
        0.0,
    );
    let mut at = grid(4096, "unpinned");
    at.insert("count".into(), 10.into());
    // The pipe's four rounds (it was warmed up pinned already).
    let mut rates = [900.0, 1000.0, 8000.0, 7900.0].into_iter();
    let mut run =
        |k| Ok(if k == 0 { pipe(rates.next().unwrap()) } else { copy(9000.0) });
    e.measure(&at, &["pipe", COPY], &mut run).unwrap();
    let (d, log) = data(e, true);
    let obs = Observations(&log);
    let t = tables::tables(&d, obs);
    assert_eq!(t[2].rows[0][1], "900-1000 (2) | 7900-8000 (2)");
    let by = &t[3];
    let h = ["block (bytes)", "one CPU (0)", "two CPUs (0, 1)", "unpinned"];
    assert_eq!(by.headers[..4], h);
    assert_eq!(
        by.rows[0][..4],
        ["4096", "800", "4000", "900-1000 (2) | 7900-8000 (2)"]
    );
    let then = t[0].render();
    assert!(then.contains("two threads, peak MB/s, two CPUs (0, 1) | - "), "{then}");
    assert!(then.contains("in clusters: 900-1000 (2) \\| 7900-8000 (2)"), "{then}");
    let h = tables::headline(&d, obs);
    let value = |k: &str| h[k]["value"].as_f64();
    assert_eq!(value("two_threads_peak_mb_s"), Some(4450.0));
    assert_eq!(value("two_threads_peak_mb_s_one_cpu"), Some(800.0));
    assert_eq!(value("two_threads_peak_mb_s_two_cpus"), Some(4000.0));
    let charts = tables::charts(&d, obs);
    let (name, chart) = charts.last().unwrap();
    assert_eq!(name, "placement");
    let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels[..3],
        ["pipe, unpinned", "pipe, one CPU (0)", "pipe, two CPUs (0, 1)"]
    );
}

#[test]
fn the_vs_c_tables_put_one_column_per_pair_and_count_the_close_ones() {
    let pair = |program, against, placement, ratios: &[f64]| vs_c::Ratio {
        program,
        against,
        placement,
        cpu: None,
        block_bytes: 64,
        count: 5,
        ratio: Summary::of(ratios).unwrap(),
    };
    let ratios = vec![
        pair("pipespeed2", "pipespeed2.c", "one-cpu", &[1.0, 1.2]),
        pair("pipespeed2t.c", "pipespeed2t.c", "one-cpu", &[0.98, 1.0]),
        pair("pipespeed2", "pipespeed2.c", "unpinned", &[1.02, 1.04]),
    ];
    let t = vs_c::tables(&ratios);
    assert_eq!(t.len(), 2, "one table per placement");
    assert_eq!(
        t[0].headers,
        ["block (bytes)", "pipespeed2", "pipespeed2t.c / itself"]
    );
    assert_eq!(t[0].rows, [["64", "1.100 (1.000-1.200)", "0.990 (0.980-1.000)"]]);
    assert!(t[0].title.contains("C (gcc -O2), one CPU: "), "{}", t[0].title);
    for (i, close) in ["0 of 1", "1 of 1"].into_iter().enumerate() {
        let within = format!("{close} block sizes within 5%");
        assert!(t[0].notes[i].contains(&within), "{:?}", t[0].notes);
    }
    let (name, chart) = vs_c::chart(&ratios).unwrap();
    assert_eq!(name, "vs-c");
    assert_eq!(chart.series[2].label, "pipespeed2, unpinned");
    assert_eq!(chart.series[2].points, [(64.0, 1.03)]);
}
