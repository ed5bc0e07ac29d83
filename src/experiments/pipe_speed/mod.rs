//! `lab run pipe-speed`: Bradford's `pipespeed2` and `pipespeed2t`
//! (Bradford, 2001): MB/s through a pipe by block size, in one thread and
//! between two, beside the limit that memory copying sets (a pipe copies
//! every byte twice: into the kernel's buffer and out again).
//!
//! Each point is one program run as a whole process, `rounds` times; the
//! rate is the program's own (bytes moved / time of its loop, as the
//! article's programs printed it), the context switches come from `wait4`.
//! Programs sharing a block size take turns within each round (the lab's
//! `stats::round_order`), and the limit is measured in the same round by
//! the `copylimit` program (`pipespeed2t::copy`).
//!
//! The pipe ladder (`ladder`) then climbs from the article's write and read
//! to a zero-copy pipe, rung by rung, beside the limit memory sets.
//!
//! `--vs-c` then compares `pipespeed2` and `pipespeed2t` with their C twins
//! in pairs run back to back, twice: with every thread of both programs on
//! one CPU, and unpinned.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::results::Header;
use crate::stats::{Summary, round_order};
use clap::Parser;
use labkit::Result;
use labkit::limits::format_size;
use labkit::measure::Usage;
use serde::Serialize;

use super::{Declared, Experiment};
use crate::machine::loadavg;
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

mod ladder;
mod run;
mod tables;
mod vs_c;

use run::{run_once, spawn};
pub use vs_c::c_twin;

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "pipe-speed",
    "pipespeed2 / pipespeed2t: pipe MB/s by block size (Bradford, 2001)",
    main,
)
.under_all(Declared::own(&["--ladder-blocks", "64k,1M", "--ladder-mib", "16"]))
.for_reference(&[
    Declared::DEFAULT,
    Declared::own(&["--vs-c"]).variant("vs-c").rounds(32),
])
.headline(&[
    "pipe_buffer_bytes",
    "one_thread_peak_mb_s",
    "two_threads_peak_mb_s",
    "two_threads_peak_block",
    "two_threads_largest_mb_s",
    "two_threads_largest_over_peak",
    "fifo_over_pipe",
])
.data::<Data>();

/// pipespeed2 and pipespeed2t: MB/s through a pipe by block size, one
/// thread and two, named and unnamed, threads and processes, a socket pair
/// and vmsplice, against the memory-copy limit.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Custom block sizes, e.g. 1,64,4k,1M, for every variant (pipespeed2
    /// only where the block fits the pipe; not with --full, which runs the
    /// article's list) [default: the article's list, 1 to 4k, and 8k to 1M
    /// for pipespeed2t]
    #[arg(long, value_delimiter = ',', conflicts_with = "full",
          value_parser = labkit::limits::size_in(1, 64 << 20))]
    blocks: Vec<u64>,

    /// Blocks per run for every point [default: the article's 500k below
    /// 100 bytes and 100k above, at most 400 MB per run, divided by 25
    /// without --full]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    count: Option<u64>,

    /// Then compare pipespeed2 and pipespeed2t with their C twins
    /// (crates/pipespeed2*/c/*.c, cc -O2) in --rounds pairs run back to
    /// back, on one CPU and unpinned, at a tenth of the article's counts
    /// (or --count)
    #[arg(long)]
    vs_c: bool,

    #[command(flatten)]
    ladder: ladder::Flags,
}
crate::options!(Args);

/// The article's block sizes (its bash script's `list`).
const ARTICLE_BLOCKS: &[u64] = &[
    1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60,
    64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 176, 192, 208, 224, 240, 256,
    288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024,
    1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096,
];

/// Beyond the article's list, for pipespeed2t.
const LARGE_BLOCKS: &[u64] = &[
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];

/// The few sizes the quick run gives the other transports.
const SAMPLE_BLOCKS: &[u64] =
    &[1, 16, 64, 256, 1024, 4096, 16 << 10, 64 << 10, 256 << 10, 1 << 20];

/// The article's own figures (Linux 2.4.2, Red Hat 7.1; its figure 4, the
/// two-thread program), as its text gives them.
const ARTICLE_PIPE_BUFFER: u64 = 4096;
const ARTICLE_PEAK_2T_MB_S: f64 = 700.0;
const ARTICLE_PLATEAU_2T_MB_S: f64 = 100.0;

/// One program with its flags: a line on the charts. The Rust programs
/// and their C twins take `COUNT BYTES --json` alike and print one
/// `pipespeed2::Report`.
#[derive(Clone)]
struct Variant {
    key: &'static str,
    label: &'static str,
    path: PathBuf,
    flags: Vec<String>,
    blocks: Vec<u64>,
}

impl Variant {
    fn command(&self, count: u64, block: u64) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.args([count.to_string(), block.to_string(), "--json".into()]);
        cmd.args(&self.flags);
        cmd
    }
}

#[derive(Clone, Serialize, schemars::JsonSchema)]
struct RunRecord {
    elapsed_s: f64,
    mb_per_s: f64,
    usage: Usage,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Point {
    block_bytes: u64,
    count: u64,
    /// MB/s (10^6 bytes) as the program measured its own loop.
    mb_per_s: Summary,
    /// The memory-copy limit at this block size (`copy_limit`'s `mb_per_s`):
    /// tables show `mb_per_s` as a fraction of it.
    copy_limit_mb_per_s: f64,
    /// Voluntary + involuntary context switches of the whole process per
    /// block moved (median), from wait4.
    switches_per_block: f64,
    runs: Vec<RunRecord>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct VariantResult {
    key: &'static str,
    label: &'static str,
    program: String,
    flags: Vec<String>,
    points: Vec<Point>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct CopyPoint {
    block_bytes: u64,
    /// MB/s when each byte is copied twice, as a pipe must (src -> buffer
    /// -> dst), by the `copylimit` program once per round: the faster of
    /// the two medians below.
    mb_per_s: f64,
    /// With the C library's memcpy.
    memcpy: Summary,
    /// With a loop of 64-byte vector moves.
    vector_loop: Summary,
}

/// Where the comparison with C runs both programs.
#[derive(Clone, Copy, Serialize, schemars::JsonSchema)]
struct Placement {
    name: &'static str,
    /// The one CPU every thread of both programs runs on; None: wherever
    /// the scheduler puts them.
    cpu: Option<usize>,
}

/// A program against another at one placement: a Rust program against
/// its C twin, or (the control) a C program against itself.
#[derive(Serialize, schemars::JsonSchema)]
struct Comparison {
    program: &'static str,
    against: &'static str,
    placement: Placement,
    points: Vec<PairPoint>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct PairPoint {
    block_bytes: u64,
    count: u64,
    program_mb_per_s: Vec<f64>,
    against_mb_per_s: Vec<f64>,
    /// program MB/s over against MB/s, one ratio per round (back to back).
    ratio: Summary,
}

#[derive(Serialize, schemars::JsonSchema)]
struct PipeFacts {
    /// `F_GETPIPE_SZ` of a new pipe, as pipespeed2 reported it.
    default_buffer_bytes: u64,
    /// `/proc/sys/fs/pipe-max-size`: the most an unprivileged
    /// `F_SETPIPE_SZ` may ask for.
    max_buffer_bytes: Option<u64>,
    article_buffer_bytes: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Data {
    rounds: u32,
    full: bool,
    placement: &'static str,
    /// `/proc/loadavg` before and after the run: how busy the machine was.
    loadavg_before: String,
    loadavg_after: String,
    pipe: PipeFacts,
    copy_limit: Vec<CopyPoint>,
    variants: Vec<VariantResult>,
    /// `--vs-c`: empty without it.
    vs_c: Vec<Comparison>,
    /// The pipe ladder; None with `--no-ladder`.
    ladder: Option<ladder::Ladder>,
}

/// The article's counts: 500k blocks below 100 bytes, 100k above; beyond
/// its 4 KiB list at most 400 MB per run. Quick runs take a 25th.
fn count_for(block: u64, full: bool) -> u64 {
    let article = match block {
        0..100 => 500_000,
        100..=4096 => 100_000,
        _ => (400_000_000 / block).max(1),
    };
    if full { article } else { (article / 25).max(16) }
}

/// Blocks per run in the comparison with C: a tenth of the article's
/// counts. Shorter runs and more pairs: on a busy virtual machine the two
/// runs of a short pair see more nearly the same machine (two runs of the
/// same pipespeed2 at 8 bytes, pinned: the pair's ratio varied by 4.1% at
/// 50,000 blocks and by 6.4% at 500,000).
fn pair_count(block: u64) -> u64 {
    (count_for(block, true) / 10).max(16)
}

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let mut bins = crate::bins::programs(&["pipespeed2"])?;
    bins.extend(crate::bins::package_programs(
        "pipespeed2t",
        &["pipespeed2t", "copylimit"],
    )?);
    let facts = pipe_facts(&bins[0])?;
    let variants = variants(&args, &bins, facts.default_buffer_bytes)?;

    let mut blocks: Vec<u64> =
        variants.iter().flat_map(|v| v.blocks.clone()).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let loadavg_before = loadavg();
    let rounds = args.common.rounds as usize;
    let total: usize =
        variants.iter().map(|v| v.blocks.len()).sum::<usize>() * rounds;
    let bar = crate::progress::bar(total as u64, EXPERIMENT.name);

    let mut runs: Vec<Vec<(u64, u64, Vec<RunRecord>)>> =
        variants.iter().map(|_| Vec::new()).collect();
    let mut copy_limit = Vec::new();
    for &block in &blocks {
        bar.set_message(format!("{} bytes", format_size(block)));
        let count = args.count.unwrap_or_else(|| count_for(block, args.common.full));
        let here: Vec<usize> = (0..variants.len())
            .filter(|&i| variants[i].blocks.contains(&block))
            .collect();
        let mut records: Vec<Vec<RunRecord>> = vec![Vec::new(); variants.len()];
        let (mut copies, mut loops) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for i in round_order(here.len(), round).into_iter().map(|k| here[k]) {
                records[i].push(run_once(&variants[i], count, block)?);
                bar.inc(1);
            }
            let limit = run::copy_limit(&bins[2], block, &[])?;
            copies.push(limit.memcpy_mb_per_s);
            loops.push(limit.vector_loop_mb_per_s);
        }
        for i in here {
            runs[i].push((block, count, std::mem::take(&mut records[i])));
        }
        let memcpy = Summary::of_rounds(copies);
        let vector_loop = Summary::of_rounds(loops);
        copy_limit.push(CopyPoint {
            block_bytes: block,
            mb_per_s: memcpy.median.max(vector_loop.median),
            memcpy,
            vector_loop,
        });
    }
    bar.finish_and_clear();

    let limit = |block: u64| {
        copy_limit
            .iter()
            .find(|c| c.block_bytes == block)
            .map_or(f64::NAN, |c| c.mb_per_s)
    };
    let results: Vec<VariantResult> = variants
        .iter()
        .zip(runs)
        .map(|(v, points)| VariantResult {
            key: v.key,
            label: v.label,
            program: v
                .path
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into()),
            flags: v.flags.clone(),
            points: points
                .into_iter()
                .map(|(block, count, runs)| {
                    run::point(block, count, runs, limit(block))
                })
                .collect(),
        })
        .collect();
    let ladder = ladder::run_ladder(
        &args.ladder,
        &args.common,
        args.count,
        &bins[1..],
        &facts,
    )?;
    let vs_c = if args.vs_c {
        vs_c::compare_with_c(&args, &bins, &variants)?
    } else {
        Vec::new()
    };
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        placement: "unpinned (the scheduler's choice of CPUs)",
        loadavg_before,
        loadavg_after: loadavg(),
        pipe: facts,
        copy_limit,
        variants: results,
        vs_c,
        ladder,
    };
    let mut header = Header::new(EXPERIMENT.name);
    match &data.ladder {
        Some(ladder) => ladder.record(&mut header.settings),
        None => header.settings.used("ladder", "none (--no-ladder)"),
    }
    let pairs = vs_c::pairs_tables(&data);
    let mut tables = tables::tables(&data);
    tables.extend(pairs.iter().cloned());
    let mut charts = tables::charts(&data);
    charts.extend(vs_c::chart(&data));
    charts.extend(data.ladder.as_ref().map(ladder::chart));
    let mut report = Report {
        observations: Vec::new(),
        header,
        headline: tables::headline(&data),
        tables,
        charts,
        files: Vec::new(),
        data,
    };
    // The side files, headed as tables.md is: vs-c.md, the comparison's
    // tables on their own for the book, and ladder.md.
    let header = report.header_for(&args.common, &out);
    if !pairs.is_empty() {
        let md = crate::report::markdown(&header, &pairs);
        report.files.push(("vs-c.md".to_string(), md));
    }
    let ladder_md =
        report.data.ladder.as_ref().map(|l| ladder::markdown(l, &header));
    report
        .files
        .extend(ladder_md.iter().map(|md| ("ladder.md".to_string(), md.clone())));
    report.publish(&args.common, &out)?;
    // The ladder's tables have their own file; show them too.
    match ladder_md {
        Some(md) if !args.common.json => labkit::error::print(&md),
        _ => Ok(()),
    }
}

/// The pipe as this kernel makes it, asked of pipespeed2 itself.
fn pipe_facts(pipespeed2: &Path) -> Result<PipeFacts> {
    let probe = Variant {
        key: "probe",
        label: "probe",
        path: pipespeed2.to_path_buf(),
        flags: Vec::new(),
        blocks: Vec::new(),
    };
    let (printed, _) = spawn(&probe, probe.command(1, 1), 1, 1)?;
    let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    Ok(PipeFacts {
        default_buffer_bytes: printed.pipe_size.unwrap_or(ARTICLE_PIPE_BUFFER),
        max_buffer_bytes: max,
        article_buffer_bytes: ARTICLE_PIPE_BUFFER,
    })
}

fn variants(args: &Args, bins: &[PathBuf], buffer: u64) -> Result<Vec<Variant>> {
    let custom = !args.blocks.is_empty();
    let pick =
        |default: Vec<u64>| if custom { args.blocks.clone() } else { default };
    let article = ARTICLE_BLOCKS.to_vec();
    let long: Vec<u64> =
        ARTICLE_BLOCKS.iter().chain(LARGE_BLOCKS).copied().collect();
    let big: Vec<u64> = long.iter().copied().filter(|&b| b >= 4096).collect();
    let sample =
        if args.common.full { long.clone() } else { SAMPLE_BLOCKS.to_vec() };
    let one = |key, label, flags: &[&str], blocks: Vec<u64>| Variant {
        key,
        label,
        path: bins[0].clone(),
        flags: flags.iter().map(|s| s.to_string()).collect(),
        blocks,
    };
    let two = |key, label, flags: &[&str], blocks| Variant {
        path: bins[1].clone(),
        ..one(key, label, flags, blocks)
    };
    let fits = |blocks: Vec<u64>| {
        blocks.into_iter().filter(|&b| b <= buffer).collect::<Vec<_>>()
    };
    let list = vec![
        one(
            "pipespeed2",
            "pipespeed2 (one thread)",
            &[],
            fits(pick(article.clone())),
        ),
        two("pipe", "pipespeed2t: pipe, threads", &[], pick(long.clone())),
        two(
            "pipe-1M",
            "pipespeed2t: pipe of 1 MiB, threads",
            &["--pipe-size", "1M"],
            pick(if args.common.full { long.clone() } else { big }),
        ),
        two(
            "fifo",
            "pipespeed2t: named pipe, threads",
            &["--fifo"],
            pick(sample.clone()),
        ),
        two(
            "processes",
            "pipespeed2t: pipe, processes",
            &["--processes"],
            pick(sample.clone()),
        ),
        two(
            "socketpair",
            "pipespeed2t: socket pair, threads",
            &["--socketpair"],
            pick(sample.clone()),
        ),
        two(
            "vmsplice",
            "pipespeed2t: pipe, threads, vmsplice writer",
            &["--vmsplice"],
            pick(sample),
        ),
    ];
    Ok(list)
}

#[cfg(test)]
mod tests;

/// One run of the two-thread pipe (`pipespeed2t`) at `block` bytes, with
/// the quick grid's count: MB/s. The controls run it against itself.
pub(crate) fn control_once(pipespeed2t: &Path, block: u64) -> Result<f64> {
    let v = Variant {
        key: "pipe",
        label: "pipespeed2t: pipe, threads",
        path: pipespeed2t.to_path_buf(),
        flags: Vec::new(),
        blocks: vec![block],
    };
    Ok(run::run_once(&v, count_for(block, false), block)?.mb_per_s)
}
