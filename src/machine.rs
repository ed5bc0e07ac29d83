//! What machine a figure was measured on. Every results file carries one of
//! these, so that a figure is never quoted without its machine.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    let dir = crate::results::checkout();
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
    }
}
