//! `lab run pipe-speed`: Bradford's `pipespeed2` and `pipespeed2t`
//! (Bradford, 2001): MB/s through a pipe by block size, in one thread and
//! between two, beside the limit that memory copying sets (a pipe copies
//! every byte twice: into the kernel's buffer and out again).
//!
//! Each program with its flags is a condition, run as a whole process; the
//! rate is the program's own (bytes moved / time of its loop, as the
//! article's programs printed it), the context switches come from `wait4`.
//! At each block size the engine runs the conditions in turns, round after
//! round, with the limit measured in the same rounds by the `copylimit`
//! program (`pipespeed2t::copy`). Each condition of `pipespeed2t` (a writer
//! and a reader) runs at each placement (`--cpus A,B`): both on one CPU,
//! one on each of two, and unpinned, which is what the article's figures
//! (and the headline) are, and whose rounds may mix the other two.
//!
//! Then the pipe ladder ([`ladder`]) and, with `--vs-c`, the comparison
//! with the C twins ([`vs_c`]).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bins::run_json;
use crate::engine::{Engine, Observed, Placement, Series, Setting, setting};
use crate::results::{Header, shell_words};
use clap::Parser;
use labkit::measure::Usage;
use labkit::{Error, Result};
use pipespeed2::Report as PipeReport;
use pipespeed2t::copy::{self, CopyReport};
use pipespeed2t::{Options as TwoOptions, Size};
use serde::Serialize;

use super::{Declared, Experiment};
use crate::machine::loadavg;
use crate::plan::Plan;
use crate::report::{Common, Context, Report};

mod ladder;
mod tables;
mod vs_c;

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
// Each two-thread figure unpinned, as the article ran it, and at each
// pinned placement (`_one_cpu`, `_two_cpus`).
.headline(&[
    "pipe_buffer_bytes",
    "one_thread_peak_mb_s",
    "two_threads_peak_mb_s",
    "two_threads_peak_mb_s_{placement}",
    "two_threads_peak_block",
    "two_threads_peak_block_{placement}",
    "two_threads_largest_mb_s",
    "two_threads_largest_mb_s_{placement}",
    "two_threads_largest_over_peak",
    "two_threads_largest_over_peak_{placement}",
    "fifo_over_pipe",
    "fifo_over_pipe_{placement}",
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

/// The few sizes the quick run gives the other transports.
const SAMPLE_BLOCKS: &[u64] =
    &[1, 16, 64, 256, 1024, 4096, 16 << 10, 64 << 10, 256 << 10, 1 << 20];

/// The article's own figures (Linux 2.4.2, Red Hat 7.1; its figure 4, the
/// two-thread program), as its text gives them.
const ARTICLE_PIPE_BUFFER: u64 = 4096;
const ARTICLE_PEAK_2T_MB_S: f64 = 700.0;
const ARTICLE_PLATEAU_2T_MB_S: f64 = 100.0;

/// The condition that measures the copy limit, in each round of a block.
const COPY: &str = "copylimit";

/// A form of pipespeed2t: what it changes of the plain pipe between two
/// threads (`pipespeed2t COUNT BYTES`).
type Form = fn(&mut TwoOptions);

/// The plain pipe, as it is.
const PIPE: Form = |_| {};

/// Which program a variant runs, and so the command line it takes (each
/// program crate's `Options`): pipespeed2, or pipespeed2t in a form; with
/// `c`, that program's C twin (pipespeed2t.c has only the plain pipe).
#[derive(Clone, Copy)]
struct Line {
    /// pipespeed2t's form; `None` for pipespeed2.
    form: Option<Form>,
    c: bool,
}

/// pipespeed2 itself.
const ONE: Line = Line { form: None, c: false };

/// pipespeed2t itself, on the plain pipe.
const TWO: Line = Line { form: Some(PIPE), c: false };

impl Line {
    /// The program's words for `count` blocks of `block` bytes, printing
    /// JSON, its writer and reader pinned to `cpus` (pipespeed2t only:
    /// pipespeed2 is one thread, and a C twin is pinned from outside).
    fn args(
        self,
        count: u64,
        block: u64,
        cpus: Option<[usize; 2]>,
    ) -> Vec<OsString> {
        let Some(form) = self.form else {
            assert!(cpus.is_none(), "pipespeed2 is one thread: no --cpus");
            let o = pipespeed2::Options {
                json: true,
                ..pipespeed2::Options::new(count, block)
            };
            return if self.c { o.c_args() } else { o.args() };
        };
        let mut o = TwoOptions { json: true, cpus, ..TwoOptions::new(count, block) };
        form(&mut o);
        if self.c { o.c_args() } else { o.args() }
    }
}

/// One program with its flags: a condition. The Rust programs and their C
/// twins take `COUNT BYTES --json` alike and print one
/// `pipespeed2::Report`.
#[derive(Clone, Serialize, schemars::JsonSchema)]
struct Variant {
    key: &'static str,
    label: &'static str,
    /// The program's file name.
    program: String,
    /// Its words after `COUNT BYTES --json`.
    flags: Vec<String>,
    #[serde(skip)]
    path: PathBuf,
    #[serde(skip)]
    blocks: Vec<u64>,
    #[serde(skip)]
    line: Line,
}

impl Variant {
    fn new(
        (key, label): (&'static str, &'static str),
        path: &Path,
        line: Line,
        blocks: Vec<u64>,
    ) -> Variant {
        let program =
            path.file_name().map_or(String::new(), |n| n.to_string_lossy().into());
        let flags = line.args(1, 1, None).split_off(3);
        let flags = flags.iter().map(|f| f.to_string_lossy().into()).collect();
        let path = path.to_path_buf();
        Variant { key, label, program, flags, path, blocks, line }
    }

    /// A writer and a reader (pipespeed2t's every form), which run at each
    /// placement; pipespeed2 is one thread.
    fn two_party(&self) -> bool {
        self.key != "pipespeed2"
    }

    /// Its run of `count` blocks of `block` bytes, pinned to `cpus`
    /// (pipespeed2t's `--cpus A,B`).
    fn command(&self, count: u64, block: u64, cpus: Option<[usize; 2]>) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.args(self.line.args(count, block, cpus));
        cmd
    }

    /// Run [`Variant::command`] once, with `pin` every thread of it pinned
    /// to that CPU from outside; check it moved the bytes it was asked to.
    fn run(
        &self,
        count: u64,
        block: u64,
        cpus: Option<[usize; 2]>,
        pin: Option<usize>,
    ) -> Result<PipeRun> {
        let mut cmd = self.command(count, block, cpus);
        if let Some(cpu) = pin {
            labkit::affinity::pin_command(&mut cmd, cpu)?;
        }
        let what = format!("{} {count} {block}", self.key);
        let (report, usage) = run_json::<PipeReport>(cmd, &what)?;
        moved(&what, report.bytes, count * block)?;
        Ok(PipeRun(report, usage))
    }
}

/// What a pipe program's run yields: its report and what its process cost
/// (wait4). A run of the copy limit yields its `CopyReport`.
struct PipeRun(PipeReport, Usage);

impl Observed for CopyReport {
    /// Each byte copied twice, as a pipe must (src -> buffer -> dst), or
    /// once (`--copies 1`), with memcpy, with a loop of 64-byte vector moves,
    /// and the faster of the two.
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("memcpy_mb_per_s", self.memcpy_mb_per_s),
            ("vector_loop_mb_per_s", self.vector_loop_mb_per_s),
            ("mb_per_s", self.mb_per_s),
        ]
    }
}

impl Observed for PipeRun {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let PipeRun(r, u) = self;
        // Voluntary + involuntary switches of the whole process.
        let switches = (u.voluntary_switches + u.involuntary_switches) as f64;
        vec![
            ("mb_per_s", r.mb_per_s),
            ("switches_per_block", switches / r.count as f64),
            ("cpu_s", u.user_s + u.sys_s),
        ]
    }
}

/// A placement by name (a factor's value), with the CPUs of the writer and
/// the reader when pinned.
#[derive(Serialize, schemars::JsonSchema)]
struct Placed {
    name: &'static str,
    cpus: Option<[usize; 2]>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct CopyLimit {
    block_bytes: u64,
    mb_per_s: f64,
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
    /// The placements pipespeed2t ran at.
    placements: Vec<Placed>,
    /// `/proc/loadavg` before and after the run: how busy the machine was.
    loadavg_before: String,
    loadavg_after: String,
    pipe: PipeFacts,
    /// The copy limit at each block: the faster of the medians of memcpy and
    /// the vector loop (copylimit's series), each copying every byte twice.
    copy_limit: Vec<CopyLimit>,
    variants: Vec<Variant>,
    /// Each condition at each setting (`part`: grid, ladder or vs-c;
    /// `block_bytes`, `count`, `placement`; the vs-c `pair`): its MB/s,
    /// switches per block and more, summed up over the rounds.
    series: Vec<Series>,
    /// `--vs-c`: each pair's ratio by block; empty without it.
    vs_c: Vec<vs_c::Ratio>,
    /// The pipe ladder's rungs and goals; None with `--no-ladder`.
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

/// The grid's setting at `block` bytes and `placement` (a query: the
/// measured setting has the count too).
fn grid(block: u64, placement: &str) -> Setting {
    setting([
        ("part", "grid".into()),
        ("block_bytes", block.into()),
        ("placement", placement.into()),
    ])
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
    let variants = variants(&args, &bins, facts.default_buffer_bytes);
    // A writer and a reader's placements: unpinned (the article's, and the
    // headline's), then pinned to one CPU and to two, as the CPUs permit.
    let pinned = Placement::pinned(&labkit::affinity::allowed_cpus()?);
    let placements = [vec![Placement::Unpinned], pinned].concat();
    let loadavg_before = loadavg();
    let blocks: BTreeSet<u64> =
        variants.iter().flat_map(|v| v.blocks.clone()).collect();
    // Each block at each placement: the variants that run there (at every
    // placement the two-party ones; unpinned all, and the copy limit).
    let mut steps = Vec::new();
    for &block in &blocks {
        let count = args.count.unwrap_or_else(|| count_for(block, args.common.full));
        for p in &placements {
            let unpinned = *p == Placement::Unpinned;
            let here: Vec<&Variant> = variants
                .iter()
                .filter(|v| v.blocks.contains(&block) && (unpinned || v.two_party()))
                .collect();
            let mut names: Vec<&str> = here.iter().map(|v| v.key).collect();
            names.extend(unpinned.then_some(COPY));
            let mut at = grid(block, p.name());
            at.insert("count".into(), count.into());
            steps.push((at, here, names, *p, block, count));
        }
    }
    let mut engine = Engine::new(args.common.rounds);
    let runs = steps.iter().map(|s| engine.runs_for(s.2.len())).sum();
    engine.progress(runs, EXPERIMENT.name);
    for (at, here, names, placement, block, count) in &steps {
        engine.measure(at, names, |k| -> Result<Box<dyn Observed>> {
            Ok(match here.get(k) {
                Some(v) => {
                    Box::new(v.run(*count, *block, placement.cpus(), None)?)
                }
                None => Box::new(copy_limit(&bins[2], &copy::Options::new(*block))?),
            })
        })?;
    }
    let ladder = ladder::run_ladder(&args, &bins[1..], &facts, &mut engine)?;
    let vs_c = if args.vs_c {
        vs_c::compare_with_c(&args, &variants, &mut engine)?
    } else {
        Vec::new()
    };
    let obs = engine.observations();
    let data = Data {
        rounds: args.common.rounds,
        full: args.common.full,
        placements: placements
            .iter()
            .map(|p| Placed { name: p.name(), cpus: p.cpus() })
            .collect(),
        loadavg_before,
        loadavg_after: loadavg(),
        pipe: facts,
        copy_limit: blocks
            .iter()
            .filter_map(|&block_bytes| {
                let mb_per_s = tables::limit(obs, block_bytes)?;
                Some(CopyLimit { block_bytes, mb_per_s })
            })
            .collect(),
        variants,
        series: obs.series(),
        vs_c,
        ladder,
    };
    let mut header = Header::new(EXPERIMENT.name);
    match &data.ladder {
        Some(ladder) => ladder.record(&mut header.settings),
        None => header.settings.used("ladder", "none (--no-ladder)"),
    }
    let pairs = vs_c::tables(&data.vs_c);
    let mut tables = tables::tables(&data, obs);
    tables.extend(pairs.iter().cloned());
    let mut charts = tables::charts(&data, obs);
    charts.extend(vs_c::chart(&data.vs_c));
    charts.extend(data.ladder.as_ref().map(|l| ladder::chart(l, obs)));
    let ladder_tables = data.ladder.as_ref().map(|l| ladder::tables(l, obs));
    let mut report = Report {
        header,
        headline: tables::headline(&data, obs),
        tables,
        charts,
        files: Vec::new(),
        observations: engine.finish(),
        data,
    };
    // The side files: vs-c.md, the comparison's tables on their own for
    // the book, and ladder.md.
    if !pairs.is_empty() {
        report.side_tables(&args.common, &out, "vs-c.md", &pairs);
    }
    let ladder_md = ladder_tables
        .map(|t| report.side_tables(&args.common, &out, "ladder.md", &t));
    report.publish(&args.common, &out)?;
    // The ladder's tables have their own file; show them too.
    match ladder_md {
        Some(md) if !args.common.json => labkit::error::print(&md),
        _ => Ok(()),
    }
}

/// Did a program move the bytes it was asked to?
fn moved(what: &str, bytes: u64, expected: u64) -> Result<()> {
    let wrong = format!("{what}: moved {bytes} bytes, expected {expected}");
    if bytes == expected { Ok(()) } else { Err(Error::failed(wrong)) }
}

/// The limit memory copying sets: `copylimit` with options `o`
/// (`--copies 1 --ring N`, say), run once.
fn copy_limit(copylimit: &Path, o: &copy::Options) -> Result<CopyReport> {
    let mut cmd = Command::new(copylimit);
    cmd.args(copy::Options { json: true, ..o.clone() }.args());
    let what = format!("copylimit {}", shell_words(o.args()));
    Ok(run_json::<CopyReport>(cmd, &what)?.0)
}

/// The pipe as this kernel makes it, asked of pipespeed2 itself.
fn pipe_facts(pipespeed2: &Path) -> Result<PipeFacts> {
    let one = Variant::new(("pipespeed2", ""), pipespeed2, ONE, Vec::new());
    let PipeRun(printed, _) = one.run(1, 1, None, None)?;
    let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    Ok(PipeFacts {
        default_buffer_bytes: printed.pipe_size.unwrap_or(ARTICLE_PIPE_BUFFER),
        max_buffer_bytes: max,
        article_buffer_bytes: ARTICLE_PIPE_BUFFER,
    })
}

/// pipespeed2t's forms, each a condition: key, label and form.
const FORMS: [(&str, &str, Form); 6] = [
    ("pipe", "pipespeed2t: pipe, threads", PIPE),
    ("pipe-1M", "pipespeed2t: pipe of 1 MiB, threads", |o| {
        o.pipe_size = Some(Size::mib(1));
    }),
    ("fifo", "pipespeed2t: named pipe, threads", |o| o.fifo = true),
    ("processes", "pipespeed2t: pipe, processes", |o| o.processes = true),
    ("socketpair", "pipespeed2t: socket pair, threads", |o| o.socketpair = true),
    ("vmsplice", "pipespeed2t: pipe, threads, vmsplice writer", |o| {
        o.vmsplice = true;
    }),
];

/// pipespeed2 at the article's blocks that fit the pipe; pipespeed2t's
/// pipe at every block, its 1 MiB pipe from 4 KiB and the other forms at a
/// sample (with --full, every block); or each at --blocks.
fn variants(args: &Args, bins: &[PathBuf], buffer: u64) -> Vec<Variant> {
    let pick = |default: Vec<u64>| {
        if args.blocks.is_empty() { default } else { args.blocks.clone() }
    };
    // Beyond the article's list, for pipespeed2t: each power of two from
    // 8 KiB to 1 MiB.
    let long: Vec<u64> =
        ARTICLE_BLOCKS.iter().copied().chain((13..=20).map(|p| 1 << p)).collect();
    let fits = pick(ARTICLE_BLOCKS.to_vec()).into_iter().filter(|&b| b <= buffer);
    let one = ("pipespeed2", "pipespeed2 (one thread)");
    let mut all = vec![Variant::new(one, &bins[0], ONE, fits.collect())];
    for (key, label, form) in FORMS {
        let blocks = match key {
            "pipe" => long.clone(),
            _ if args.common.full => long.clone(),
            "pipe-1M" => long.iter().copied().filter(|&b| b >= 4096).collect(),
            _ => SAMPLE_BLOCKS.to_vec(),
        };
        let line = Line { form: Some(form), c: false };
        all.push(Variant::new((key, label), &bins[1], line, pick(blocks)));
    }
    all
}

#[cfg(test)]
mod tests;

/// One run of the two-thread pipe (`pipespeed2t`) at `block` bytes, with
/// the quick grid's count, unpinned: MB/s. The controls run it against
/// itself.
pub(crate) fn control_once(pipespeed2t: &Path, block: u64) -> Result<f64> {
    let (key, label, _) = FORMS[0];
    let v = Variant::new((key, label), pipespeed2t, TWO, vec![]);
    let count = count_for(block, false);
    Ok(v.run(count, block, None, None)?.0.mb_per_s)
}
