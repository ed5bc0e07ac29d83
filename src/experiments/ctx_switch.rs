//! `lab run ctx-switch`: what one context switch costs, measured before the
//! message-queue sweep of article 004 (book References: mq-2006) because
//! that sweep's verdict (30% of the CPU spent switching) rests on it.
//!
//! For threads and processes, each pinned to the same CPU, to two CPUs, or
//! not at all, it runs `ctxswitch` (two tasks bouncing a byte over two
//! pipes) and, when `perf` works, `perf bench sched pipe` in the same mode
//! and placement as an outside reference, alternating which goes first.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bars::{Bars, Row};
use crate::results::Header;
use crate::stats::Summary;
use crate::table::{Table, with_range};
use clap::Parser;
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use super::Experiment;
use crate::report::{Common, Headline, Report};

pub const EXPERIMENT: Experiment = Experiment {
    name: "ctx-switch",
    about: "ctxswitch vs perf bench sched pipe: one context switch (issue 6)",
    all_args: &[],
    run: main,
};

/// What one context switch costs: ctxswitch (a byte bounced over two
/// pipes) for threads and processes on the same CPU, two CPUs or unpinned,
/// beside `perf bench sched pipe` in the same mode and placement.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Round trips per run, a fifth of them for `cross`, where each costs
    /// ten times more [default: 10000; 100000 with --full]
    #[arg(short = 'n', long,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    iterations: Option<u64>,

    /// Do not run `perf bench sched pipe`, even if perf works
    #[arg(long, conflicts_with = "perf")]
    no_perf: bool,

    /// Only these modes
    #[arg(long, value_delimiter = ',', value_parser = MODES,
          default_value = "threads,processes")]
    modes: Vec<String>,

    /// Only these placements
    #[arg(long, value_delimiter = ',', value_parser = PINS,
          default_value = "same,cross,none")]
    pins: Vec<String>,

    /// The perf program to use as the reference [default: perf, skipped
    /// with a note if it cannot run; a --perf given that cannot run is an
    /// error]
    #[arg(long, value_name = "PATH")]
    perf: Option<PathBuf>,
}

const MODES: [&str; 2] = ["threads", "processes"];
const PINS: [&str; 3] = ["same", "cross", "none"];

/// Round trips per run for a placement: a round trip across two CPUs
/// costs 10 to 30 times one on a single CPU, so `cross` runs a fifth.
fn round_trips(iterations: u64, pin: &str) -> u64 {
    if pin == "cross" { (iterations / 5).max(1) } else { iterations }
}

/// What `ctxswitch --json` prints (the fields used here).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Run {
    us_per_round_trip: f64,
    us_per_switch: f64,
    pipe_us: f64,
    net_us_per_switch: f64,
    last_cpus: [usize; 2],
    switches: Switches,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Switches {
    expected: u64,
    voluntary: u64,
    involuntary: u64,
    per_round_trip: f64,
    holds: bool,
}

/// One run of `perf bench sched pipe`.
#[derive(Clone, Debug, Serialize)]
struct PerfRun {
    /// perf's "usecs/op": one op is one round trip.
    us_per_round_trip: f64,
    /// For `cross`: how long after the start one worker was moved to the
    /// second CPU (both started on the first, under taskset).
    #[serde(skip_serializing_if = "Option::is_none")]
    moved_after_ms: Option<f64>,
}

#[derive(Serialize)]
struct PerfCell {
    us_per_round_trip: Summary,
    /// Median round trip / 2.
    us_per_switch: f64,
    runs: Vec<PerfRun>,
}

#[derive(Serialize)]
struct Cell {
    mode: &'static str,
    pin: &'static str,
    /// Round trips per run of either tool.
    iterations: u64,
    /// CPUs of task A and task B (`null`: not pinned).
    cpus: Option<[usize; 2]>,
    /// ctxswitch's raw microseconds per switch (half a round trip), median
    /// of the rounds.
    us_per_switch: f64,
    /// The same with the pipe calls' own cost subtracted (lmbench's way).
    net_us_per_switch: f64,
    us_per_round_trip: Summary,
    pipe_us: Summary,
    kernel_switches_per_round_trip: Summary,
    /// The kernel's count agreed with 2 per round trip in every round.
    counts_hold: bool,
    perf: Option<PerfCell>,
    /// ctxswitch's round trip / perf's, median of the rounds' pairs.
    vs_perf: Option<f64>,
    runs: Vec<Run>,
}

#[derive(Serialize)]
struct PerfInfo {
    used: bool,
    version: Option<String>,
    /// Why perf was not used, or how placement was done.
    note: String,
}

#[derive(Serialize)]
struct Data {
    /// Round trips per run (each cell says its own: a fifth for cross).
    iterations: u64,
    rounds: u32,
    full: bool,
    perf: PerfInfo,
    /// mode -> placement -> ctxswitch's median raw microseconds per switch.
    us_per_switch: BTreeMap<&'static str, BTreeMap<&'static str, f64>>,
    /// mode -> placement -> the same without the pipe calls' cost.
    net_us_per_switch: BTreeMap<&'static str, BTreeMap<&'static str, f64>>,
    cells: Vec<Cell>,
    skipped: Vec<String>,
}

fn main(argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(EXPERIMENT.name)?;
    let iterations =
        args.iterations.unwrap_or(if args.common.full { 100_000 } else { 10_000 });
    let ctxswitch = crate::bins::programs(&["ctxswitch"])?.remove(0);
    let allowed = labkit::affinity::allowed_cpus()?;
    let mut skipped = Vec::new();
    let modes: Vec<&'static str> =
        MODES.into_iter().filter(|m| args.modes.iter().any(|a| a == m)).collect();
    let pins: Vec<&'static str> = PINS
        .into_iter()
        .filter(|p| args.pins.iter().any(|a| a == p))
        .filter(|&p| {
            let ok = p != "cross" || allowed.len() >= 2;
            if !ok {
                skipped.push(format!(
                    "cross: this process may run only on CPU {}",
                    allowed[0]
                ));
            }
            ok
        })
        .collect();
    let perf_path = args.perf.clone().unwrap_or_else(|| PathBuf::from("perf"));
    let perf = if args.no_perf {
        PerfInfo { used: false, version: None, note: "--no-perf".into() }
    } else {
        perf_check(&perf_path)
    };
    if !perf.used && !args.no_perf {
        // Only the default may fall back; a perf the user named must run.
        if args.perf.is_some() {
            return Err(Error::failed(format!(
                "--perf: {}; give a perf that runs, or --no-perf",
                perf.note
            )));
        }
        eprintln!("lab: note: running without perf: {}", perf.note);
    }
    let rounds = args.common.rounds as usize;
    let cells_n = modes.len() * pins.len();
    let per_round = if perf.used { 2 } else { 1 };
    let bar =
        crate::progress::bar((cells_n * rounds * per_round) as u64, "ctx-switch");
    let mut cells = Vec::new();
    for &mode in &modes {
        for &pin in &pins {
            bar.set_message(format!("{mode} {pin}"));
            let cpus = match pin {
                "same" => Some([allowed[0]; 2]),
                "cross" => Some([allowed[0], allowed[1]]),
                _ => None,
            };
            let n = round_trips(iterations, pin);
            let mut runs = Vec::new();
            let mut perf_runs = Vec::new();
            for round in 0..rounds {
                // Alternate who goes first, so slow drift (other load,
                // frequency) does not always favour the same tool.
                let perf_first = perf.used && round % 2 == 1;
                for k in 0..per_round {
                    if (k == 0) != perf_first {
                        runs.push(ctxswitch_once(&ctxswitch, mode, pin, cpus, n)?);
                    } else {
                        perf_runs.push(perf_once(&perf_path, mode, cpus, n)?);
                    }
                    bar.inc(1);
                }
            }
            cells.push(cell(mode, pin, n, cpus, runs, perf_runs));
        }
    }
    bar.finish_and_clear();
    let mut us_per_switch: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
    let mut net_us_per_switch: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
    for c in &cells {
        us_per_switch.entry(c.mode).or_default().insert(c.pin, c.us_per_switch);
        net_us_per_switch
            .entry(c.mode)
            .or_default()
            .insert(c.pin, c.net_us_per_switch);
    }
    let data = Data {
        iterations,
        rounds: args.common.rounds,
        full: args.common.full,
        perf,
        us_per_switch,
        net_us_per_switch,
        cells,
        skipped,
    };
    let mut tables = vec![cost_table(&data)];
    if data.perf.used {
        tables.push(perf_table(&data));
    }
    write_chart(&data, &out)?;
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline: headline(&data),
        tables,
        charts: Vec::new(),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

// ANCHOR: ctxswitch_once
/// One `ctxswitch --json` run. A run whose switch count the kernel did not
/// confirm (exit 1, JSON still printed) is kept and flagged.
fn ctxswitch_once(
    program: &Path,
    mode: &str,
    pin: &str,
    cpus: Option<[usize; 2]>,
    iterations: u64,
) -> Result<Run> {
    let mut cmd = Command::new(program);
    cmd.args(["--mode", mode, "--pin", pin, "--json"]);
    cmd.args(["--iterations", &iterations.to_string()]);
    match (pin, cpus) {
        ("same", Some([a, _])) => cmd.args(["--cpus", &a.to_string()]),
        ("cross", Some([a, b])) => cmd.args(["--cpus", &format!("{a},{b}")]),
        _ => &mut cmd,
    };
    let what = format!("ctxswitch --mode {mode} --pin {pin}");
    let out = labkit::cleanup::output(&mut cmd)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    let parsed = serde_json::from_slice::<Run>(&out.stdout);
    match (out.status.code(), parsed) {
        (Some(0), Ok(run)) => Ok(run),
        (Some(1), Ok(run)) if !run.switches.holds => Ok(run),
        (code, parsed) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let said = stderr.lines().last().unwrap_or("").trim().to_string();
            let said = match parsed {
                Err(e) if said.is_empty() => format!("bad JSON: {e}"),
                _ => said,
            };
            Err(Error::failed(format!("{what}: exit status {code:?}: {said}")))
        }
    }
}
// ANCHOR_END: ctxswitch_once

/// Is perf there and does `perf bench sched pipe` run?
fn perf_check(perf: &Path) -> PerfInfo {
    let version = labkit::cleanup::output(Command::new(perf).arg("--version"))
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let works = labkit::cleanup::output(
        Command::new(perf).args(["bench", "sched", "pipe", "-l", "10"]),
    );
    let note = match &works {
        Err(e) => format!(
            "{} cannot run: {}",
            perf.display(),
            labkit::error::describe_io(e)
        ),
        Ok(o) if !o.status.success() => format!(
            "`{} bench sched pipe` failed ({}): {}",
            perf.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").trim()
        ),
        Ok(o) if parse_perf(&String::from_utf8_lossy(&o.stdout)).is_none() => {
            format!("`{} bench sched pipe` printed no usecs/op", perf.display())
        }
        Ok(_) => {
            return PerfInfo {
                used: true,
                version,
                note: "perf bench sched pipe [-T] -l N; same: under `taskset -c A`; \
                       cross: under `taskset -c A`, then the runner moves one worker \
                       to CPU B as soon as it appears; none: unpinned"
                    .into(),
            };
        }
    };
    PerfInfo { used: false, version, note }
}

/// perf's "       6.657400 usecs/op" line.
fn parse_perf(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_suffix("usecs/op")?.trim().parse().ok())
}

// ANCHOR: perf_once
/// One `perf bench sched pipe` in the same mode and placement. perf has no
/// placement flag: `taskset -c A` puts both workers on A; for `cross` one
/// worker (perf's child process, or its first worker thread) is then moved
/// to B as soon as it exists.
fn perf_once(
    perf: &Path,
    mode: &str,
    cpus: Option<[usize; 2]>,
    iterations: u64,
) -> Result<PerfRun> {
    let mut cmd = match cpus {
        Some([a, _]) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &a.to_string()]).arg(perf);
            c
        }
        None => Command::new(perf),
    };
    cmd.args(["bench", "sched", "pipe", "-l", &iterations.to_string()]);
    if mode == "threads" {
        cmd.arg("-T");
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let what = format!("perf bench sched pipe ({mode})");
    let start = Instant::now();
    // Tracked: an error below, or an interrupt, kills and reaps perf.
    let mut child = labkit::cleanup::spawn(&mut cmd)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    let stdout = labkit::cleanup::drain(child.child().stdout.take());
    let stderr = labkit::cleanup::drain(child.child().stderr.take());
    let mut moved_after_ms = None;
    let mut ended = None;
    if let Some([_, b]) = cpus.filter(|[a, b]| a != b) {
        let pid = child.pid() as u32;
        loop {
            let workers = if mode == "threads" {
                labkit::affinity::other_threads(pid)
            } else {
                labkit::affinity::children(pid)
            };
            if let Some(&tid) = workers.first() {
                labkit::affinity::pin_task(tid, b)?;
                moved_after_ms = Some(start.elapsed().as_secs_f64() * 1e3);
                break;
            }
            ended = child.try_wait().map_err(|e| Error::io(&what, e))?;
            if ended.is_some() || start.elapsed() > Duration::from_secs(10) {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let status = match ended {
        Some(status) => status,
        None => child.wait4().map_err(|e| Error::io(&what, e))?.0,
    };
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
    };
    let (stdout, stderr) = (text(stdout), text(stderr));
    if !status.success() {
        let said = stderr.lines().last().unwrap_or("").trim();
        return Err(Error::failed(format!("{what}: {status}: {said}")));
    }
    if cpus.is_some_and(|[a, b]| a != b) && moved_after_ms.is_none() {
        return Err(Error::failed(format!(
            "{what}: ended before a worker could be moved to the second CPU; \
             use more --iterations"
        )));
    }
    let us_per_round_trip = parse_perf(&stdout).ok_or_else(|| {
        Error::failed(format!("{what}: no usecs/op in its output"))
    })?;
    Ok(PerfRun { us_per_round_trip, moved_after_ms })
}
// ANCHOR_END: perf_once

fn summary(values: impl Iterator<Item = f64>) -> Summary {
    let v: Vec<f64> = values.collect();
    Summary::of(&v).expect("at least one round")
}

fn cell(
    mode: &'static str,
    pin: &'static str,
    iterations: u64,
    cpus: Option<[usize; 2]>,
    runs: Vec<Run>,
    perf_runs: Vec<PerfRun>,
) -> Cell {
    let round_trip = summary(runs.iter().map(|r| r.us_per_round_trip));
    let net = summary(runs.iter().map(|r| r.net_us_per_switch));
    let perf = (!perf_runs.is_empty()).then(|| {
        let s = summary(perf_runs.iter().map(|r| r.us_per_round_trip));
        PerfCell {
            us_per_round_trip: s,
            us_per_switch: s.median / 2.0,
            runs: perf_runs,
        }
    });
    // Round k of ctxswitch and round k of perf ran back to back.
    let vs_perf = perf.as_ref().map(|p| {
        let ratios = runs
            .iter()
            .zip(&p.runs)
            .map(|(c, p)| c.us_per_round_trip / p.us_per_round_trip);
        summary(ratios).median
    });
    Cell {
        mode,
        pin,
        iterations,
        cpus,
        us_per_switch: round_trip.median / 2.0,
        net_us_per_switch: net.median,
        us_per_round_trip: round_trip,
        pipe_us: summary(runs.iter().map(|r| r.pipe_us)),
        kernel_switches_per_round_trip: summary(
            runs.iter().map(|r| r.switches.per_round_trip),
        ),
        counts_hold: runs.iter().all(|r| r.switches.holds),
        perf,
        vs_perf,
        runs,
    }
}

fn cpus_text(c: &Cell) -> String {
    match c.cpus {
        Some([a, b]) if a == b => a.to_string(),
        Some([a, b]) => format!("{a},{b}"),
        None => {
            let ends: Vec<String> = c
                .runs
                .iter()
                .map(|r| format!("{}-{}", r.last_cpus[0], r.last_cpus[1]))
                .collect();
            format!("ended {}", ends.join(" "))
        }
    }
}

fn cost_table(d: &Data) -> Table {
    let mut t = Table::new(
        format!(
            "What one switch costs: ctxswitch, {} round trips per run ({} for \
             cross), {} rounds",
            d.iterations,
            round_trips(d.iterations, "cross"),
            d.rounds
        ),
        &[
            "mode",
            "placement",
            "CPUs",
            "round trip µs",
            "per switch µs",
            "pipe w+r µs",
            "net per switch µs",
            "kernel switches / round trip",
        ],
    );
    for c in &d.cells {
        let r = &c.us_per_round_trip;
        let k = &c.kernel_switches_per_round_trip;
        t.row(vec![
            c.mode.into(),
            c.pin.into(),
            cpus_text(c),
            with_range(r.median, r.min, r.max, 2),
            format!("{:.2}", c.us_per_switch),
            format!("{:.2}", c.pipe_us.median),
            format!("{:.2}", c.net_us_per_switch),
            format!("{:.3}{}", k.median, if c.counts_hold { "" } else { " (!)" }),
        ]);
    }
    t.note(
        "Round trip: median (min-max) of the rounds. Per switch: half the median \
         round trip. Pipe w+r: one task writing a byte and reading it back (no \
         switch); net per switch: (round trip - 2 x pipe w+r) / 2, median. Kernel \
         switches: voluntary + involuntary of both tasks (getrusage per thread, \
         wait4 for the child process) per round trip; the method assumes 2. \
         `(!)`: a round where the count was off by more than 10%.",
    );
    t.note(
        "CPUs: where A and B were pinned; for `none`, the CPUs A and B ended on, \
         one `A-B` pair per round.",
    );
    for s in &d.skipped {
        t.note(format!("Skipped {s}."));
    }
    t
}

fn perf_table(d: &Data) -> Table {
    let mut t = Table::new(
        "ctxswitch against `perf bench sched pipe`, same mode and placement",
        &[
            "mode",
            "placement",
            "ctxswitch µs / round trip",
            "perf µs / round trip",
            "ctxswitch / perf",
            "within 15%",
        ],
    );
    for c in &d.cells {
        let Some(p) = &c.perf else { continue };
        let (r, q) = (&c.us_per_round_trip, &p.us_per_round_trip);
        let ratio = c.vs_perf.unwrap_or(f64::NAN);
        t.row(vec![
            c.mode.into(),
            c.pin.into(),
            with_range(r.median, r.min, r.max, 2),
            with_range(q.median, q.min, q.max, 2),
            format!("{ratio:.2}"),
            if (ratio - 1.0).abs() <= 0.15 { "yes" } else { "no" }.into(),
        ]);
    }
    t.note(format!(
        "{}. {}. Rounds alternate which tool goes first; the ratio is the \
         median of the rounds' ctxswitch/perf pairs. perf times its whole run, \
         including creating the second task and no warm-up; ctxswitch times \
         only the round trips after 1000 warm-up ones.",
        d.perf.version.as_deref().unwrap_or("perf"),
        d.perf.note
    ));
    t
}

/// One switch's cost in each mode and placement measured.
fn headline(data: &Data) -> Headline {
    let mut h = crate::report::headline();
    for (mode, pins) in &data.us_per_switch {
        for (pin, us) in pins {
            h = h.add(
                &format!("{mode}_{pin}_us"),
                &format!("one switch between {mode}, {pin} CPU placement"),
                *us,
                "µs",
            );
        }
    }
    h.build()
}

/// The three placements as three categories, one bar (median, with the
/// rounds' min-max) per tool and mode: a category is not a point on an
/// axis. A linear axis, so that bar lengths compare.
fn write_chart(d: &Data, out: &Path) -> Result<()> {
    let mut chart = Bars::new(
        "Round trip (two switches) by placement",
        "microseconds per round trip: median, whisker min-max of the rounds",
        false,
    );
    for pin in PINS {
        let mut rows = Vec::new();
        for (i, mode) in MODES.into_iter().enumerate() {
            let Some(c) = d.cells.iter().find(|c| c.pin == pin && c.mode == mode)
            else {
                continue;
            };
            let r = &c.us_per_round_trip;
            rows.push(
                Row::new(format!("ctxswitch, {mode}"), r.median)
                    .range(r.min, r.max)
                    .colour(2 * i),
            );
            if let Some(p) = &c.perf {
                let q = &p.us_per_round_trip;
                rows.push(
                    Row::new(format!("perf bench, {mode}"), q.median)
                        .range(q.min, q.max)
                        .colour(2 * i + 1),
                );
            }
        }
        if !rows.is_empty() {
            chart = chart.group(placement_name(pin), rows);
        }
    }
    crate::results::write_file(&out.join("ctx-switch.svg"), &chart.to_svg())
}

fn placement_name(pin: &str) -> &'static str {
    match pin {
        "same" => "same CPU (same)",
        "cross" => "two CPUs (cross)",
        _ => "not pinned (none)",
    }
}
