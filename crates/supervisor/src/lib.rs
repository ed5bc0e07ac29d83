//! The runner's supervisor: what `lab` does so that nothing it started
//! outlives it, however it ends. The programs of the lab need none of this
//! (their children die with them, `labkit::relay` passes an interrupt on);
//! the registry of what to stop and remove is labkit's
//! ([`labkit::cleanup`]), which the runner and the programs share.
//!
//! - [`install`], first thing in `main`, catches SIGINT, SIGTERM and SIGHUP
//!   with a handler that hands them to a thread of their own (through a
//!   pipe). On a signal that thread stops and reaps every registered
//!   program group, removes every registered directory
//!   ([`labkit::cleanup::stop_all`]) and what else the runner was writing,
//!   prints one line and exits with 128 + the signal number:
//!
//!   `lab: interrupted by SIGINT; stopped 1 program, removed /tmp/lab-x`
//!
//!   Whether the signal comes from the terminal (Ctrl-C goes to the
//!   foreground process group: `lab` itself, since its programs run in
//!   groups of their own) or to the `lab` pid alone, the result is the
//!   same. The runner is also a child subreaper (`PR_SET_CHILD_SUBREAPER`):
//!   a grandchild whose parent died is handed to the runner, not to init,
//!   so the runner can wait for the whole tree before it exits.
//! - A runner killed outright (`kill -9`) can do none of this, so two
//!   things stand behind it. Every program it starts asks for
//!   `PR_SET_PDEATHSIG` ([`labkit::cleanup::spawn`]): the kernel kills it
//!   with the runner. And [`install`] forks a *guard*, a small process of
//!   its own (its own process group, named `lab-guard`), which it makes
//!   labkit's [`Watcher`]: it is told, over a pipe, of every process group
//!   the runner starts, every temporary directory it makes and every
//!   folder it names to [`labkit::cleanup::remove_if_killed`]. When the
//!   pipe reaches end-of-file, the runner has exited; if anything is still
//!   registered then, the runner died without cleaning up, and the guard
//!   kills those groups (a program's own children too, which the death
//!   signal does not reach, such as `perf bench`'s worker) and removes
//!   those directories, in one line. A runner that ends normally closes
//!   the pipe with nothing registered and reaps the guard ([`finish`]).
//! - If the guard was killed too, the next run sweeps what the dead one
//!   left: [`remove_dead_tempdirs`] (the runner's `runs::sweep` adds its
//!   run folders).

use std::io;
use std::os::fd::IntoRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

use labkit::cleanup::{LOCK_MARK, SWEPT_PREFIX, Watched, Watcher, try_lock_dir};

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

/// The guard as labkit's [`Watcher`]: each group and directory the
/// runner registers, and each it names to `remove_if_killed`, becomes a
/// record on the pipe.
struct Guard;

impl Watcher for Guard {
    fn watch(&self, what: Watched<'_>, on: bool) {
        use std::os::unix::ffi::OsStrExt;
        match what {
            Watched::Group(pgid) => {
                tell_guard(b'g', pgid.to_string().as_bytes(), on)
            }
            Watched::Dir(dir) => tell_guard(b'd', dir.as_os_str().as_bytes(), on),
        }
    }

    fn exiting(&self) {
        finish();
    }
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
            labkit::cleanup::watch_with(&Guard);
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
        let _ = labkit::children::wait4(pid, 0);
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
            labkit::error::describe_io(&e)
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

/// Stop everything ([`labkit::cleanup::stop_all`]) and what else the
/// runner was writing (`also`), say so in one line, exit 128 + `sig`.
/// Holds the registry to the end, so the main thread cannot start or
/// report anything else.
fn interrupted(program: &str, sig: libc::c_int, also: fn() -> Vec<PathBuf>) -> ! {
    let stopped = labkit::cleanup::stop_all();
    let mut removed: Vec<String> =
        stopped.removed.iter().map(|d| d.display().to_string()).collect();
    removed.extend(also().iter().map(|d| d.display().to_string()));
    eprintln!("{}", interrupt_line(program, sig, stopped.groups, &removed));
    finish();
    std::process::exit(128 + sig)
}

fn interrupt_line(
    program: &str,
    sig: i32,
    stopped: usize,
    removed: &[String],
) -> String {
    let name = labkit::children::signal_name(sig);
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

/// Remove the temporary directories (`<tmp>/lab*`, [`SWEPT_PREFIX`])
/// whose makers died without removing them (a runner and its guard both
/// killed), and return them. A directory is judged only if it carries
/// [`LOCK_MARK`], which its maker ([`labkit::cleanup::tempdir`]) writes
/// after taking its lock, and is removed only if the lock is free: a live
/// process's directory is never touched.
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_dead_makers_tempdir_is_removed_and_a_live_ones_kept() {
        // A live one: this process holds its lock.
        let live = labkit::cleanup::tempdir("lab-sweep-test-").unwrap();
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
