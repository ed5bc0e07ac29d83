//! Run a program as a whole process and time it from outside, the way the
//! articles ran `time ./fork`: wall-clock time around spawn and reap, and
//! the kernel's own accounting from `wait4(2)` (user and system CPU, peak
//! resident memory, voluntary and involuntary context switches). The kernel
//! folds in every descendant the program reaped, so a fork program's
//! figures include all its children.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What one run of a program cost, as the kernel and a clock saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Usage {
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Largest resident set of the program or any child it reaped, in KiB.
    pub max_rss_kib: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// A finished run: its usage, how it exited and what it wrote on stderr.
#[derive(Debug)]
pub struct Finished {
    pub usage: Usage,
    pub status: ExitStatus,
    pub stderr: String,
}

impl Finished {
    /// `Ok` for exit status 0, otherwise a one-line description including
    /// the program's own last stderr line.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.status.success() {
            return Ok(());
        }
        let said = self.stderr.lines().last().unwrap_or("").trim();
        let how = crate::children::ended(self.status);
        Err(if said.is_empty() {
            format!("{what}: {how}")
        } else {
            format!("{what}: {how}: {said}")
        })
    }
}

/// Spawn `cmd` (its stdin and stdout as the caller set them, stderr
/// captured) in a process group of its own ([`crate::cleanup::spawn`]),
/// wait for it with `wait4`, and return what it cost. On every path,
/// errors included, the program and anything it left running are stopped
/// and reaped.
pub fn run(cmd: &mut Command) -> std::io::Result<Finished> {
    cmd.stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = crate::cleanup::spawn(cmd)?;
    let mut stderr = String::new();
    if let Some(mut pipe) = child.take_stderr() {
        // Read to the end before reaping so a chatty program cannot block
        // on a full pipe; its children inherit the pipe and have exited by
        // the time the program has. On an error `child` is dropped, which
        // kills and reaps the group.
        let mut raw = Vec::new();
        pipe.read_to_end(&mut raw)?;
        stderr = String::from_utf8_lossy(&raw).into_owned();
    }
    let (status, ru) = child.wait4()?;
    let wall = start.elapsed();
    Ok(Finished { usage: usage_from(wall, &ru), status, stderr })
}

/// A `timeval` (from `rusage`) in seconds.
pub fn seconds(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// What `ru` (from `wait4` or `getrusage`) says, with `wall` beside it.
pub fn usage_from(wall: Duration, ru: &libc::rusage) -> Usage {
    Usage {
        wall_s: wall.as_secs_f64(),
        user_s: seconds(ru.ru_utime),
        sys_s: seconds(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    }
}

/// This process's own accounting so far (`getrusage(RUSAGE_SELF)`), with
/// wall time left at zero: take two and subtract to measure a stretch of
/// work done in-process.
pub fn self_usage() -> Usage {
    usage(libc::RUSAGE_SELF)
}

/// `getrusage(who)` (`RUSAGE_SELF`, `RUSAGE_CHILDREN`, `RUSAGE_THREAD`), with
/// wall time left at zero.
pub fn usage(who: libc::c_int) -> Usage {
    usage_from(Duration::ZERO, &rusage(who))
}

/// `getrusage(who)` as the kernel fills it in, for the counts [`Usage`]
/// leaves out (page faults, say).
pub fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: rusage is plain old data that getrusage fills in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer; getrusage fails only for an invalid `who`,
    // and then leaves the zeroes.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_real_process() {
        let done = run(Command::new("sh").args(["-c", "sleep 0.05; echo oops >&2"]))
            .unwrap();
        assert!(done.status.success());
        assert!(done.usage.wall_s >= 0.05, "{:?}", done.usage);
        assert!(done.usage.max_rss_kib > 0);
        assert_eq!(done.stderr, "oops\n");
        assert!(done.check("sh").is_ok());
    }

    #[test]
    fn failures_are_described_with_their_last_words() {
        let done =
            run(Command::new("sh")
                .args(["-c", "echo first >&2; echo last >&2; exit 3"]))
            .unwrap();
        assert_eq!(done.check("sh").unwrap_err(), "sh: exited with status 3: last");
        let killed = run(Command::new("sh").args(["-c", "kill -9 $$"])).unwrap();
        assert_eq!(killed.check("sh").unwrap_err(), "sh: was killed by SIGKILL");
    }

    #[test]
    fn missing_programs_are_an_error() {
        assert!(run(&mut Command::new("/nonexistent/program")).is_err());
    }
}
