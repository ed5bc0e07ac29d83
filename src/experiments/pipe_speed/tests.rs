//! pipe-speed's counts, and its tables, headline and charts on small
//! inputs built by hand.

use super::*;
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

fn summary(values: &[f64]) -> Summary {
    Summary::of(values).unwrap()
}

/// A point at `block` bytes: `mb` MB/s (one round), `limit` the copy limit.
fn point(block: u64, mb: f64, limit: f64) -> Point {
    Point {
        block_bytes: block,
        count: 10,
        mb_per_s: summary(&[mb]),
        copy_limit_mb_per_s: limit,
        switches_per_block: 0.5,
        runs: vec![RunRecord {
            elapsed_s: 1.0,
            mb_per_s: mb,
            usage: Default::default(),
        }],
    }
}

fn variant(key: &'static str, points: Vec<Point>) -> VariantResult {
    VariantResult { key, label: key, program: "x".into(), flags: Vec::new(), points }
}

/// One thread at 1 and 4096 bytes; two threads (pipe) at 4096 and 64 KiB,
/// a fifo at half the pipe's rate.
fn data(vs_c: Vec<Comparison>) -> Data {
    Data {
        rounds: 1,
        full: false,
        placement: "unpinned",
        loadavg_before: "0.1".into(),
        loadavg_after: "0.2".into(),
        pipe: PipeFacts {
            default_buffer_bytes: 65536,
            max_buffer_bytes: Some(1 << 20),
            article_buffer_bytes: 4096,
        },
        copy_limit: Vec::new(),
        variants: vec![
            variant(
                "pipespeed2",
                vec![point(1, 2.0, 100.0), point(4096, 500.0, 2000.0)],
            ),
            variant(
                "pipe",
                vec![point(4096, 400.0, 2000.0), point(65536, 1000.0, 4000.0)],
            ),
            variant("fifo", vec![point(4096, 200.0, 2000.0)]),
        ],
        vs_c,
        ladder: None,
    }
}

#[test]
fn the_tables_show_each_rate_beside_its_limit_and_the_share() {
    let t = tables::tables(&data(Vec::new()));
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
    let h = tables::headline(&data(Vec::new()));
    let value = |k: &str| h[k]["value"].as_f64();
    assert_eq!(value("one_thread_peak_mb_s"), Some(500.0));
    assert_eq!(value("two_threads_peak_mb_s"), Some(1000.0));
    assert_eq!(value("two_threads_peak_block"), Some(65536.0));
    assert_eq!(value("two_threads_largest_over_peak"), Some(1.0));
    assert_eq!(value("fifo_over_pipe"), Some(0.5));
}

#[test]
fn the_charts_draw_each_variant_and_the_limit_at_its_blocks() {
    let mut d = data(Vec::new());
    d.copy_limit = [(1, 100.0), (4096, 2000.0), (65536, 4000.0)]
        .map(|(block_bytes, mb_per_s)| CopyPoint {
            block_bytes,
            mb_per_s,
            memcpy: summary(&[mb_per_s]),
            vector_loop: summary(&[mb_per_s / 2.0]),
        })
        .into();
    let charts = tables::charts(&d);
    let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["one-thread", "two-threads", "transports"]);
    let one = &charts[0].1.series;
    assert_eq!(one[0].points, [(1.0, 2.0), (4096.0, 500.0)]);
    assert_eq!(one[1].label, "copy limit (2 copies)");
    assert_eq!(one[1].points, [(1.0, 100.0), (4096.0, 2000.0)]);
    assert!(vs_c::chart(&d).is_none(), "no --vs-c, no chart");
}

#[test]
fn the_vs_c_tables_put_one_column_per_pair_and_count_the_close_ones() {
    let pair = |program, against, name, ratios: &[f64]| Comparison {
        program,
        against,
        placement: Placement { name, cpu: None },
        points: vec![PairPoint {
            block_bytes: 64,
            count: 5,
            program_mb_per_s: ratios.to_vec(),
            against_mb_per_s: vec![1.0; ratios.len()],
            ratio: summary(ratios),
        }],
    };
    let d = data(vec![
        pair("pipespeed2", "pipespeed2.c", "one CPU", &[1.0, 1.2]),
        pair("pipespeed2t.c", "pipespeed2t.c", "one CPU", &[0.98, 1.0]),
        pair("pipespeed2", "pipespeed2.c", "unpinned", &[1.02, 1.04]),
    ]);
    let t = vs_c::pairs_tables(&d);
    assert_eq!(t.len(), 2, "one table per placement");
    assert_eq!(
        t[0].headers,
        ["block (bytes)", "pipespeed2", "pipespeed2t.c / itself"]
    );
    assert_eq!(t[0].rows, [["64", "1.100 (1.000-1.200)", "0.990 (0.980-1.000)"]]);
    assert!(
        t[0].notes[0].contains("0 of 1 block sizes within 5%"),
        "{:?}",
        t[0].notes
    );
    assert!(
        t[0].notes[1].contains("1 of 1 block sizes within 5%"),
        "{:?}",
        t[0].notes
    );
    let (name, chart) = vs_c::chart(&d).unwrap();
    assert_eq!(name, "vs-c");
    assert_eq!(chart.series[2].label, "pipespeed2, unpinned");
    assert_eq!(chart.series[2].points, [(64.0, 1.03)]);
}
