//! Running the programs: one pipe program run, one copy-limit run, and
//! what a point of the results keeps of them.

use std::path::Path;
use std::process::Command;

use crate::bins::run_json;
use crate::stats::Summary;
use labkit::measure::Usage;
use labkit::{Error, Result};
use pipespeed2::Report;
use pipespeed2t::copy::CopyReport;

use super::{Point, RunRecord, Variant};

/// Run a pipe program once; return what it printed and what it cost.
pub(super) fn spawn(
    v: &Variant,
    cmd: Command,
    count: u64,
    block: u64,
) -> Result<(Report, Usage)> {
    let what = format!("{} {count} {block}", v.key);
    let (report, usage) = run_json::<Report>(cmd, &what)?;
    moved(&what, report.bytes, count * block)?;
    Ok((report, usage))
}

/// Did a program move the bytes it was asked to?
pub(super) fn moved(what: &str, bytes: u64, expected: u64) -> Result<()> {
    if bytes == expected {
        Ok(())
    } else {
        Err(Error::failed(format!(
            "{what}: moved {bytes} bytes, expected {expected}"
        )))
    }
}

// ANCHOR: run_once
pub(super) fn run_once(v: &Variant, count: u64, block: u64) -> Result<RunRecord> {
    let (printed, usage) = spawn(v, v.command(count, block), count, block)?;
    Ok(RunRecord { elapsed_s: printed.elapsed_s, mb_per_s: printed.mb_per_s, usage })
}
// ANCHOR_END: run_once

/// The limit memory copying sets: `copylimit BLOCK` with `flags`
/// (`--copies 1 --ring N`, say), run once.
pub(super) fn copy_limit(
    copylimit: &Path,
    block: u64,
    flags: &[String],
) -> Result<CopyReport> {
    let mut cmd = Command::new(copylimit);
    cmd.args([block.to_string(), "--json".into()]).args(flags);
    let what = format!("copylimit {block} {}", flags.join(" "));
    Ok(run_json::<CopyReport>(cmd, what.trim_end())?.0)
}

/// One block size of one variant: its runs, summed up, beside the copy
/// limit at that size (`limit`, MB/s).
pub(super) fn point(
    block: u64,
    count: u64,
    runs: Vec<RunRecord>,
    limit: f64,
) -> Point {
    let switches = runs.iter().map(|r| {
        (r.usage.voluntary_switches + r.usage.involuntary_switches) as f64
            / count as f64
    });
    Point {
        block_bytes: block,
        count,
        mb_per_s: Summary::of_rounds(runs.iter().map(|r| r.mb_per_s)),
        copy_limit_mb_per_s: limit,
        switches_per_block: Summary::of_rounds(switches).median,
        runs,
    }
}
