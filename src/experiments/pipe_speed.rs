//! `lab run pipe-speed`: Bradford's `pipespeed2` and `pipespeed2t`
//! (article 002): MB/s through a pipe by block size, in one thread and
//! between two, beside the limit that memory copying sets (a pipe copies
//! every byte twice: into the kernel's buffer and out again).
//!
//! Each point is one program run as a whole process, `rounds` times; the
//! rate is the program's own (bytes moved / time of its loop, as the
//! article's programs printed it), the context switches come from `wait4`.
//! Programs sharing a block size take turns within each round.
//!
//! The pipe ladder (`ladder`) then climbs from the article's write and read
//! to a zero-copy pipe, rung by rung, beside the limit memory sets.
//!
//! `--vs-c` then compares `pipespeed2` and `pipespeed2t` with their C twins
//! in pairs run back to back, twice: with every thread of both programs on
//! one CPU, and unpinned.

use std::ffi::OsString;
use std::fs::File;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::chart::Chart;
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use clap::Parser;
use labkit::limits::format_size;
use labkit::measure::{Usage, run};
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use super::Experiment;
use crate::report::{Common, Headline, Report};

mod ladder;

pub const EXPERIMENT: Experiment = Experiment {
    name: "pipe-speed",
    about: "pipespeed2 / pipespeed2t: pipe MB/s by block size (article 002)",
    all_args: &["--ladder-blocks", "64k,1M", "--ladder-mib", "16"],
    run: main,
};

/// pipespeed2 and pipespeed2t: MB/s through a pipe by block size, one
/// thread and two, named and unnamed, threads and processes, a socket pair
/// and vmsplice, against the memory-copy limit.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Custom block sizes, e.g. 1,64,4k,1M, for every variant (pipespeed2
    /// only where the block fits the pipe) [default: the article's list,
    /// 1 to 4k, and 8k to 1M for pipespeed2t]
    #[arg(long, value_delimiter = ',', value_parser = labkit::limits::size_in(1, 64 << 20))]
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

/// One program with its flags: a line on the charts.
#[derive(Clone)]
struct Variant {
    key: &'static str,
    label: &'static str,
    path: PathBuf,
    flags: Vec<String>,
    rust: bool,
    blocks: Vec<u64>,
}

impl Variant {
    fn command(&self, count: u64, block: u64) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.args([count.to_string(), block.to_string()]);
        if self.rust {
            cmd.arg("--json").args(&self.flags);
        } else {
            cmd.args(&self.flags);
        }
        cmd
    }
}

/// What the programs print (Rust with `--json`, C always).
#[derive(Deserialize)]
struct Printed {
    bytes: u64,
    elapsed_s: f64,
    mb_per_s: f64,
    pipe_size: Option<u64>,
}

#[derive(Clone, Serialize)]
struct RunRecord {
    elapsed_s: f64,
    mb_per_s: f64,
    usage: Usage,
}

#[derive(Serialize)]
struct Point {
    block_bytes: u64,
    count: u64,
    /// MB/s (10^6 bytes) as the program measured its own loop.
    mb_per_s: Summary,
    /// Median MB/s over the median memory-copy limit at this block size.
    fraction_of_copy_limit: f64,
    /// Voluntary + involuntary context switches of the whole process per
    /// block moved (median), from wait4.
    switches_per_block: f64,
    runs: Vec<RunRecord>,
}

#[derive(Serialize)]
struct VariantResult {
    key: &'static str,
    label: &'static str,
    program: String,
    flags: Vec<String>,
    points: Vec<Point>,
}

#[derive(Serialize)]
struct CopyPoint {
    block_bytes: u64,
    /// MB/s when each byte is copied twice, as a pipe must (src -> buffer
    /// -> dst), in the runner's process: the faster of the two medians below.
    mb_per_s: f64,
    /// With the C library's memcpy.
    memcpy: Summary,
    /// With a loop of 64-byte vector moves.
    vector_loop: Summary,
}

/// Where the comparison with C runs both programs.
#[derive(Clone, Copy, Serialize)]
struct Placement {
    name: &'static str,
    /// The one CPU every thread of both programs runs on; None: wherever
    /// the scheduler puts them.
    cpu: Option<usize>,
}

/// A program against another at one placement: a Rust program against
/// its C twin, or (the control) a C program against itself.
#[derive(Serialize)]
struct Comparison {
    program: &'static str,
    against: &'static str,
    placement: Placement,
    points: Vec<PairPoint>,
}

#[derive(Serialize)]
struct PairPoint {
    block_bytes: u64,
    count: u64,
    program_mb_per_s: Vec<f64>,
    against_mb_per_s: Vec<f64>,
    /// program MB/s over against MB/s, one ratio per round (back to back).
    ratio: Summary,
}

#[derive(Serialize)]
struct PipeFacts {
    /// `F_GETPIPE_SZ` of a new pipe, as pipespeed2 reported it.
    default_buffer_bytes: u64,
    /// `/proc/sys/fs/pipe-max-size`: the most an unprivileged
    /// `F_SETPIPE_SZ` may ask for.
    max_buffer_bytes: Option<u64>,
    article_buffer_bytes: u64,
}

#[derive(Serialize)]
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

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    if args.common.full && !args.blocks.is_empty() {
        return Err(Error::usage(
            "--full runs the article's block list; it does not take --blocks",
        ));
    }
    let out = args.common.start(EXPERIMENT.name)?;
    let scratch = labkit::cleanup::tempdir("lab-pipe-speed-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let bins = crate::bins::programs(&["pipespeed2", "pipespeed2t"])?;
    let facts = pipe_facts(&bins[0], scratch.path())?;
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
            for i in round_order(&here, round) {
                records[i].push(run_once(
                    &variants[i],
                    count,
                    block,
                    scratch.path(),
                )?);
                bar.inc(1);
            }
            copies.push(copy_rate(block as usize, memcpy));
            loops.push(copy_rate(block as usize, vector_loop));
        }
        for i in here {
            runs[i].push((block, count, std::mem::take(&mut records[i])));
        }
        let memcpy = Summary::of(&copies).expect("at least one round");
        let vector_loop = Summary::of(&loops).expect("at least one round");
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
                .map(|(block, count, runs)| point(block, count, runs, limit(block)))
                .collect(),
        })
        .collect();
    let ladder = ladder::run_ladder(
        &args.ladder,
        &args.common,
        args.count,
        &bins[1],
        &facts,
        scratch.path(),
    )?;
    let vs_c = if args.vs_c {
        compare_with_c(&args, &bins, &variants)?
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
    let mut tables =
        vec![then_and_now(&data), one_thread_table(&data), two_thread_table(&data)];
    let header = Header::new(EXPERIMENT.name);
    let vs_c = (!data.vs_c.is_empty()).then(|| {
        let pairs = pairs_tables(&data);
        tables.extend(pairs.iter().cloned());
        let text: Vec<String> = pairs.iter().map(Table::render).collect();
        format!(
            "Measured with `{}` on {} ({}).\n\n{}",
            header.command,
            header.machine.summary(),
            header.machine.date,
            text.join("\n")
        )
    });
    let mut charts = charts(&data);
    charts.extend(data.ladder.as_ref().map(ladder::chart));
    let report = Report {
        header,
        headline: headline(&data),
        tables,
        charts,
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)?;
    if let Some(l) = &report.data.ladder {
        ladder::publish(l, &report.header, args.common.json, &out)?;
    }
    // The comparison with C on its own, for the book.
    match vs_c {
        Some(text) => crate::results::write_file(&out.join("vs-c.md"), &text),
        None => Ok(()),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or("unknown".into(), |s| s.trim().to_string())
}

/// The pipe as this kernel makes it, asked of pipespeed2 itself.
fn pipe_facts(pipespeed2: &Path, scratch: &Path) -> Result<PipeFacts> {
    let probe = Variant {
        key: "probe",
        label: "probe",
        path: pipespeed2.to_path_buf(),
        flags: Vec::new(),
        rust: true,
        blocks: Vec::new(),
    };
    let (printed, _) = spawn(&probe, probe.command(1, 1), 1, 1, scratch)?;
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
        rust: true,
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

/// One round's order: rotated by the round, so slow drift does not always
/// favour the same program.
fn round_order(here: &[usize], round: usize) -> Vec<usize> {
    (0..here.len()).map(|k| here[(k + round) % here.len()]).collect()
}

/// The comparison with C: each of pipespeed2 and pipespeed2t against its
/// C twin at each of its block sizes, `rounds` pairs run back to back
/// (which goes first alternates), with every thread on one CPU and then
/// unpinned, at [`pair_count`] blocks unless `--count` says otherwise.
fn compare_with_c(
    args: &Args,
    bins: &[PathBuf],
    variants: &[Variant],
) -> Result<Vec<Comparison>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cpu = *labkit::affinity::allowed_cpus()?
        .first()
        .ok_or_else(|| Error::failed("this process may run on no CPU"))?;
    let placements = [
        Placement { name: "one CPU", cpu: Some(cpu) },
        Placement { name: "unpinned", cpu: None },
    ];
    let twins = [
        (
            "pipespeed2",
            "pipespeed2.c",
            &bins[0],
            "crates/pipespeed2/c/pipespeed2.c",
            "pipespeed2",
        ),
        (
            "pipespeed2t",
            "pipespeed2t.c",
            &bins[1],
            "crates/pipespeed2t/c/pipespeed2t.c",
            "pipe",
        ),
    ];
    let rounds = args.common.rounds as usize;
    let mut jobs = Vec::new();
    for (rust, c, path, source, key) in twins {
        let c_path =
            crate::bins::compile_c(&root.join(source), &c.replace('.', "-"))?;
        let blocks = variants
            .iter()
            .find(|v| v.key == key)
            .map_or(Vec::new(), |v| v.blocks.clone());
        let program = |key, path: &PathBuf, rust| Variant {
            key,
            label: key,
            path: path.clone(),
            flags: Vec::new(),
            rust,
            blocks: blocks.clone(),
        };
        let c = program(c, &c_path, false);
        // The control: the two-thread C program against itself, pairs of
        // one binary, which shows how far apart two runs of the same code
        // land.
        let control = (rust == "pipespeed2t").then(|| (c.clone(), c.clone()));
        jobs.push((program(rust, path, true), c));
        jobs.extend(control);
    }
    let steps: usize =
        jobs.iter().map(|(r, _)| r.blocks.len()).sum::<usize>() * rounds * 2;
    let bar =
        crate::progress::bar((steps * placements.len()) as u64, "pipe-speed vs C");
    let scratch = labkit::cleanup::tempdir("lab-pipe-speed-c-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
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
                    let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                    for i in order {
                        let v = [first, second][i];
                        let mut cmd = v.command(count, block);
                        if let Some(cpu) = placement.cpu {
                            labkit::affinity::pin_command(&mut cmd, cpu)?;
                        }
                        let (printed, _) =
                            spawn(v, cmd, count, block, scratch.path())?;
                        rates[i].push(printed.mb_per_s);
                        bar.inc(1);
                    }
                }
                let [mine, theirs] = rates;
                let ratios: Vec<f64> =
                    mine.iter().zip(&theirs).map(|(a, b)| a / b).collect();
                points.push(PairPoint {
                    block_bytes: block,
                    count,
                    ratio: Summary::of(&ratios).expect("at least one round"),
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

/// Run a program once with its stdout in a file; return what it printed
/// and what it cost.
fn spawn(
    v: &Variant,
    cmd: Command,
    count: u64,
    block: u64,
    scratch: &Path,
) -> Result<(Printed, Usage)> {
    let what = format!("{} {count} {block}", v.key);
    run_checked(&what, cmd, count * block, scratch, |p: &Printed| p.bytes)
}

/// Run a pipe program once with its stdout (one JSON object) in a file in
/// `scratch`; check that it moved `expected` bytes (`moved` reads them from
/// what it printed) and return what it printed and what it cost.
fn run_checked<T: serde::de::DeserializeOwned>(
    what: &str,
    mut cmd: Command,
    expected: u64,
    scratch: &Path,
    moved: impl Fn(&T) -> u64,
) -> Result<(T, Usage)> {
    let path = scratch.join("stdout.json");
    let file = File::create(&path).map_err(|e| Error::io(path.display(), e))?;
    cmd.stdin(Stdio::null()).stdout(file);
    let done =
        run(&mut cmd).map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    done.check(what).map_err(Error::failed)?;
    let text =
        std::fs::read_to_string(&path).map_err(|e| Error::io(path.display(), e))?;
    let printed: T = serde_json::from_str(text.trim()).map_err(|e| {
        Error::failed(format!(
            "{what}: cannot read its output '{}': {e}",
            text.trim()
        ))
    })?;
    if moved(&printed) != expected {
        return Err(Error::failed(format!(
            "{what}: moved {} bytes, expected {expected}",
            moved(&printed)
        )));
    }
    Ok((printed, done.usage))
}

// ANCHOR: run_once
fn run_once(
    v: &Variant,
    count: u64,
    block: u64,
    scratch: &Path,
) -> Result<RunRecord> {
    let (printed, usage) = spawn(v, v.command(count, block), count, block, scratch)?;
    Ok(RunRecord { elapsed_s: printed.elapsed_s, mb_per_s: printed.mb_per_s, usage })
}
// ANCHOR_END: run_once

// ANCHOR: copy_rate
/// The limit: MB/s when every byte is copied twice, as a pipe copies it
/// into the kernel's buffer and out again. Enough iterations for about
/// 8 MB of copying, at least 8 and at most 20,000.
fn copy_rate(block: usize, copy: fn(&mut [u8], &[u8])) -> f64 {
    let iterations = (4_000_000 / block).clamp(8, 20_000);
    let src = vec![0x5au8; block];
    let mut buffer = vec![0u8; block];
    let mut dst = vec![0u8; block];
    let start = Instant::now();
    for _ in 0..iterations {
        copy(&mut buffer, black_box(&src));
        copy(&mut dst, black_box(&buffer));
        black_box(&mut dst);
    }
    (iterations * block) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// The C library's `memcpy` (what `copy_from_slice` calls).
fn memcpy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// A plain loop of 64-byte moves that the compiler turns into vector loads
/// and stores: no choice of strategy by size, unlike `memcpy`.
fn vector_loop(dst: &mut [u8], src: &[u8]) {
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    d.into_remainder().copy_from_slice(s.remainder());
}
// ANCHOR_END: copy_rate

fn point(block: u64, count: u64, runs: Vec<RunRecord>, limit: f64) -> Point {
    let rates: Vec<f64> = runs.iter().map(|r| r.mb_per_s).collect();
    let switches: Vec<f64> = runs
        .iter()
        .map(|r| {
            (r.usage.voluntary_switches + r.usage.involuntary_switches) as f64
                / count as f64
        })
        .collect();
    let mb_per_s = Summary::of(&rates).expect("at least one round");
    Point {
        block_bytes: block,
        count,
        fraction_of_copy_limit: mb_per_s.median / limit,
        mb_per_s,
        switches_per_block: Summary::of(&switches)
            .expect("at least one round")
            .median,
        runs,
    }
}

/// Rust over C, round by round, for the blocks both ran.
fn variant<'a>(data: &'a Data, key: &str) -> Option<&'a VariantResult> {
    data.variants.iter().find(|v| v.key == key)
}

fn at(v: Option<&VariantResult>, block: u64) -> Option<&Point> {
    v?.points.iter().find(|p| p.block_bytes == block)
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
    let pipe = variant(data, "pipe");
    if let Some(peak) = pipe.and_then(|v| {
        v.points
            .iter()
            .max_by(|a, b| a.mb_per_s.median.total_cmp(&b.mb_per_s.median))
    }) {
        t.row(vec![
            "two threads, peak MB/s".into(),
            format!("about {ARTICLE_PEAK_2T_MB_S:.0}"),
            format!(
                "{} at {}-byte blocks",
                crate::table::sig(peak.mb_per_s.median),
                peak.block_bytes
            ),
        ]);
    }
    if let Some(largest) = pipe.and_then(|v| v.points.last()) {
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
            format!(
                "{} at {}-byte blocks{big}",
                crate::table::sig(largest.mb_per_s.median),
                largest.block_bytes
            ),
        ]);
    }
    let ratios: Vec<f64> = variant(data, "fifo")
        .map(|f| {
            f.points
                .iter()
                .filter_map(|p| {
                    at(pipe, p.block_bytes)
                        .map(|q| p.mb_per_s.median / q.mb_per_s.median)
                })
                .collect()
        })
        .unwrap_or_default();
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
         the rounds, unpinned.",
    );
    t.note(format!(
        "Load average (/proc/loadavg) before the run: {}; after: {}.",
        data.loadavg_before, data.loadavg_after
    ));
    t
}

fn one_thread_table(data: &Data) -> Table {
    let mut t = Table::new(
        "1. One thread (pipespeed2): write a block, read it back",
        &["block (bytes)", "count", "MB/s", "copy limit MB/s", "of limit"],
    );
    for p in variant(data, "pipespeed2").map_or(&[][..], |v| &v.points) {
        let limit = p.mb_per_s.median / p.fraction_of_copy_limit;
        t.row(vec![
            p.block_bytes.to_string(),
            p.count.to_string(),
            with_range(p.mb_per_s.median, p.mb_per_s.min, p.mb_per_s.max, 1),
            crate::table::sig(limit),
            format!("{:.1}%", 100.0 * p.fraction_of_copy_limit),
        ]);
    }
    t.note("MB/s: median (min-max) of the rounds, as the program timed its own loop. \
            Copy limit: two copies of each block in the runner's process (the faster of memcpy and a \
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
            "pipe of limit",
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
        cells.push(crate::table::sig(p.mb_per_s.median / p.fraction_of_copy_limit));
        cells.push(format!("{:.1}%", 100.0 * p.fraction_of_copy_limit));
        cells.push(format!("{:.2}", p.switches_per_block));
        t.row(cells);
    }
    t.note("Medians of the rounds (min and max are in the JSON). Threads unless \
            \"processes\"; switches: voluntary + involuntary context switches of the whole \
            process (wait4) per block.");
    t
}

/// One table per placement (one CPU, unpinned), one column per pair of
/// programs: three columns of "median (min-max)" fit the book's column,
/// six did not.
fn pairs_tables(data: &Data) -> Vec<Table> {
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
                        .map_or("-".into(), |p| {
                            with_range(p.ratio.median, p.ratio.min, p.ratio.max, 3)
                        }),
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

/// The figures the claims are judged on: the pipe's buffer, the two-thread
/// pipe's peak and its rate at the largest block, named against unnamed.
fn headline(data: &Data) -> Headline {
    let variant = |key| data.variants.iter().find(|v| v.key == key);
    let pipe = variant("pipe");
    let peak = pipe.and_then(|v| {
        v.points
            .iter()
            .max_by(|a, b| a.mb_per_s.median.total_cmp(&b.mb_per_s.median))
    });
    let largest = pipe.and_then(|v| v.points.iter().max_by_key(|p| p.block_bytes));
    let one = variant("pipespeed2").and_then(|v| {
        v.points.iter().map(|p| p.mb_per_s.median).max_by(f64::total_cmp)
    });
    // Named over unnamed at every block size both measured.
    let fifo_ratios: Vec<f64> = variant("fifo")
        .zip(pipe)
        .map(|(fifo, pipe)| {
            fifo.points
                .iter()
                .filter_map(|f| {
                    let p = pipe
                        .points
                        .iter()
                        .find(|p| p.block_bytes == f.block_bytes)?;
                    Some(f.mb_per_s.median / p.mb_per_s.median)
                })
                .collect()
        })
        .unwrap_or_default();
    let fifo = Summary::of(&fifo_ratios);
    crate::report::headline()
        .add(
            "pipe_buffer_bytes",
            "a new pipe's buffer (F_GETPIPE_SZ)",
            data.pipe.default_buffer_bytes as f64,
            "bytes",
        )
        .add(
            "one_thread_peak_mb_s",
            "pipespeed2 (one thread): best rate",
            one,
            "MB/s",
        )
        .add(
            "two_threads_peak_mb_s",
            "pipespeed2t (two threads): best rate",
            peak.map(|p| p.mb_per_s.median),
            "MB/s",
        )
        .add(
            "two_threads_peak_block",
            "pipespeed2t: block size of the best rate",
            peak.map(|p| p.block_bytes as f64),
            "bytes",
        )
        .add(
            "two_threads_largest_mb_s",
            &format!(
                "pipespeed2t: rate at the largest block ({} bytes)",
                largest.map_or(0, |p| p.block_bytes)
            ),
            largest.map(|p| p.mb_per_s.median),
            "MB/s",
        )
        .add(
            "two_threads_largest_over_peak",
            "pipespeed2t: rate at the largest block over the best rate",
            largest.zip(peak).map(|(l, p)| l.mb_per_s.median / p.mb_per_s.median),
            "x",
        )
        .add(
            "fifo_over_pipe",
            "named pipe's rate over the unnamed pipe's, median over block sizes",
            fifo.map(|s| s.median),
            "x",
        )
        .add(
            "fifo_over_pipe_min",
            "the same, lowest block size",
            fifo.map(|s| s.min),
            "x",
        )
        .add(
            "fifo_over_pipe_max",
            "the same, highest block size",
            fifo.map(|s| s.max),
            "x",
        )
        .build()
}

fn charts(data: &Data) -> Vec<(String, Chart)> {
    let line = |v: &VariantResult| -> Vec<(f64, f64)> {
        v.points.iter().map(|p| (p.block_bytes as f64, p.mb_per_s.median)).collect()
    };
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
            "MB/s (median, log scale)",
        )
    };
    if let Some(v) = variant(data, "pipespeed2").filter(|v| !v.points.is_empty()) {
        let blocks: Vec<u64> = v.points.iter().map(|p| p.block_bytes).collect();
        let chart = new("One thread: pipespeed2 (cf. the article's figure 1)")
            .series(v.label, line(v));
        out.push((
            "one-thread".to_string(),
            chart.series("copy limit (2 copies)", limit(&blocks)),
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
                chart = chart.series(v.label, line(v));
            }
        }
        if !blocks.is_empty() {
            out.push((
                stem.to_string(),
                chart.series("copy limit (2 copies)", limit(&blocks)),
            ));
        }
    }
    if !data.vs_c.is_empty() {
        // The axis fits the ratios (they live around 1, not around 0), with
        // "equal" and the 5% band the notes count against drawn in.
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
            let points =
                c.points.iter().map(|p| (p.block_bytes as f64, p.ratio.median));
            chart = chart.series(
                &format!("{}, {}", pair_name(c), c.placement.name),
                points.collect(),
            );
        }
        out.push(("vs-c".to_string(), chart));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate_who_goes_first() {
        assert_eq!(round_order(&[0, 1, 2], 0), [0, 1, 2]);
        assert_eq!(round_order(&[0, 1, 2], 1), [1, 2, 0]);
        assert_eq!(round_order(&[3, 5], 3), [5, 3]);
    }

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
}
