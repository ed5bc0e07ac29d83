//! Run a program in a child with its own resource limits (and, if asked,
//! as another user), with a deadline, and collect what it said and how it
//! ended. The limits are set between `fork` and `exec` (`pre_exec`), so
//! they bind only the child and what it creates: a probe that counts how
//! many threads fit in 3 GiB cannot take the runner, or the machine, with
//! it.
//!
//! A child that runs as another user must be able to reach its program:
//! [`copy_for`] copies a binary out of a root checkout in a 0700 home
//! (`/root/lab/target/release/...`) into a directory that user can enter.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
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
    /// Its program must be one that user can reach ([`copy_for`]).
    pub user: Option<u32>,
}

impl Limits {
    /// Who the child runs as, for a message: `uid 65534`, or this
    /// process's own user (`root`, `uid 1000`).
    pub fn runs_as(&self) -> String {
        // SAFETY: geteuid has no preconditions and cannot fail.
        match self.user.unwrap_or_else(|| unsafe { libc::geteuid() }) {
            0 => "root".into(),
            id => format!("uid {id}"),
        }
    }
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

/// A program copied where another user can run it ([`copy_for`]): the
/// copy and its directory are removed when this is dropped (or by the
/// interrupt handler, [`crate::cleanup`]).
#[derive(Debug)]
pub struct Copied {
    dir: crate::cleanup::TempDir,
    program: PathBuf,
}

impl Copied {
    /// The copy: `<tmp>/lab-uid65534-XXXXXX/<name>`, mode 0755.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Its directory, mode 0755, owned by this process's user.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `Command::new(copy)`, started in the copy's directory: the user
    /// could not enter the 0700 directory it would otherwise inherit as
    /// its current one, where a relative path (`fork`'s default
    /// `logFile.log`) would then fail. The directory is not the user's to
    /// write in: a program that writes gets a path in one that is.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(self.dir.path());
        cmd
    }
}

/// Copy `program` where `user` can execute it: a fresh temporary directory
/// under `std::env::temp_dir()` ([`crate::cleanup::tempdir`]), mode 0755,
/// holding a copy of mode 0755. A checkout in root's 0700 home cannot be
/// entered by anyone else, so its binaries cannot be run as
/// [`NOBODY`]; the copy can. Refused, in one line that names the user and
/// the path it cannot reach, when no copy can be made, or when the
/// temporary directory is itself in one the user cannot enter (`TMPDIR`).
pub fn copy_for(user: u32, program: &Path) -> crate::Result<Copied> {
    copy_in(&std::env::temp_dir(), user, program)
}

fn copy_in(parent: &Path, user: u32, program: &Path) -> crate::Result<Copied> {
    use crate::Error;
    let refuse = |why: String| {
        Error::failed(format!(
            "uid {user} cannot reach {}, and no copy it can run was made: {why}",
            program.display()
        ))
    };
    let io = |what: String, e: std::io::Error| {
        refuse(format!("{what}: {}", crate::error::describe_io(&e)))
    };
    let name = program.file_name().ok_or_else(|| refuse("not a file".into()))?;
    let dir = crate::cleanup::tempdir_in(parent, &format!("lab-uid{user}-"))
        .map_err(|e| {
            io(format!("cannot create a directory in {}", parent.display()), e)
        })?;
    // mkdtemp made it 0700, for its owner alone.
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(dir.path(), open.clone())
        .map_err(|e| io(format!("cannot chmod 0755 {}", dir.path().display()), e))?;
    // Every directory on the way must let the user through, the temporary
    // one's parents included: `TMPDIR=/root/tmp` would fail as the
    // checkout did.
    let real = dir
        .path()
        .canonicalize()
        .map_err(|e| io(dir.path().display().to_string(), e))?;
    for step in real.ancestors() {
        let meta = std::fs::metadata(step)
            .map_err(|e| io(step.display().to_string(), e))?;
        if !can_enter(&meta, user) {
            return Err(refuse(format!(
                "{} is mode {:04o}, closed to it; set TMPDIR to a directory it can enter",
                step.display(),
                meta.mode() & 0o7777
            )));
        }
    }
    let copy = dir.path().join(name);
    // Copied by `cp`, a process of its own, never through a descriptor of
    // this one: a child that another thread forks while such a descriptor
    // is open would share it until it execs, and the copy, open for writing
    // in that child, could not be run meanwhile (ETXTBSY, "Text file busy").
    // (Reading it here is harmless, and names what is wrong with it.)
    let copied = std::fs::File::open(program).and_then(|_| {
        std::process::Command::new("cp")
            .arg("--")
            .arg(program)
            .arg(&copy)
            .stdin(std::process::Stdio::null())
            .output()
            .and_then(|out| {
                if out.status.success() {
                    Ok(())
                } else {
                    let err = String::from_utf8_lossy(&out.stderr);
                    Err(std::io::Error::other(err.trim().to_string()))
                }
            })
    });
    copied
        .and_then(|()| std::fs::set_permissions(&copy, open))
        .map_err(|e| io(format!("cannot copy it to {}", copy.display()), e))?;
    Ok(Copied { dir, program: copy })
}

/// May `user` search (enter) the directory `meta` describes? As [`apply`]
/// makes it: uid and gid `user`, no other group (ACLs aside).
fn can_enter(meta: &std::fs::Metadata, user: u32) -> bool {
    if user == 0 {
        return true; // root enters any directory
    }
    let bit = if meta.uid() == user {
        0o100
    } else if meta.gid() == user {
        0o010
    } else {
        0o001
    };
    meta.mode() & bit != 0
}

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
    let out = crate::cleanup::drain(child.take_stdout());
    let err = crate::cleanup::drain(child.take_stderr());
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
    fn a_copy_is_0755_in_a_0755_directory_it_starts_in() {
        let copy = copy_for(NOBODY, Path::new("/bin/sh")).unwrap();
        let dir = copy.dir().to_path_buf();
        assert_eq!(copy.program(), dir.join("sh"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!((mode(&dir), mode(copy.program())), (0o755, 0o755));
        // As nobody when root can become it; as this user otherwise.
        let user = nix::unistd::Uid::effective().is_root().then_some(NOBODY);
        let limits = Limits { user, ..Limits::default() };
        let mut cmd = copy.command();
        let done =
            run(cmd.args(["-c", "id -u; pwd"]), limits, Duration::from_secs(10))
                .unwrap();
        assert_eq!(done.ended(), "exit 0", "{}", done.stderr);
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = user.unwrap_or_else(|| unsafe { libc::geteuid() });
        assert_eq!(done.stdout, format!("{uid}\n{}\n", dir.display()));
        drop(copy);
        assert!(!dir.exists(), "the copy's directory was left behind");
    }

    #[test]
    fn no_copy_is_made_where_the_user_cannot_reach_it() {
        // A temporary directory inside a 0700 one, as TMPDIR=/root/tmp: closed
        // to every user but its owner, this test's, which may be nobody.
        let closed = crate::cleanup::tempdir("lab-closed-").unwrap();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let other = if me == NOBODY { NOBODY - 1 } else { NOBODY };
        let err = copy_in(closed.path(), other, Path::new("/bin/sh")).unwrap_err();
        let why = format!(
            "uid {other} cannot reach /bin/sh, and no copy it can run was made: \
             {} is mode 0700, closed to it; set TMPDIR to a directory it can enter",
            closed.path().display()
        );
        assert_eq!(err.message, why);
        let left = std::fs::read_dir(closed.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("lab-uid"))
            .count();
        assert_eq!(left, 0, "the refused copy's directory was left behind");

        let err = copy_for(NOBODY, Path::new("/no/such/program")).unwrap_err();
        assert!(
            err.message.starts_with(
                "uid 65534 cannot reach /no/such/program, and no copy it can \
                 run was made: cannot copy it to "
            ) && err.message.ends_with("No such file or directory (ENOENT)"),
            "{}",
            err.message
        );
        assert_eq!(err.message.lines().count(), 1);
    }

    #[test]
    fn the_user_a_child_runs_as_is_named() {
        let nobody = Limits { user: Some(NOBODY), ..Limits::default() };
        assert_eq!(nobody.runs_as(), "uid 65534");
        let root = Limits { user: Some(0), ..Limits::default() };
        assert_eq!(root.runs_as(), "root");
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
