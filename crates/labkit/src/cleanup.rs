//! Nothing left behind when the runner is interrupted: a registry of the
//! process trees and temporary directories the runner made, and one thread
//! that waits for SIGINT, SIGTERM or SIGHUP.
//!
//! - Every program the runner starts goes through [`spawn`] (or
//!   [`output`]): it runs in a process group of its own, so one
//!   `killpg(SIGKILL)` stops it and every process it forked, and the
//!   returned [`Tracked`] reaps that group on every path, error paths
//!   included (dropping it kills and reaps).
//! - Every temporary directory is a [`TempDir`], removed when dropped.
//! - [`install`], first thing in `main`, catches the three signals with a
//!   handler that hands them to a thread of their own (through a pipe).
//!   On a signal that thread kills every registered group, reaps them, removes every registered
//!   directory, prints one line and exits with 128 + the signal number:
//!
//!   `lab: interrupted by SIGINT; stopped 1 program, removed /tmp/lab-x`
//!
//! Whether the signal comes from the terminal (Ctrl-C goes to the
//! foreground process group: `lab` itself, since its programs run in
//! groups of their own) or to the `lab` pid alone, the result is the same.
//! The runner is also a child subreaper (`PR_SET_CHILD_SUBREAPER`): a
//! grandchild whose parent died is handed to the runner, not to init, so
//! the runner can wait for the whole tree before it exits.
//!
//! A runner killed outright (`kill -9`) can do none of this, so two things
//! stand behind it:
//! - every program [`spawn`] starts asks for `PR_SET_PDEATHSIG`
//!   ([`crate::children::die_with_parent`]): the kernel kills it with the
//!   runner;
//! - [`install`] forks a *guard*, a small process of its own (its own
//!   process group, named `lab-guard`) that the runner tells, over a pipe,
//!   of every process group it starts and every temporary directory it
//!   makes. When the pipe reaches end-of-file, the runner has exited; if
//!   anything is still registered then, the runner died without cleaning
//!   up, and the guard kills those groups (a program's own children too,
//!   which the death signal does not reach, such as `perf bench`'s worker)
//!   and removes those directories, in one line. A runner that ends
//!   normally closes the pipe with nothing registered and reaps the guard
//!   ([`finish`]).
//!
//! The registry lock is held while a program is spawned and while the
//! interrupt is handled, so a program is either registered (and killed) or
//! never started, and the main thread, which takes the lock to register or
//! unregister, stops there until the process exits.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::IntoRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

struct Registry {
    /// Process group id (= the leader's pid) -> what it runs.
    groups: BTreeMap<i32, String>,
    dirs: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { groups: BTreeMap::new(), dirs: Vec::new() });

fn registry() -> MutexGuard<'static, Registry> {
    // A panic elsewhere must not stop the cleanup: the data stays usable.
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A program started by [`spawn`]: the leader of its own process group.
/// Dropping it before it was waited for kills the group and reaps it.
///
/// ```
/// use std::process::{Command, Stdio};
/// let mut echo = Command::new("echo");
/// let mut t = labkit::cleanup::spawn(echo.arg("hi").stdout(Stdio::piped())).unwrap();
/// let out = labkit::cleanup::drain(t.take_stdout());
/// let (status, _usage) = t.wait4().unwrap();
/// assert!(status.success());
/// assert_eq!(out.join().unwrap(), b"hi\n");
/// ```
///
/// Only its pipes are handed out, never the `Child`, so no caller can reap
/// the leader behind the registry's back (its group id could then be given
/// to another group while still registered for `killpg`):
///
/// ```compile_fail,E0616
/// let mut t = labkit::cleanup::spawn(&mut std::process::Command::new("true")).unwrap();
/// t.child.wait(); // private field: a wait goes through Tracked::wait4
/// ```
#[derive(Debug)]
pub struct Tracked {
    child: Child,
    reaped: bool,
}

/// Spawn `cmd` in a new process group of its own and register the group
/// so an interrupt stops it.
pub fn spawn(cmd: &mut Command) -> io::Result<Tracked> {
    cmd.process_group(0);
    let parent = std::process::id() as i32;
    // SAFETY: die_with_parent makes two async-signal-safe system calls. It
    // is added last, so it runs after any earlier pre_exec (limited::apply's
    // setuid, which would clear the death signal).
    unsafe {
        cmd.pre_exec(move || {
            if crate::children::die_with_parent(parent) {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
        });
    }
    let mut reg = registry();
    let child = cmd.spawn()?;
    let name = cmd.get_program().to_string_lossy().into_owned();
    reg.groups.insert(child.id() as i32, name);
    tell_guard(b'g', child.id().to_string().as_bytes(), true);
    Ok(Tracked { child, reaped: false })
}

/// Like `Command::output`, for a program in a tracked group: stdin from
/// /dev/null, stdout and stderr captured.
pub fn output(cmd: &mut Command) -> io::Result<Output> {
    use std::process::Stdio;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut tracked = spawn(cmd)?;
    let out = drain(tracked.take_stdout());
    let err = drain(tracked.take_stderr());
    let (status, _) = tracked.wait4()?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Output { status, stdout, stderr })
}

/// Read a pipe to its end on a thread of its own.
pub fn drain(
    pipe: Option<impl io::Read + Send + 'static>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut raw = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut raw);
        }
        raw
    })
}

impl Tracked {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Its standard output, if piped (once). Only the pipes are handed
    /// out, never the `Child`: a wait through it would reap the leader
    /// behind the registry's back, and the group id could then be reused
    /// while still registered, which the `killpg` calls here rest on.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Its standard error, if piped (once); see [`Tracked::take_stdout`].
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// Wait for the program with `wait4`, which also returns the kernel's
    /// accounting of it and of every child it reaped; then stop and reap
    /// whatever it left running in its group.
    pub fn wait4(&mut self) -> io::Result<(ExitStatus, libc::rusage)> {
        self.ended()?;
        self.reap()?.ok_or_else(|| io::Error::other("ended, yet not waitable"))
    }

    /// The program's status if it has ended (`WNOHANG`).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        Ok(self.reap()?.map(|(status, _)| status))
    }

    /// `SIGKILL` to the whole group (the program and its descendants).
    pub fn kill(&mut self) {
        if !self.reaped {
            // SAFETY: killpg only sends a signal. The group cannot have been
            // reused: its leader is our unreaped child.
            unsafe { libc::killpg(self.pid(), libc::SIGKILL) };
        }
    }

    /// Block until the leader has ended, without reaping it (`WNOWAIT`)
    /// and without the registry's lock, which the interrupt handler needs.
    fn ended(&self) -> io::Result<()> {
        crate::children::wait_ended(self.pid())
    }

    /// Reap the leader if it has ended, then the rest of its group, and
    /// unregister it, all under the registry's lock: the interrupt handler
    /// never sees a registered group whose leader was reaped, whose id the
    /// kernel may then have given to someone else's group.
    fn reap(&mut self) -> io::Result<Option<(ExitStatus, libc::rusage)>> {
        let mut reg = registry();
        match crate::children::wait4(self.pid(), libc::WNOHANG) {
            Ok(Some(done)) => {
                self.reaped = true;
                reap_group(self.pid());
                reg.groups.remove(&self.pid());
                tell_guard(b'g', self.pid().to_string().as_bytes(), false);
                Ok(Some(done))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                // Not our child any more (or never waitable): stop tracking
                // it so drop does not signal a group that may be reused.
                if e.raw_os_error() == Some(libc::ECHILD) {
                    self.reaped = true;
                    reg.groups.remove(&self.pid());
                    tell_guard(b'g', self.pid().to_string().as_bytes(), false);
                }
                Err(e)
            }
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            if self.ended().is_ok() {
                let _ = self.reap();
            }
        }
    }
}

/// Reap every child of ours left in group `pgid` (the leader is reaped):
/// those a program left running are killed first. Only children of ours
/// can be left (the runner is a subreaper), so the group cannot have been
/// reused while one is.
fn reap_group(pgid: i32) {
    let mut status = 0;
    let mut flags = libc::WNOHANG;
    loop {
        // SAFETY: a valid pointer to a local.
        let r = unsafe { libc::waitpid(-pgid, &mut status, flags) };
        if r > 0 {
            continue;
        }
        if r == 0 {
            // Alive members of a group whose leader has ended: stop them.
            // SAFETY: the group still has a member, our unreaped child.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
            flags = 0;
            continue;
        }
        if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return; // ECHILD: none left
    }
}

/// A temporary directory that is removed when dropped, or by the
/// interrupt handler if the runner is stopped first, or by the guard if the
/// runner is killed outright, or, if the guard died too, by the next
/// [`remove_dead_tempdirs`]: its maker holds an `flock` on it for as long
/// as the directory lives (the kernel drops it with the process), and
/// marks it [`LOCK_MARK`] once locked.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    _lock: Option<DirLock>,
}

/// The file in a locked temporary directory that says its maker holds a
/// lock on it: a directory without it is never judged.
pub const LOCK_MARK: &str = ".lab-lock";

/// The start of the names [`remove_dead_tempdirs`] judges: the lab's own
/// temporary directories. Another prefix (a test's scratch directory, say)
/// is locked all the same, but never marked and never swept.
pub const SWEPT_PREFIX: &str = "lab";

/// An exclusive `flock` on a directory, held until this is dropped (or its
/// process ends, however it ends).
///
/// Dropping it unlocks before closing. A bare close would not be enough:
/// the lock belongs to the open file description, and a child that
/// another thread forks at that moment shares the description until it
/// execs, so the lock would outlive the drop for a while.
#[derive(Debug)]
pub struct DirLock(std::fs::File);

impl Drop for DirLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Take an exclusive `flock` on directory `dir` without waiting, or `None`
/// when a live process holds it.
pub fn try_lock_dir(dir: &Path) -> io::Result<Option<DirLock>> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(dir)?;
    // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(Some(DirLock(file)));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(None) } else { Err(e) }
}

/// Remove the temporary directories (`<tmp>/lab*`, [`SWEPT_PREFIX`]) whose makers died
/// without removing them (a runner and its guard both killed), and return
/// them. A directory is judged only if it carries [`LOCK_MARK`], which its
/// maker writes after taking its lock, and is removed only if the lock is
/// free: a live process's directory is never touched.
pub fn remove_dead_tempdirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ours =
            entry.file_name().to_str().is_some_and(|n| n.starts_with(SWEPT_PREFIX));
        if !ours || !path.join(LOCK_MARK).is_file() {
            continue;
        }
        if let Ok(Some(_held)) = try_lock_dir(&path)
            && std::fs::remove_dir_all(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed
}

/// An unnamed file in the temporary folder (honouring `TMPDIR`), for a
/// program's output to be read back: it has no name from the start
/// (`O_TMPFILE`), or loses it at once where the file system lacks that, so
/// nothing is left to remove however the process ends.
pub fn tempfile() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    let unnamed = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(&dir);
    match unnamed {
        Ok(file) => Ok(file),
        Err(e)
            if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) =>
        {
            let folder = tempdir("lab-file-")?;
            let path = folder.path().join("out");
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            drop(folder); // removes the name; the open file lives on
            Ok(file)
        }
        Err(e) => Err(e),
    }
}

/// Create a directory `<tmp>/<prefix>XXXXXX` (honouring `TMPDIR`).
pub fn tempdir(prefix: &str) -> io::Result<TempDir> {
    tempdir_in(&std::env::temp_dir(), prefix)
}

/// Create a directory `<parent>/<prefix>XXXXXX`, marked [`LOCK_MARK`] when
/// `prefix` starts with [`SWEPT_PREFIX`].
pub fn tempdir_in(parent: &Path, prefix: &str) -> io::Result<TempDir> {
    let mut reg = registry();
    // mkdtemp(3): a new directory, mode 0700, under a name no one else got.
    let path = nix::unistd::mkdtemp(&parent.join(format!("{prefix}XXXXXX")))?;
    reg.dirs.push(path.clone());
    remove_if_killed(&path);
    // Locked, then marked: a sweep that sees the mark finds the lock held.
    let lock = try_lock_dir(&path).ok().flatten();
    let marked = lock.is_some() && prefix.starts_with(SWEPT_PREFIX);
    let dir = TempDir { path, _lock: lock };
    drop(reg); // dropping `dir` on an error below takes the lock
    if marked {
        // On an error (a full disk) `dir` is dropped: removed.
        std::fs::write(dir.path.join(LOCK_MARK), b"")?;
    }
    Ok(dir)
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove it now, and say if that failed (dropping it says nothing).
    pub fn close(self) -> io::Result<()> {
        let removed = std::fs::remove_dir_all(&self.path);
        drop(self); // unregisters it; the folder is gone already
        removed
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let mut reg = registry();
        let _ = std::fs::remove_dir_all(&self.path);
        reg.dirs.retain(|d| d != &self.path);
        keep_if_killed(&self.path);
    }
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The write end of the pipe to the guard, and the guard's pid; -1 and 0
/// without one (before [`install`], in tests, after [`finish`]).
static GUARD: AtomicI32 = AtomicI32::new(-1);
static GUARD_PID: AtomicI32 = AtomicI32::new(0);

/// Tell the guard that `what` (a process group, `g`, or a directory, `d`)
/// is now to be stopped or removed if the runner dies (`on`), or no longer.
/// One record, `+g1234\0`, in one `write` of at most `PIPE_BUF` bytes: it
/// reaches the guard whole, never interleaved with another thread's.
fn tell_guard(kind: u8, what: &[u8], on: bool) {
    let fd = GUARD.load(Ordering::Acquire);
    if fd < 0 || what.len() + 3 > libc::PIPE_BUF || what.contains(&0) {
        return;
    }
    let mut record = Vec::with_capacity(what.len() + 3);
    record.extend([if on { b'+' } else { b'-' }, kind]);
    record.extend_from_slice(what);
    record.push(0);
    // SAFETY: a valid buffer of `record.len()` bytes. A guard that has gone
    // gives EPIPE (Rust programs ignore SIGPIPE): nothing more to tell.
    unsafe { libc::write(fd, record.as_ptr().cast(), record.len()) };
}

/// Remove the directory `path` if the runner is killed before it calls
/// [`keep_if_killed`] (the runner's half-written results, say).
pub fn remove_if_killed(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    tell_guard(b'd', path.as_os_str().as_bytes(), true);
}

/// The guard no longer removes `path`: it was moved into place, or removed.
pub fn keep_if_killed(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    tell_guard(b'd', path.as_os_str().as_bytes(), false);
}

/// Fork the guard. Called by [`install`] before any thread exists, so the
/// child may run ordinary code (no lock can be held by a thread it lacks).
fn start_guard(program: &'static str) -> io::Result<()> {
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    // SAFETY: the process has one thread (install runs first in main), so
    // the child inherits no lock held elsewhere and may allocate.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(write_end);
            guard(program, read_end)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(read_end);
            GUARD_PID.store(child.as_raw(), Ordering::Release);
            GUARD.store(write_end.into_raw_fd(), Ordering::Release);
            Ok(())
        }
        Err(e) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

/// The guard's whole life: keep the runner's records until the pipe ends,
/// then stop and remove whatever is still registered, and exit.
fn guard(program: &str, pipe: std::os::fd::OwnedFd) -> ! {
    use std::io::BufRead;
    use std::os::unix::ffi::OsStrExt;
    // Out of the runner's process group (a Ctrl-C or a `kill -9 -PGID` of
    // the runner's group must not take the guard with it), and named so
    // that `ps` says what it is.
    let _ = nix::unistd::setpgid(
        nix::unistd::Pid::from_raw(0),
        nix::unistd::Pid::from_raw(0),
    );
    // SAFETY: prctl with a valid NUL-terminated name; signal with SIG_IGN.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"lab-guard".as_ptr(), 0, 0, 0);
        for sig in SIGNALS {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let mut groups: Vec<i32> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut records = io::BufReader::new(std::fs::File::from(pipe));
    let mut record = Vec::new();
    loop {
        record.clear();
        match records.read_until(0, &mut record) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some((&[sign, kind], rest)) =
            record.strip_suffix(&[0]).map(|r| r.split_at(2.min(r.len())))
        else {
            continue;
        };
        match kind {
            b'g' => {
                let Some(pgid) =
                    std::str::from_utf8(rest).ok().and_then(|t| t.parse().ok())
                else {
                    continue;
                };
                groups.retain(|&g| g != pgid);
                if sign == b'+' {
                    groups.push(pgid);
                }
            }
            b'd' => {
                let dir = PathBuf::from(std::ffi::OsStr::from_bytes(rest));
                dirs.retain(|d| d != &dir);
                if sign == b'+' {
                    dirs.push(dir);
                }
            }
            _ => {}
        }
    }
    // End of file: the runner has exited. Nothing registered that is still
    // there (a group with a member, a directory): it cleaned up itself.
    // SAFETY: killpg with signal 0 only checks that the group has a member.
    groups.retain(|&g| unsafe { libc::killpg(g, 0) } == 0);
    dirs.retain(|d| d.exists());
    if groups.is_empty() && dirs.is_empty() {
        // SAFETY: _exit ends the guard at once.
        unsafe { libc::_exit(0) }
    }
    for &pgid in &groups {
        // SAFETY: killpg only sends a signal. The group's leader was the
        // runner's child, killed by its death signal; the group id stays
        // ours while any member lives, and no new group can take it then.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    let mut removed = Vec::new();
    for dir in &dirs {
        if std::fs::remove_dir_all(dir).is_ok() {
            removed.push(dir.display().to_string());
        }
    }
    let removed = if removed.is_empty() {
        "no directory to remove".to_string()
    } else {
        format!("removed {}", removed.join(", "))
    };
    eprintln!(
        "{program}: the runner died without cleaning up (killed?); its guard \
         stopped {} program group{} and {removed}",
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    // SAFETY: _exit ends the guard at once.
    unsafe { libc::_exit(0) }
}

/// Call last in `main` (the interrupt does it too): close the pipe to the
/// guard, which then finds nothing registered and exits, and reap it, so
/// that the runner leaves no process behind when it ends.
pub fn finish() {
    let fd = GUARD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: the write end is ours, and no longer published.
        unsafe { libc::close(fd) };
    }
    let pid = GUARD_PID.swap(0, Ordering::AcqRel);
    if pid > 0 {
        let _ = crate::children::wait4(pid, 0);
    }
}

/// The write end of the pipe the handler reports a signal on; -1 before
/// [`install`].
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Write the signal's number to the pipe; the `signals` thread does the
/// rest. Only `write(2)`, which is async-signal-safe; errno is kept.
extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: errno is thread-local; the handler leaves it as it was.
        // write is async-signal-safe; `byte` is a valid one-byte buffer.
        unsafe {
            let saved = *libc::__errno_location();
            libc::write(fd, (&raw const byte).cast(), 1);
            *libc::__errno_location() = saved;
        }
    }
}

/// Take over SIGINT, SIGTERM and SIGHUP for `program` (the name its line
/// starts with), and start the guard that cleans up after a runner killed
/// outright. Call it first in `main`, before any thread, and [`finish`]
/// last. A handler (with `SA_RESTART`, so
/// the main thread's system calls go on undisturbed) writes the signal to
/// a pipe that a thread of its own waits on. Nothing is blocked, so the
/// programs the runner starts inherit no blocked signal, and `execve`
/// resets the handler to the default action in them.
///
/// `also` is called at the moment of the interrupt, after the programs are
/// stopped, to remove what else the program was writing (the runner's
/// half-written run folder, say); it returns what it removed.
pub fn install(program: &'static str, also: fn() -> Vec<PathBuf>) -> io::Result<()> {
    if let Err(e) = start_guard(program) {
        // Under a process limit that is already reached, say: the programs'
        // death signal still stands, but what they start may not die.
        eprintln!(
            "{program}: note: no guard process ({}): a kill -9 of {program} may \
             leave what its programs started running",
            crate::error::describe_io(&e)
        );
    }
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    SIGNAL_PIPE.store(write_end.into_raw_fd(), Ordering::Relaxed);
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut byte = 0u8;
        loop {
            match nix::unistd::read(&read_end, std::slice::from_mut(&mut byte)) {
                Ok(1) => interrupted(program, i32::from(byte), also),
                Err(nix::errno::Errno::EINTR) => {}
                _ => return, // cannot happen: the write end is never closed
            }
        }
    })?;
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
        let r = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Stop everything, say so in one line, exit 128 + `sig`. Holds the lock
/// to the end, so the main thread cannot start or report anything else.
fn interrupted(program: &str, sig: libc::c_int, also: fn() -> Vec<PathBuf>) -> ! {
    let reg = registry();
    for &pgid in reg.groups.keys() {
        // SAFETY: killpg only sends a signal. Each registered leader is our
        // unreaped child (leaders are reaped and unregistered together,
        // under this lock: Tracked::reap), so the group id is ours.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    for &pgid in reg.groups.keys() {
        reap_group(pgid);
    }
    let mut removed = Vec::new();
    for dir in &reg.dirs {
        if std::fs::remove_dir_all(dir).is_ok() {
            removed.push(dir.display().to_string());
        }
    }
    removed.extend(also().iter().map(|d| d.display().to_string()));
    eprintln!("{}", interrupt_line(program, sig, reg.groups.len(), &removed));
    // Every group is reaped and every directory removed: what the guard
    // still holds needs nothing more.
    for &pgid in reg.groups.keys() {
        tell_guard(b'g', pgid.to_string().as_bytes(), false);
    }
    for dir in &reg.dirs {
        keep_if_killed(dir);
    }
    finish();
    std::process::exit(128 + sig)
}

fn interrupt_line(
    program: &str,
    sig: i32,
    stopped: usize,
    removed: &[String],
) -> String {
    let name = crate::children::signal_name(sig);
    let programs = if stopped == 1 { "program" } else { "programs" };
    let removed = if removed.is_empty() {
        "no temporary directory to remove".to_string()
    } else {
        format!("removed {}", removed.join(", "))
    };
    format!(
        "{program}: interrupted by {name}; stopped {stopped} {programs}, {removed}"
    )
}

/// Call at the end of `main`, before reporting: if an interrupt is being
/// handled, wait here for it to end the process, so that a half-finished
/// run is not reported as a success or a failure.
pub fn settle() {
    drop(registry());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_lock_is_free_even_while_another_thread_forks() {
        use std::os::unix::process::CommandExt;
        let dir =
            std::env::temp_dir().join(format!("labkit-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let forks = std::sync::Arc::new(AtomicI32::new(0));
        let forker = {
            let (stop, forks) = (stop.clone(), forks.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // A pre_exec makes std fork: the child shares every open
                    // descriptor, the lock's among them, until it execs.
                    let mut cmd = std::process::Command::new("true");
                    // SAFETY: the closure does nothing.
                    unsafe { cmd.pre_exec(|| Ok(())) };
                    cmd.status().unwrap();
                    forks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let (mut busy, mut tries) = (0, 0);
        // Until the other thread has forked often enough to have overlapped.
        while tries < 300 || forks.load(Ordering::Relaxed) < 100 {
            tries += 1;
            let lock = try_lock_dir(&dir).unwrap();
            drop(lock);
            if try_lock_dir(&dir).unwrap().is_none() {
                busy += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        forker.join().unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert_eq!(busy, 0, "a dropped lock was still held {busy} times of {tries}");
    }

    #[test]
    fn the_line_names_signal_programs_and_dirs() {
        assert_eq!(
            interrupt_line("lab", libc::SIGINT, 1, &["/tmp/a".into()]),
            "lab: interrupted by SIGINT; stopped 1 program, removed /tmp/a"
        );
        assert_eq!(
            interrupt_line("lab", libc::SIGTERM, 0, &[]),
            "lab: interrupted by SIGTERM; stopped 0 programs, \
             no temporary directory to remove"
        );
    }

    #[test]
    fn dropping_a_running_program_kills_and_reaps_its_tree() {
        // sh starts a background sleep (a grandchild) and waits.
        let mut t =
            spawn(Command::new("sh").args(["-c", "sleep 30 & wait"])).unwrap();
        let pgid = t.pid();
        assert!(t.try_wait().unwrap().is_none());
        assert!(registry().groups.contains_key(&pgid));
        // Wait for the grandchild to exist (an observable state, not a
        // sleep), then drop the running program.
        let start = std::time::Instant::now();
        let grandchild = loop {
            if let Some(c) = crate::children::of(pgid).unwrap().first() {
                break c.pid;
            }
            assert!(start.elapsed().as_secs() < 10, "sh never started sleep");
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        drop(t);
        assert!(!registry().groups.contains_key(&pgid));
        // SAFETY: signal 0 only checks for existence.
        let alive = unsafe { libc::kill(pgid, 0) } == 0;
        assert!(!alive, "the leader is gone (reaped)");
        // The grandchild was killed with its group: it ends (gone, or a
        // zombie for init: this test process is no subreaper) at once.
        let state = || {
            let s =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).ok()?;
            s[s.rfind(')')? + 1..].split_whitespace().next().map(str::to_string)
        };
        let start = std::time::Instant::now();
        while !matches!(state().as_deref(), None | Some("Z") | Some("X")) {
            assert!(start.elapsed().as_secs() < 10, "sleep {grandchild} runs on");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    #[test]
    fn output_and_tempdirs_clean_up() {
        let out =
            output(Command::new("sh").args(["-c", "echo hi; echo no >&2"])).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hi\n");
        assert_eq!(out.stderr, b"no\n");
        let dir = tempdir("labkit-test-").unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        assert!(registry().dirs.contains(&path));
        drop(dir);
        assert!(!path.exists());
        assert!(!registry().dirs.contains(&path));
    }

    #[test]
    fn a_tempfile_has_no_name_and_reads_back() {
        use std::io::{Read, Seek, Write};
        let mut file = tempfile().unwrap();
        file.write_all(b"report").unwrap();
        file.rewind().unwrap();
        let mut back = String::new();
        file.read_to_string(&mut back).unwrap();
        assert_eq!(back, "report");
        // No name: its link count is 0.
        use std::os::unix::fs::MetadataExt;
        assert_eq!(file.metadata().unwrap().nlink(), 0);
    }

    #[test]
    fn a_dead_makers_tempdir_is_removed_and_a_live_ones_kept() {
        // A live one: this process holds its lock.
        let live = tempdir("lab-sweep-test-").unwrap();
        assert!(live.path().join(LOCK_MARK).is_file());
        // A dead maker's: marked, and nobody holds its lock.
        let dead = std::env::temp_dir()
            .join(format!("lab-sweep-dead-{}", std::process::id()));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK_MARK), "").unwrap();
        // An unmarked one is never judged.
        let plain = std::env::temp_dir()
            .join(format!("lab-sweep-plain-{}", std::process::id()));
        std::fs::create_dir(&plain).unwrap();
        let removed = remove_dead_tempdirs();
        assert!(removed.contains(&dead), "{removed:?}");
        assert!(
            !removed.contains(&live.path().to_path_buf()) && live.path().is_dir()
        );
        assert!(plain.is_dir());
        std::fs::remove_dir(&plain).unwrap();
    }
}
