//! What machine a figure was measured on. Every results file carries one of
//! these, so that a figure is never quoted without its machine.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cpus: usize,
    pub memory_mib: u64,
    pub kernel: String,
    pub arch: String,
    /// The compiler that built the lab.
    pub rustc: String,
    /// `kvm`, `none`, ... as `systemd-detect-virt` says; otherwise `yes`
    /// when the CPU reports a hypervisor, `unknown` when nothing tells.
    pub virtualization: String,
    pub hostname: String,
    /// UTC, ISO 8601.
    pub date: String,
    /// `git describe`-like: the commit of the lab's checkout, `-dirty` when
    /// it has uncommitted changes outside `results/`, `unknown` outside a
    /// checkout.
    pub commit: String,
    /// The settings and CPU facts the book quotes about this machine
    /// ([`facts`]): key -> value as the kernel prints it. Empty in results
    /// from before the lab recorded them.
    #[serde(default)]
    pub facts: std::collections::BTreeMap<String, String>,
}

impl Machine {
    /// Read the facts of this machine now.
    pub fn capture() -> Machine {
        let uts = nix::sys::utsname::uname().ok();
        let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
            uts.as_ref()
                .map_or("unknown".into(), |u| f(u).to_string_lossy().into_owned())
        };
        Machine {
            cpu_model: cpu_model(),
            logical_cpus: std::thread::available_parallelism()
                .map_or(1, |n| n.get()),
            memory_mib: memory_mib(),
            kernel: field(|u| u.release()),
            arch: field(|u| u.machine()),
            rustc: env!("LAB_RUSTC").to_string(),
            virtualization: virtualization(),
            hostname: field(|u| u.nodename()),
            date: utc_now(),
            commit: commit(),
            facts: facts(),
        }
    }

    /// One line for table captions: "AMD EPYC, 2 CPUs, Linux 6.1 (kvm)".
    pub fn summary(&self) -> String {
        format!(
            "{}, {} logical CPUs, {} MiB, Linux {} ({}), {}",
            self.cpu_model,
            self.logical_cpus,
            self.memory_mib,
            self.kernel,
            if self.virtualization == "none" {
                "bare metal".to_string()
            } else {
                format!("virtualised: {}", self.virtualization)
            },
            self.rustc
        )
    }
}

/// The CPU flags, mitigations and kernel settings the book quotes, read
/// now, so that a sentence about them rests on the run, not on typing:
/// - `pcid`: `yes` or `no`, whether the CPU has process-context ids (a
///   switch between address spaces then keeps the TLB's other entries);
/// - `spectre_v2`, `meltdown`: the kernel's line for each from
///   `/sys/devices/system/cpu/vulnerabilities/` (which mitigations a
///   switch pays for);
/// - `vm`: the hypervisor, as `systemd-detect-virt --vm` names it (`kvm`,
///   `none`), which a container does not hide, unlike
///   [`Machine::virtualization`];
/// - `kernel.pid_max`, `kernel.threads-max`, `vm.max_map_count`,
///   `vm.overcommit_memory`, `net.core.wmem_default`,
///   `net.core.rmem_default`: the `sysctl` values (`/proc/sys/...`).
///
/// A fact this machine does not show (no such file) is left out.
pub fn facts() -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if let Some(flags) = info.lines().find_map(|l| {
        l.strip_prefix("flags").and_then(|r| r.split_once(':')).map(|(_, f)| f)
    }) {
        let has = flags.split_whitespace().any(|f| f == "pcid");
        out.insert("pcid".into(), if has { "yes" } else { "no" }.into());
    }
    let read = |path: &str| {
        std::fs::read_to_string(path).ok().map(|v| v.trim().to_string())
    };
    for bug in ["spectre_v2", "meltdown"] {
        if let Some(v) =
            read(&format!("/sys/devices/system/cpu/vulnerabilities/{bug}"))
        {
            out.insert(bug.into(), v);
        }
    }
    if let Some(vm) = output("systemd-detect-virt", &["--vm"]) {
        out.insert("vm".into(), vm);
    }
    for key in [
        "kernel.pid_max",
        "kernel.threads-max",
        "vm.max_map_count",
        "vm.overcommit_memory",
        "net.core.wmem_default",
        "net.core.rmem_default",
    ] {
        if let Some(v) = read(&format!("/proc/sys/{}", key.replace('.', "/"))) {
            out.insert(key.into(), v);
        }
    }
    out
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown".into(), |(_, name)| name.trim().to_string())
}

fn memory_mib() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

fn virtualization() -> String {
    if let Some(out) = output("systemd-detect-virt", &[]) {
        return out;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flagged =
        info.lines().any(|l| l.starts_with("flags") && l.contains(" hypervisor"));
    if flagged { "yes".into() } else { "unknown".into() }
}

/// The commit of the lab's own checkout (wherever `lab` was started from),
/// `-dirty` when [`uncommitted`] finds changes.
fn commit() -> String {
    let dir = crate::checkout::root();
    let Some(head) = git(&dir, &["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    match uncommitted(&dir) {
        Some(files) if !files.is_empty() => format!("{head}-dirty"),
        _ => head,
    }
}

/// The uncommitted changes of checkout `dir`, tracked or not (`git status
/// --porcelain` lines), `None` outside a git checkout. Changes under
/// `results/` do not count: they are this lab's output, and the second run
/// of `just results` would otherwise see the first's.
pub fn uncommitted(dir: &std::path::Path) -> Option<Vec<String>> {
    let args = ["status", "--porcelain", "--", ".", ":(exclude)results"];
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().map(str::to_string).collect())
}

/// `git -C dir ARGS`'s trimmed stdout; `None` if git failed or printed
/// nothing.
pub(crate) fn git(dir: &std::path::Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// A command's trimmed stdout; `systemd-detect-virt` prints `none` and
/// exits 1 on bare metal, so any output counts.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// The current time as `2026-11-30T10:40:43Z`.
pub fn utc_now() -> String {
    let secs =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc(secs)
}

fn utc(secs: u64) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rest / 3600, rest / 60 % 60, rest % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_iso() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_035_243), "2026-11-30T10:40:43Z");
    }

    #[test]
    fn capture_fills_every_field() {
        let m = Machine::capture();
        assert!(m.logical_cpus >= 1);
        assert!(!m.kernel.is_empty() && m.kernel != "unknown");
        assert!(m.rustc.starts_with("rustc "), "{}", m.rustc);
        assert!(m.summary().contains(&m.kernel));
        // Every Linux has pid_max, and every x86 CPU a flags line.
        assert!(m.facts["kernel.pid_max"].parse::<u64>().is_ok(), "{:?}", m.facts);
        if m.arch == "x86_64" {
            assert!(
                ["yes", "no"].contains(&m.facts["pcid"].as_str()),
                "{:?}",
                m.facts
            );
        }
    }
}

/// What else the machine was doing while an experiment ran: its load
/// average at the start and at the end, and the CPU time the rest of the
/// machine used meanwhile (every CPU's busy time, from `/proc/stat`, less
/// the run's own: this process and every child it reaped).
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Load {
    /// `/proc/loadavg` at the start and at the end (1, 5 and 15 minutes).
    pub loadavg_start: String,
    pub loadavg_end: String,
    /// CPU seconds used by other processes while it ran.
    pub others_cpu_s: f64,
    pub wall_s: f64,
    /// Other processes used more than [`BUSY_SHARE`] of one CPU on average,
    /// and more than [`BUSY_MIN_S`] in all.
    pub busy: bool,
}

/// The share of one CPU that other processes may use, on average over an
/// experiment, before the machine counts as busy. The kernel's tick-based
/// busy time and the run's own exact CPU time disagree by a little even on
/// an idle machine; a quarter of a CPU is well above that and well below
/// what a browser or a build takes.
pub const BUSY_SHARE: f64 = 0.25;

/// CPU seconds other processes must use before a run counts as busy at
/// all: `/proc/stat` counts in clock ticks (10 ms), so over a run of a
/// tenth of a second a tick or two is already a large share.
pub const BUSY_MIN_S: f64 = 0.2;

/// A load reading at one moment, to be turned into a [`Load`] later.
#[derive(Clone, Debug)]
pub struct LoadMark {
    loadavg: String,
    machine_busy_s: Option<f64>,
    own_s: f64,
    at: std::time::Instant,
}

impl LoadMark {
    pub fn now() -> LoadMark {
        LoadMark {
            loadavg: loadavg(),
            machine_busy_s: machine_busy_s(),
            own_s: own_cpu_s(),
            at: std::time::Instant::now(),
        }
    }

    /// The load from this mark to now.
    pub fn until_now(&self) -> Load {
        let end = LoadMark::now();
        let wall_s = end.at.duration_since(self.at).as_secs_f64();
        let others = match (self.machine_busy_s, end.machine_busy_s) {
            (Some(a), Some(b)) => (b - a) - (end.own_s - self.own_s),
            _ => 0.0,
        };
        Load::new(self.loadavg.clone(), end.loadavg, others.max(0.0), wall_s)
    }
}

impl Load {
    pub fn new(start: String, end: String, others_cpu_s: f64, wall_s: f64) -> Load {
        let busy = others_cpu_s > BUSY_MIN_S && others_cpu_s / wall_s > BUSY_SHARE;
        Load { loadavg_start: start, loadavg_end: end, others_cpu_s, wall_s, busy }
    }

    /// "other processes used 3.1 CPU-s in 10 s (31% of a CPU); load
    /// average 1.20 at the start, 1.80 at the end".
    pub fn describe(&self) -> String {
        let first = |l: &str| l.split_whitespace().next().unwrap_or("?").to_string();
        format!(
            "other processes used {:.1} CPU-s in {:.0} s ({:.0}% of a CPU); load \
             average {} at the start, {} at the end",
            self.others_cpu_s,
            self.wall_s,
            100.0 * self.others_cpu_s / self.wall_s.max(1e-9),
            first(&self.loadavg_start),
            first(&self.loadavg_end)
        )
    }
}

/// `/proc/loadavg` as it reads: the 1, 5 and 15-minute load averages, the
/// runnable and all tasks, the last pid.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or("unknown".into(), |s| s.trim().to_string())
}

/// Every CPU's busy time so far, in seconds: the first line of
/// `/proc/stat` (user, nice, system, idle, iowait, irq, softirq, steal),
/// less idle and iowait.
fn machine_busy_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    busy_s_of(stat.lines().next()?)
}

fn busy_s_of(cpu_line: &str) -> Option<f64> {
    let mut fields = cpu_line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<f64> =
        fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if ticks.len() < 8 {
        return None;
    }
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7];
    Some(busy / hz.max(1.0))
}

/// This process's CPU time and its reaped children's, in seconds.
fn own_cpu_s() -> f64 {
    use labkit::measure::{rusage, seconds};
    [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN]
        .into_iter()
        .map(|who| {
            let ru = rusage(who);
            seconds(ru.ru_utime) + seconds(ru.ru_stime)
        })
        .sum()
}

#[cfg(test)]
mod load_tests {
    use super::*;

    #[test]
    fn busy_time_is_read_from_the_cpu_line() {
        // SAFETY: sysconf only reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let line = "cpu  100 20 30 5000 40 5 5 10 0 0";
        let busy = busy_s_of(line).unwrap();
        assert!((busy - 170.0 / hz).abs() < 1e-9, "{busy}");
        assert_eq!(busy_s_of("cpu0 1 2 3"), None);
        assert_eq!(busy_s_of("intr 1 2 3 4 5 6 7 8"), None);
    }

    #[test]
    fn a_machine_is_busy_above_a_quarter_of_a_cpu() {
        let load =
            |others| Load::new("0.5 0 0".into(), "1.5 0 0".into(), others, 10.0);
        assert!(!load(2.0).busy);
        assert!(load(3.0).busy);
        assert_eq!(
            load(3.0).describe(),
            "other processes used 3.0 CPU-s in 10 s (30% of a CPU); load average \
             0.5 at the start, 1.5 at the end"
        );
        // A tick or two over a tiny run is not a busy machine.
        assert!(!Load::new(String::new(), String::new(), 0.02, 0.05).busy);
    }
}
