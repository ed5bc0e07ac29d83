//! Nothing left behind when a program of the lab ends, however it ends: a
//! registry of the process trees and temporary directories this process
//! made, which an interrupt stops and removes, and which someone watching
//! from outside (a [`Watcher`]) removes should the process be killed
//! outright.
//!
//! - Every program the runner starts goes through [`spawn`] (or
//!   [`output`]): it runs in a process group of its own, so one
//!   `killpg(SIGKILL)` stops it and every process it forked, and the
//!   returned [`Tracked`] reaps that group on every path, error paths
//!   included (dropping it kills and reaps). It asks for
//!   `PR_SET_PDEATHSIG` ([`crate::children::die_with_parent`]): the kernel
//!   kills it with its parent.
//! - Every temporary directory is a [`TempDir`], removed when dropped,
//!   locked while it lives and marked so ([`LOCK_MARK`]), so that a sweep of
//!   dead processes' directories never touches a live one's.
//! - [`stop_all`] stops every registered group and removes every
//!   registered directory, holding the registry until the process exits:
//!   what an interrupt handler calls.
//! - A [`Watcher`], set once with [`watch_with`], is told of every group
//!   and directory as it is registered and unregistered, and of whatever
//!   else is to be removed if the process dies ([`remove_if_killed`]).
//!
//! Who handles the signals and who watches is not this crate's business:
//! the runner's `supervisor` crate installs both (the signal thread, and
//! the guard process `lab-guard` that cleans up after a runner killed with
//! `kill -9`). A program of the lab has neither, and needs neither: its
//! own children die with it (`PR_SET_PDEATHSIG`), and [`crate::relay`]
//! passes an interrupt on to them.
//!
//! The registry lock is held while a program is spawned and by
//! [`stop_all`], so a program is either registered (and killed) or never
//! started, and a thread that takes the lock to register or unregister
//! stops there until the process exits.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

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
    watch(Watched::Group(child.id() as i32), true);
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
                watch(Watched::Group(self.pid()), false);
                Ok(Some(done))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                // Not our child any more (or never waitable): stop tracking
                // it so drop does not signal a group that may be reused.
                if e.raw_os_error() == Some(libc::ECHILD) {
                    self.reaped = true;
                    reg.groups.remove(&self.pid());
                    watch(Watched::Group(self.pid()), false);
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

/// A temporary directory that is removed when dropped, or by [`stop_all`]
/// if the process is interrupted first, or by the [`Watcher`] if it is
/// killed outright, or, if that died too, by the next sweep of dead
/// processes' directories (the runner's): its maker holds an `flock` on it
/// for as long as the directory lives (the kernel drops it with the
/// process), and marks it [`LOCK_MARK`] once locked.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    _lock: Option<DirLock>,
}

/// The file in a locked temporary directory that says its maker holds a
/// lock on it: a directory without it is never judged.
pub const LOCK_MARK: &str = ".lab-lock";

/// The start of the names a sweep of dead processes' directories judges
/// (the runner's, `supervisor::remove_dead_tempdirs`): the lab's own
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
    watch(Watched::Dir(&path), true);
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
        watch(Watched::Dir(&self.path), false);
    }
}

/// Call at the end of `main`, before reporting: if an interrupt is being
/// handled ([`stop_all`]), wait here for it to end the process, so that a
/// half-finished run is not reported as a success or a failure.
pub fn settle() {
    drop(registry());
}

/// What [`stop_all`] stopped and removed. It holds the registry: no
/// program can be started, reaped or reported until the process exits,
/// which its holder does next.
pub struct Stopped {
    _registry: MutexGuard<'static, Registry>,
    /// How many program groups were stopped.
    pub groups: usize,
    /// The temporary directories removed.
    pub removed: Vec<PathBuf>,
}

/// Stop every registered program group (`SIGKILL` to the group, then reap
/// it) and remove every registered temporary directory, for an interrupt;
/// the [`Watcher`] is told that none of them needs it any more. The
/// registry stays held in the returned [`Stopped`], so the main thread,
/// which takes it to register or unregister, stops there: keep it until
/// the process exits.
pub fn stop_all() -> Stopped {
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
            removed.push(dir.clone());
        }
    }
    // Every group is reaped and every directory removed: what the watcher
    // still holds needs nothing more.
    for &pgid in reg.groups.keys() {
        watch(Watched::Group(pgid), false);
    }
    for dir in &reg.dirs {
        watch(Watched::Dir(dir), false);
    }
    Stopped { groups: reg.groups.len(), removed, _registry: reg }
}

/// What a [`Watcher`] is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched<'a> {
    /// A process group (its leader's pid) that [`spawn`] started.
    Group(i32),
    /// A directory: a [`TempDir`], or one named to [`remove_if_killed`].
    Dir(&'a Path),
}

/// Someone who cleans up after this process from outside should it die
/// without cleaning up itself (`kill -9`): the runner's guard process, which
/// the `supervisor` crate starts. It is told of every group and directory
/// as it is registered and unregistered, under the registry's lock, so in
/// order; a call must not block or take that lock.
pub trait Watcher: Sync {
    /// `what` is to be stopped or removed if the process dies (`on`), or
    /// no longer.
    fn watch(&self, what: Watched<'_>, on: bool);

    /// The process is about to exit on purpose ([`exiting`]): there is
    /// nothing left to watch.
    fn exiting(&self);
}

static WATCHER: OnceLock<&'static dyn Watcher> = OnceLock::new();

/// Make `watcher` this process's [`Watcher`], before anything is spawned
/// or made. Only one is ever set: false if there was one already.
pub fn watch_with(watcher: &'static dyn Watcher) -> bool {
    WATCHER.set(watcher).is_ok()
}

fn watch(what: Watched<'_>, on: bool) {
    if let Some(watcher) = WATCHER.get() {
        watcher.watch(what, on);
    }
}

/// Have the [`Watcher`], if there is one, remove the directory `path`
/// should the process be killed before it calls [`keep_if_killed`] (the
/// runner's half-written results, say). Without one, nothing happens.
pub fn remove_if_killed(path: &Path) {
    watch(Watched::Dir(path), true);
}

/// The [`Watcher`] no longer removes `path`: it was moved into place, or
/// removed.
pub fn keep_if_killed(path: &Path) {
    watch(Watched::Dir(path), false);
}

/// Call before the process exits on purpose where `main` does not return
/// (a usage error, `--help`, [`crate::cli::PARSE_ONLY`]): the [`Watcher`],
/// if there is one, is told, so that the runner's guard is reaped and
/// nothing outlives it.
pub fn exiting() {
    if let Some(watcher) = WATCHER.get() {
        watcher.exiting();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

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
}
