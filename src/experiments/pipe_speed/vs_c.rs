//! `--vs-c`: pipespeed2 and pipespeed2t against their C twins, in pairs
//! run back to back, on one CPU and unpinned; its tables, its chart and
//! its own Markdown file (`vs-c.md`, which the book includes).

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::chart::{Chart, Meaning};
use crate::engine::{Engine, Placement, setting};
use crate::stats::Summary;
use crate::table::{Table, col, range};
use labkit::{Error, Result};
use serde::Serialize;

use super::{Args, Line, Variant, pair_count};

/// A program against another at one placement and block: a Rust program
/// against its C twin, or (the control) a C program against itself. The
/// ratio is program MB/s over against MB/s, one per round (back to back).
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Ratio {
    pub(super) program: &'static str,
    pub(super) against: &'static str,
    pub(super) placement: &'static str,
    /// The CPU both programs ran on, pinned.
    pub(super) cpu: Option<usize>,
    pub(super) block_bytes: u64,
    pub(super) count: u64,
    pub(super) ratio: Summary,
}

/// The control's second copy, as a condition apart from the first.
const AGAIN: &str = "pipespeed2t.c, again";

/// The comparison with C: each of pipespeed2 and pipespeed2t against its
/// C twin at each of its block sizes, `rounds` pairs run back to back
/// (which goes first alternates), with every thread on one CPU and then
/// unpinned, at [`pair_count`] blocks unless `--count` says otherwise.
pub(super) fn compare_with_c(
    args: &Args,
    variants: &[Variant],
    engine: &mut Engine,
) -> Result<Vec<Ratio>> {
    let cpu = *labkit::affinity::allowed_cpus()?
        .first()
        .ok_or_else(|| Error::failed("this process may run on no CPU"))?;
    let mut jobs = Vec::new();
    // The grid's first two variants: pipespeed2, and pipespeed2t's plain pipe.
    let twins = [("pipespeed2", "pipespeed2.c"), ("pipespeed2t", "pipespeed2t.c")];
    for (v, (rust, c)) in variants.iter().zip(twins) {
        let c = Variant::new(
            (c, c),
            &c_twin(rust)?,
            Line { c: true, ..v.line },
            v.blocks.clone(),
        );
        jobs.push((Variant { key: rust, label: rust, ..v.clone() }, c.clone()));
        // The control: the two-thread C program against itself, pairs of
        // one binary, which shows how far apart two runs of the same code
        // land.
        if rust == "pipespeed2t" {
            jobs.push((c.clone(), Variant { key: AGAIN, ..c }));
        }
    }
    let mut steps = Vec::new();
    for placement in [Placement::OneCpu(cpu), Placement::Unpinned] {
        for (first, second) in &jobs {
            for &block in &first.blocks {
                steps.push((placement, first, second, block));
            }
        }
    }
    engine.progress(steps.len() * engine.runs_for(2), "pipe-speed vs C");
    let mut out = Vec::new();
    for (placement, first, second, block) in steps {
        let count = args.count.unwrap_or_else(|| pair_count(block));
        let at = setting([
            ("part", "vs-c".into()),
            ("pair", first.key.into()),
            ("placement", placement.name().into()),
            ("block_bytes", block.into()),
            ("count", count.into()),
        ]);
        let cpu = placement.cpus().map(|[c, _]| c);
        engine.measure(&at, &[first.key, second.key], |i| {
            [first, second][i].run(count, block, None, cpu)
        })?;
        let ratios =
            engine.observations().paired(&at, first.key, second.key, "mb_per_s");
        out.push(Ratio {
            program: first.key,
            against: if second.key == AGAIN { first.key } else { second.key },
            placement: placement.name(),
            cpu,
            block_bytes: block,
            count,
            ratio: Summary::of_rounds(ratios.unwrap_or_default()),
        });
    }
    Ok(out)
}

/// The ratios of the pair (program, against) at `placement`, by block.
fn of<'a>(
    ratios: &'a [Ratio],
    (program, against): (&str, &str),
    placement: &str,
) -> impl Iterator<Item = &'a Ratio> {
    let pair = (program, against, placement);
    ratios.iter().filter(move |r| (r.program, r.against, r.placement) == pair)
}

/// The pairs, in the order measured, at `placement`: (program, against).
fn pairs(ratios: &[Ratio], placement: &str) -> Vec<(&'static str, &'static str)> {
    let mut pairs = Vec::new();
    for r in ratios.iter().filter(|r| r.placement == placement) {
        if !pairs.contains(&(r.program, r.against)) {
            pairs.push((r.program, r.against));
        }
    }
    pairs
}

/// One table per placement (one CPU, unpinned), one column per pair of
/// programs: three columns of "median (min-max)" fit the book's column,
/// six did not.
pub(super) fn tables(ratios: &[Ratio]) -> Vec<Table> {
    let blocks: BTreeSet<u64> = ratios.iter().map(|r| r.block_bytes).collect();
    let mut tables = Vec::new();
    for placement in ["one-cpu", "unpinned"] {
        let pairs = pairs(ratios, placement);
        if pairs.is_empty() {
            continue;
        }
        let find =
            |pair, b| of(ratios, pair, placement).find(|r| r.block_bytes == b);
        let mut columns = vec![col("block (bytes)", |b: &u64| b.to_string())];
        for &pair in &pairs {
            columns.push(col(pair_name(pair), move |b: &u64| {
                find(pair, *b).map_or("-".into(), |r| range(&r.ratio, 3))
            }));
        }
        let words = name(placement);
        let mut t = Table::of(
            format!(
                "Rust against C (gcc -O2), {words}: Rust MB/s / C MB/s, \
                 median (min-max) of pairs"
            ),
            &blocks,
            &columns,
        );
        for &(program, against) in &pairs {
            let medians: Vec<f64> = blocks
                .iter()
                .filter_map(|&b| Some(find((program, against), b)?.ratio.median))
                .collect();
            if let Some(all) = Summary::of(&medians) {
                let close =
                    medians.iter().filter(|&&r| (r - 1.0).abs() <= 0.05).count();
                t.note(format!(
                    "{program} against {against}, {words}: {close} of {} block sizes \
                     within 5% (medians from {:.3} to {:.3}; their median {:.3}).",
                    all.n, all.min, all.max, all.median
                ));
            }
        }
        tables.push(t);
    }
    let rounds = ratios.first().map_or(0, |r| r.ratio.n);
    if let Some(last) = tables.last_mut() {
        last.note(format!(
            "{rounds} pairs per cell, the two programs run back to back (which goes \
             first alternates), at the counts in the JSON. One CPU: both programs \
             and all their threads pinned to one CPU, as on a one-CPU machine; \
             unpinned: the scheduler's choice. Above 1: the first program moved \
             more MB/s. The control runs pipespeed2t.c against itself: its scatter \
             is what the machine alone does to two runs of the same code."
        ));
    }
    tables
}

/// A placement in the tables' words: "one CPU", "unpinned".
fn name(placement: &str) -> &'static str {
    if placement == "one-cpu" { "one CPU" } else { "unpinned" }
}

/// "pipespeed2t" for a Rust program against its twin, "pipespeed2t.c /
/// itself" for the control.
fn pair_name((program, against): (&str, &str)) -> String {
    if program == against {
        format!("{program} / itself")
    } else {
        program.to_string()
    }
}

/// Build the C twin of `program` (`pipespeed2`, `pipespeed2t`) with what
/// the two share, `crates/pipespeed2/c/pipespeed.c`, the runner's way
/// ([`crate::bins::compile_c_with`]), as `<program>-c`; an edit to
/// `pipespeed.h` rebuilds them too (the build follows local includes).
pub fn c_twin(program: &str) -> Result<PathBuf> {
    let root = crate::checkout::sources().join("crates");
    let source = root.join(format!("{program}/c/{program}.c"));
    let shared = root.join("pipespeed2/c/pipespeed.c");
    crate::bins::compile_c_with(&[&source, &shared], &[], &format!("{program}-c"))
}

/// The ratios by block size, with "equal" and the 5% band the notes count
/// against drawn in; none without `--vs-c`.
pub(super) fn chart(ratios: &[Ratio]) -> Option<(String, Chart)> {
    if ratios.is_empty() {
        return None;
    }
    // The axis fits the ratios (they live around 1, not around 0).
    let mut chart = Chart {
        log_x: true,
        fit_y: true,
        ..Chart::new(
            "Rust against C, and C against itself: MB/s ratio (median of pairs)",
            "block size (bytes, log scale)",
            "first program's MB/s / second's",
        )
    }
    .guide(1.0, "equal (1.0)")
    .guide(0.95, "within 5% (0.95-1.05)")
    .guide(1.05, "within 5% (0.95-1.05)");
    for placement in ["one-cpu", "unpinned"] {
        for pair @ (program, against) in pairs(ratios, placement) {
            let points = of(ratios, pair, placement)
                .map(|r| (r.block_bytes as f64, &r.ratio));
            // The pair's program (the control: a program against itself), on
            // one CPU; unpinned is the second form.
            let meaning = if program == against {
                Meaning::Control
            } else {
                super::tables::variant_kind(program).meaning
            };
            let kind = meaning.form(u8::from(placement == "unpinned"));
            let label = format!("{}, {}", pair_name(pair), name(placement));
            chart = chart.summaries(kind, &label, points);
        }
    }
    Some(("vs-c".to_string(), chart))
}
