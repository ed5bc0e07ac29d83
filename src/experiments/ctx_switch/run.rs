//! Running the two tools: `ctxswitch --json` (its own report type) and
//! `perf bench sched pipe` in the same mode and placement.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::Observed;
use ctxswitch::{Mode, Pin};
use labkit::{Error, Result};

use super::PerfInfo;

/// A `ctxswitch` run's figures, as the program reported them: the kernel's
/// count of switches and the CPUs each task ended on included.
impl Observed for ctxswitch::Report {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let s = &self.switches;
        vec![
            ("iterations", self.iterations as f64),
            ("us_per_round_trip", self.us_per_round_trip),
            ("us_per_switch", self.us_per_switch),
            ("pipe_us", self.pipe_us),
            ("net_us_per_switch", self.net_us_per_switch),
            ("switches_per_round_trip", s.per_round_trip),
            ("expected_switches", s.expected as f64),
            ("involuntary_switches", s.involuntary as f64),
            ("counts_hold", f64::from(u8::from(s.holds))),
            ("last_cpu_a", self.last_cpus[0] as f64),
            ("last_cpu_b", self.last_cpus[1] as f64),
        ]
    }
}

/// One run of `perf bench sched pipe`.
#[derive(Clone, Debug)]
pub struct PerfRun {
    /// perf's "usecs/op": one op is one round trip.
    pub us_per_round_trip: f64,
    /// For `cross`: how long after the start one worker was moved to the
    /// second CPU (both started on the first, under taskset).
    pub moved_after_ms: Option<f64>,
}

impl Observed for PerfRun {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let mut m = vec![("us_per_round_trip", self.us_per_round_trip)];
        m.extend(self.moved_after_ms.map(|ms| ("moved_after_ms", ms)));
        m
    }
}

/// One `ctxswitch --json` run. A run whose switch count the kernel did not
/// confirm (exit 1, JSON still printed) is kept and flagged.
pub(crate) fn ctxswitch_once(
    program: &Path,
    mode: Mode,
    pin: Pin,
    cpus: Option<[usize; 2]>,
    iterations: u64,
) -> Result<ctxswitch::Report> {
    let cpus = match (pin, cpus) {
        (Pin::Same, Some([a, _])) => vec![a],
        (Pin::Cross, Some([a, b])) => vec![a, b],
        _ => vec![],
    };
    let options = ctxswitch::Options {
        mode,
        pin,
        iterations,
        cpus,
        json: true,
        ..Default::default()
    };
    let mut cmd = Command::new(program);
    cmd.args(options.args());
    let what = format!("ctxswitch --mode {} --pin {}", mode.name(), pin.name());
    let out = labkit::cleanup::output(&mut cmd)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    let parsed = serde_json::from_slice::<ctxswitch::Report>(&out.stdout);
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

/// Is perf there and does `perf bench sched pipe` run?
pub(super) fn perf_check(perf: &Path) -> PerfInfo {
    let run = |args: &[&str]| labkit::cleanup::output(Command::new(perf).args(args));
    let version = run(&["--version"])
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let note = match &run(&["bench", "sched", "pipe", "-l", "10"]) {
        Err(e) => {
            let e = labkit::error::describe_io(e);
            format!("{} cannot run: {e}", perf.display())
        }
        Ok(o) if !o.status.success() => {
            // The first line says what went wrong; a distribution's wrapper
            // (Debian's perf for another kernel) ends with a package name.
            let stderr = String::from_utf8_lossy(&o.stderr);
            let first = stderr.lines().map(str::trim).find(|l| !l.is_empty());
            format!(
                "`{} bench sched pipe -l 10` {}: {}",
                perf.display(),
                labkit::children::ended(o.status),
                first.unwrap_or("(nothing on stderr)")
            )
        }
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

/// One `perf bench sched pipe` in the same mode and placement. perf has no
/// placement flag: `taskset -c A` puts both workers on A; for `cross` one
/// worker (perf's child process, or its first worker thread) is then moved
/// to B as soon as it exists.
pub(super) fn perf_once(
    perf: &Path,
    mode: Mode,
    cpus: Option<[usize; 2]>,
    iterations: u64,
) -> Result<PerfRun> {
    let mut cmd =
        Command::new(if cpus.is_some() { Path::new("taskset") } else { perf });
    if let Some([a, _]) = cpus {
        cmd.args(["-c", &a.to_string()]).arg(perf);
    }
    cmd.args(["bench", "sched", "pipe", "-l", &iterations.to_string()]);
    if mode == Mode::Threads {
        cmd.arg("-T");
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let what = format!("perf bench sched pipe ({})", mode.name());
    let start = Instant::now();
    // Tracked: an error below, or an interrupt, kills and reaps perf.
    let mut child = labkit::cleanup::spawn(&mut cmd)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    let stdout = labkit::cleanup::drain(child.take_stdout());
    let stderr = labkit::cleanup::drain(child.take_stderr());
    let mut moved_after_ms = None;
    let mut ended = None;
    if let Some([_, b]) = cpus.filter(|[a, b]| a != b) {
        let pid = child.pid() as u32;
        loop {
            let workers = if mode == Mode::Threads {
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
