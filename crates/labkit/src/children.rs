//! Children: reaping one (the lab's one `wait4` loop), and a process's
//! children as `/proc` shows them, to prove that a program left no zombie
//! behind (and to count the ones it let pile up).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// `wait4(pid, options)`: how the child ended and the kernel's accounting
/// of its whole life (its reaped descendants included); `None` when
/// `WNOHANG` found it still running. An `EINTR` first passes a relayed
/// signal on to the children ([`crate::relay::pass_on`], nothing when no
/// signal came) and then waits again, so a program interrupted while it
/// reaps still reaps every child.
pub fn wait4(
    pid: i32,
    options: libc::c_int,
) -> std::io::Result<Option<(ExitStatus, libc::rusage)>> {
    Ok(wait4_any(pid, options)?.map(|(_, status, ru)| (status, ru)))
}

/// The next child of ours that has ended, reaped, without blocking: its
/// pid; `None` when none has ended (or none is left). One `wait4` per
/// ended child, as Stevens' `sig_chld` loop does.
pub fn reap_ended() -> Option<i32> {
    match wait4_any(-1, libc::WNOHANG) {
        Ok(Some((pid, _, _))) => Some(pid),
        _ => None,
    }
}

/// Block until the child `pid` has ended, without reaping it (`waitid`
/// with `WNOWAIT`): it stays a zombie, so its pid cannot be reused until
/// the caller reaps it. An `EINTR` is handled as [`wait4`] handles it.
pub fn wait_ended(pid: i32) -> std::io::Result<()> {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let id = nix::unistd::Pid::from_raw(pid);
    loop {
        match waitid(Id::Pid(id), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => crate::relay::pass_on(),
            Err(e) => return Err(std::io::Error::from_raw_os_error(e as i32)),
        }
    }
}

/// In a new child, before anything else: ask the kernel to `SIGKILL` it
/// when its parent dies (`PR_SET_PDEATHSIG`), so that no child outlives a
/// parent killed outright (`kill -9`, a crash) that could not stop it.
/// Returns false when `parent` (the pid the parent had before the fork) is
/// already gone: it died between the fork and the `prctl`, and the death
/// signal will never come, so the caller must leave at once.
///
/// Two async-signal-safe system calls, so it may run after `fork` and in
/// `pre_exec`. The signal is tied to the parent's *thread* that forked:
/// the lab forks and spawns from threads that live as long as the child
/// should. It is cleared by a change of user (`setuid`) and by executing a
/// set-user-ID binary, so call it after any change of credentials.
pub fn die_with_parent(parent: i32) -> bool {
    // SAFETY: prctl with integer arguments and getppid are async-signal-
    // safe system calls that touch no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        libc::getppid() == parent
    }
}

/// How a child ended, in the one spelling every message uses: "exited
/// with status 3", "was killed by SIGKILL" (or "by signal 70", a number
/// with no name).
pub fn ended(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by {}", signal_name(sig)),
        _ => format!("ended with {status}"),
    }
}

/// "SIGKILL" for 9; "signal 70" for a number with no name.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.to_string())
}

/// [`wait4`], with the pid the kernel reports (`pid` may be -1: any child).
fn wait4_any(
    pid: i32,
    options: libc::c_int,
) -> std::io::Result<Option<(i32, ExitStatus, libc::rusage)>> {
    let mut status = 0;
    // SAFETY: rusage is plain old data, for wait4 to fill in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to our locals.
        let r = unsafe { libc::wait4(pid, &mut status, options, &mut ru) };
        if r > 0 {
            return Ok(Some((r, ExitStatus::from_raw(status), ru)));
        }
        if r == 0 {
            return Ok(None);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
        crate::relay::pass_on();
    }
}

/// One child: its pid and its state letter from `/proc/<pid>/stat`
/// (`R` running, `S` sleeping, `Z` zombie, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Child {
    pub pid: i32,
    pub state: char,
}

/// Every process whose parent is `parent`, found by scanning `/proc`.
/// Processes that end during the scan are skipped.
pub fn of(parent: i32) -> std::io::Result<Vec<Child>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, ppid)) = parse_stat(&stat)
            && ppid == parent
        {
            found.push(Child { pid, state });
        }
    }
    Ok(found)
}

/// The state and parent pid of a `/proc/<pid>/stat` line. The command
/// name in parentheses may itself hold spaces and parentheses, so the
/// fields are read after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// This process's children, and how many of them are zombies.
pub fn of_self() -> std::io::Result<(usize, usize)> {
    let kids = of(std::process::id() as i32)?;
    let zombies = kids.iter().filter(|c| c.state == 'Z').count();
    Ok((kids.len(), zombies))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_are_spelt_one_way() {
        assert_eq!(ended(ExitStatus::from_raw(3 << 8)), "exited with status 3");
        assert_eq!(
            ended(ExitStatus::from_raw(libc::SIGKILL)),
            "was killed by SIGKILL"
        );
        assert_eq!(ended(ExitStatus::from_raw(70)), "was killed by signal 70");
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(parse_stat("42 (a) b) Z 7 42 42 0"), Some(('Z', 7)));
        assert_eq!(parse_stat("1 (init) S 0 1 1"), Some(('S', 0)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_child_that_asks_dies_with_a_parent_killed_outright() {
        // P (forked here) forks G, which asks for the death signal and
        // execs `sleep 30`; P reports G's pid and waits. P is then killed
        // with SIGKILL: G must end at once, not sleep on under init.
        let sleep = std::ffi::CString::new("/bin/sleep").unwrap();
        let thirty = std::ffi::CString::new("30").unwrap();
        let argv = [sleep.as_ptr(), thirty.as_ptr(), std::ptr::null()];
        let (rx, tx) = nix::unistd::pipe().unwrap();
        let tx = std::os::fd::IntoRawFd::into_raw_fd(tx);
        // SAFETY: between fork and exit, P and G make only async-signal-
        // safe system calls (fork, getpid, prctl, getppid, execv, write,
        // pause, _exit) on buffers made before the fork.
        let p = unsafe { libc::fork() };
        if p == 0 {
            // SAFETY: as above; the loop never returns to the test harness.
            unsafe {
                let me = libc::getpid();
                let g = libc::fork();
                if g == 0 {
                    if die_with_parent(me) {
                        libc::execv(sleep.as_ptr(), argv.as_ptr());
                    }
                    libc::_exit(1);
                }
                libc::write(tx, (&raw const g).cast(), 4);
                loop {
                    libc::pause();
                }
            }
        }
        // SAFETY: our own copy of the write end.
        unsafe { libc::close(tx) };
        let mut pid = [0u8; 4];
        nix::unistd::read(&rx, &mut pid).unwrap();
        let g = i32::from_ne_bytes(pid);
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{g}/stat")).ok()?;
            parse_stat(&stat).map(|(state, _)| state)
        };
        // G is there (sleep, or still before its exec) while P lives.
        assert!(matches!(state(), Some('R' | 'S' | 'D')), "{:?}", state());
        // SAFETY: a signal to our own child P.
        unsafe { libc::kill(p, libc::SIGKILL) };
        assert!(wait4(p, 0).unwrap().is_some());
        let start = std::time::Instant::now();
        while !matches!(state(), None | Some('Z' | 'X')) {
            assert!(start.elapsed().as_secs() < 10, "G {g} outlived P");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // A parent other than the one named: the child must leave.
        assert!(!die_with_parent(std::process::id() as i32));
        // SAFETY: prctl with integer arguments: undo the request above.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) };
    }

    #[test]
    fn finds_a_zombie_child_then_none() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Ended but not reaped: a zombie.
        wait_ended(pid).unwrap();
        let kids = of(std::process::id() as i32).unwrap();
        assert!(kids.contains(&Child { pid, state: 'Z' }), "{kids:?}");
        assert_eq!(ended(child.wait().unwrap()), "exited with status 0");
        let kids = of(std::process::id() as i32).unwrap();
        assert!(kids.iter().all(|c| c.pid != pid));
    }
}
