//! `--vs-c`: pipespeed2 and pipespeed2t against their C twins, in pairs
//! run back to back, on one CPU and unpinned; its tables, its chart and
//! its own Markdown file (`vs-c.md`, which the book includes).

use std::path::PathBuf;

use crate::chart::{Chart, Meaning};
use crate::stats::{Summary, paired_ratio, round_order};
use crate::table::{Table, range};
use labkit::limits::format_size;
use labkit::{Error, Result};

use super::{
    Args, Comparison, Data, PairPoint, Placement, Variant, pair_count, spawn,
};

/// The comparison with C: each of pipespeed2 and pipespeed2t against its
/// C twin at each of its block sizes, `rounds` pairs run back to back
/// (which goes first alternates), with every thread on one CPU and then
/// unpinned, at [`pair_count`] blocks unless `--count` says otherwise.
pub(super) fn compare_with_c(
    args: &Args,
    bins: &[PathBuf],
    variants: &[Variant],
) -> Result<Vec<Comparison>> {
    let cpu = *labkit::affinity::allowed_cpus()?
        .first()
        .ok_or_else(|| Error::failed("this process may run on no CPU"))?;
    let placements = [
        Placement { name: "one CPU", cpu: Some(cpu) },
        Placement { name: "unpinned", cpu: None },
    ];
    let twins = [
        ("pipespeed2", "pipespeed2.c", &bins[0], "pipespeed2"),
        ("pipespeed2t", "pipespeed2t.c", &bins[1], "pipe"),
    ];
    let rounds = args.common.rounds as usize;
    let mut jobs = Vec::new();
    for (rust, c, path, key) in twins {
        let c_path = c_twin(rust)?;
        let blocks = variants
            .iter()
            .find(|v| v.key == key)
            .map_or(Vec::new(), |v| v.blocks.clone());
        let program = |key, path: &PathBuf| Variant {
            key,
            label: key,
            path: path.clone(),
            flags: Vec::new(),
            blocks: blocks.clone(),
        };
        let c = program(c, &c_path);
        // The control: the two-thread C program against itself, pairs of
        // one binary, which shows how far apart two runs of the same code
        // land.
        let control = (rust == "pipespeed2t").then(|| (c.clone(), c.clone()));
        jobs.push((program(rust, path), c));
        jobs.extend(control);
    }
    let steps: usize =
        jobs.iter().map(|(r, _)| r.blocks.len()).sum::<usize>() * rounds * 2;
    let bar =
        crate::progress::bar((steps * placements.len()) as u64, "pipe-speed vs C");
    let mut out = Vec::new();
    for placement in placements {
        for (first, second) in &jobs {
            let mut points = Vec::new();
            for &block in &first.blocks {
                bar.set_message(format!(
                    "{}, {}, {} bytes",
                    first.key,
                    placement.name,
                    format_size(block)
                ));
                let count = args.count.unwrap_or_else(|| pair_count(block));
                let mut rates = [Vec::new(), Vec::new()];
                for round in 0..rounds {
                    for i in round_order(2, round) {
                        let v = [first, second][i];
                        let mut cmd = v.command(count, block);
                        if let Some(cpu) = placement.cpu {
                            labkit::affinity::pin_command(&mut cmd, cpu)?;
                        }
                        let (printed, _) = spawn(v, cmd, count, block)?;
                        rates[i].push(printed.mb_per_s);
                        bar.inc(1);
                    }
                }
                let [mine, theirs] = rates;
                points.push(PairPoint {
                    block_bytes: block,
                    count,
                    ratio: paired_ratio(&mine, &theirs).expect("at least one round"),
                    program_mb_per_s: mine,
                    against_mb_per_s: theirs,
                });
            }
            out.push(Comparison {
                program: first.key,
                against: second.key,
                placement,
                points,
            });
        }
    }
    bar.finish_and_clear();
    Ok(out)
}

/// One table per placement (one CPU, unpinned), one column per pair of
/// programs: three columns of "median (min-max)" fit the book's column,
/// six did not.
pub(super) fn pairs_tables(data: &Data) -> Vec<Table> {
    let mut placements: Vec<&str> = Vec::new();
    for c in &data.vs_c {
        if !placements.contains(&c.placement.name) {
            placements.push(c.placement.name);
        }
    }
    let mut blocks: Vec<u64> = data
        .vs_c
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.block_bytes))
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    let mut tables = Vec::new();
    for placement in placements {
        let columns: Vec<&Comparison> =
            data.vs_c.iter().filter(|c| c.placement.name == placement).collect();
        let headers: Vec<String> = std::iter::once("block (bytes)".to_string())
            .chain(columns.iter().map(|c| pair_name(c)))
            .collect();
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(
            format!(
                "Rust against C (gcc -O2), {placement}: Rust MB/s / C MB/s, \
                 median (min-max) of pairs"
            ),
            &headers,
        );
        for &block in &blocks {
            let mut cells = vec![block.to_string()];
            for c in &columns {
                cells.push(
                    c.points
                        .iter()
                        .find(|p| p.block_bytes == block)
                        .map_or("-".into(), |p| range(&p.ratio, 3)),
                );
            }
            t.row(cells);
        }
        for c in &columns {
            let medians: Vec<f64> =
                c.points.iter().map(|p| p.ratio.median).collect();
            if let Some(all) = Summary::of(&medians) {
                let close =
                    medians.iter().filter(|&&r| (r - 1.0).abs() <= 0.05).count();
                t.note(format!(
                    "{} against {}, {}: {close} of {} block sizes within 5% (medians \
                     from {:.3} to {:.3}; their median {:.3}).",
                    c.program,
                    c.against,
                    c.placement.name,
                    all.n,
                    all.min,
                    all.max,
                    all.median
                ));
            }
        }
        tables.push(t);
    }
    let rounds =
        data.vs_c.first().and_then(|c| c.points.first()).map_or(0, |p| p.ratio.n);
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

/// "pipespeed2t" for a Rust program against its twin, "pipespeed2t.c /
/// itself" for the control.
fn pair_name(c: &Comparison) -> String {
    if c.program == c.against {
        format!("{} / itself", c.program)
    } else {
        c.program.to_string()
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
pub(super) fn chart(data: &Data) -> Option<(String, Chart)> {
    if data.vs_c.is_empty() {
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
    for c in &data.vs_c {
        let points = c.points.iter().map(|p| (p.block_bytes as f64, &p.ratio));
        // The pair's program (the control: a program against itself), on
        // one CPU; unpinned is the second form.
        let meaning = if c.program == c.against {
            Meaning::Control
        } else {
            super::tables::variant_kind(c.program).meaning
        };
        let kind = meaning.form(u8::from(c.placement.cpu.is_none()));
        let label = format!("{}, {}", pair_name(c), c.placement.name);
        chart = chart.summaries(kind, &label, points);
    }
    Some(("vs-c".to_string(), chart))
}
