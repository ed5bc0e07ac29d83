//! Run a program in a child with its own resource limits (and, if asked,
//! as another user), with a deadline, and collect what it said and how it
//! ended. The limits are set between `fork` and `exec` (`pre_exec`), so
//! they bind only the child and what it creates: a probe that counts how
//! many threads fit in 3 GiB cannot take the runner, or the machine, with
//! it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Limits for the child; `None` leaves the runner's own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// `RLIMIT_AS`: bytes of address space (what `prlimit --as` sets).
    pub address_space: Option<u64>,
    /// `RLIMIT_STACK`: what `ulimit -s` sets, and glibc's default thread
    /// stack.
    pub stack: Option<u64>,
    /// `RLIMIT_NPROC`: processes and threads of the child's real user.
    pub nproc: Option<u64>,
    /// Run as this uid and gid (with no supplementary groups); needs root.
    pub user: Option<u32>,
}

// Every limited child also runs with `RLIMIT_CORE` 0: the probes crash on
// purpose (stack overflow, address space), and a core file in the
// reader's current directory is not a result.

/// How a limited child ended.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    /// The deadline passed and the child was killed with `SIGKILL`.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub wall_s: f64,
}

impl Outcome {
    /// `exit 0`, `exit 1`, `SIGSEGV`, `timed out`.
    pub fn ended(&self) -> String {
        if self.timed_out {
            return "timed out (killed)".into();
        }
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => crate::children::signal_name(sig),
            _ => "unknown".into(),
        }
    }

    /// The last non-empty line the child wrote on stderr.
    pub fn last_words(&self) -> String {
        self.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").into()
    }
}

fn set(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: setrlimit is async-signal-safe; `lim` is a valid pointer.
    if unsafe { libc::setrlimit(resource, &lim) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The unprivileged user the lab runs a probe as when root's exemptions
/// (`RLIMIT_NPROC` does not bind root) would hide what it measures.
pub const NOBODY: u32 = 65534;

/// Make `cmd` start under `limits` (and as `limits.user`): the one place
/// where the lab's programs, probes and tests become limited or nobody.
pub fn apply(cmd: &mut Command, limits: Limits) -> &mut Command {
    // ANCHOR: pre_exec
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only setrlimit (RLIMIT_CORE 0 first: no core file from a probe),
    // setgroups, setgid and setuid: async-signal-safe system calls that
    // allocate nothing.
    unsafe {
        cmd.pre_exec(move || {
            set(libc::RLIMIT_CORE, 0)?;
            if let Some(v) = limits.address_space {
                set(libc::RLIMIT_AS, v)?;
            }
            if let Some(v) = limits.stack {
                set(libc::RLIMIT_STACK, v)?;
            }
            if let Some(v) = limits.nproc {
                set(libc::RLIMIT_NPROC, v)?;
            }
            if let Some(id) = limits.user {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(id) != 0
                    || libc::setuid(id) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
    // ANCHOR_END: pre_exec
}

/// Run `cmd` under `limits` ([`apply`]), stdin from /dev/null, stdout and
/// stderr captured, killed after `timeout`; always reaped.
pub fn run(
    cmd: &mut Command,
    limits: Limits,
    timeout: Duration,
) -> std::io::Result<Outcome> {
    apply(cmd, limits)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    // Its own process group, tracked: an interrupt, an error below or the
    // deadline stops the child and everything it made.
    let mut child = crate::cleanup::spawn(cmd)?;
    let out = crate::cleanup::drain(child.child().stdout.take());
    let err = crate::cleanup::drain(child.child().stderr.take());
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            child.kill();
            break child.wait4()?.0;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall_s = start.elapsed().as_secs_f64();
    // The whole group has been reaped, so nothing holds the pipes now.
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
    };
    let stdout = text(out);
    let stderr = text(err);
    Ok(Outcome { status, timed_out, stdout, stderr, wall_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_bind_the_child_only() {
        let limits = Limits { stack: Some(1 << 20), ..Limits::default() };
        let done = run(
            Command::new("sh").args(["-c", "ulimit -s; echo bye >&2"]),
            limits,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(done.stdout.trim(), "1024");
        assert_eq!(done.ended(), "exit 0");
        assert_eq!(done.last_words(), "bye");
        let (mine, _) = nix::sys::resource::getrlimit(
            nix::sys::resource::Resource::RLIMIT_STACK,
        )
        .unwrap();
        assert_ne!(mine, 1 << 20, "the runner's own limit was changed");
    }

    #[test]
    fn a_limited_child_never_dumps_core() {
        let done = run(
            Command::new("sh").args(["-c", "ulimit -c"]),
            Limits::default(),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(done.stdout.trim(), "0");
    }

    #[test]
    fn a_slow_child_is_killed_at_the_deadline() {
        let done = run(
            Command::new("sleep").arg("10"),
            Limits::default(),
            Duration::from_millis(100),
        )
        .unwrap();
        assert!(done.timed_out);
        assert!(done.wall_s < 5.0, "{}", done.wall_s);
        assert_eq!(done.ended(), "timed out (killed)");
    }
}
