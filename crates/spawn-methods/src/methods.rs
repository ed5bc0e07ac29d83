//! The methods, one loop each: create and destroy one unit of concurrent
//! work `n` times. Each returns an error on the first failure (a failed
//! create, a child that did not exit 0, a lost job).

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::mpsc;
use std::time::Instant;

use labkit::error::{describe_errno, describe_io};
use labkit::{Error, Result};
use nix::errno::Errno;
use nix::unistd::{ForkResult, Pid, fork};

/// What the exec methods start, prepared once: path, argv, empty envp.
pub struct Exec {
    pub path: CString,
    argv: [*mut c_char; 2],
    envp: [*mut c_char; 1],
}

impl Exec {
    pub fn new(path: &std::path::Path) -> Result<Exec> {
        use std::os::unix::ffi::OsStrExt;
        let path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::usage("--exec: the path holds a NUL byte"))?;
        let argv = [path.as_ptr().cast_mut(), std::ptr::null_mut()];
        Ok(Exec { path, argv, envp: [std::ptr::null_mut()] })
    }
}

/// Reap `pid` and insist that it exited with 0.
fn wait_ok(pid: Pid, what: &str) -> Result<()> {
    let status = match labkit::children::wait4(pid.as_raw(), 0) {
        Ok(Some((status, _))) => status,
        Ok(None) => unreachable!("wait4 without WNOHANG returned no child"),
        Err(e) => return Err(Error::failed(format!("wait4: {}", describe_io(&e)))),
    };
    match status.code() {
        Some(0) => Ok(()),
        Some(127) => Err(Error::failed(format!(
            "{what}: the child exited with status 127 (execve failed, or the \
             program itself said 127)"
        ))),
        _ => Err(Error::failed(format!(
            "{what}: the child {}",
            labkit::children::ended(status)
        ))),
    }
}

/// SIGINT, SIGTERM or SIGHUP came ([`labkit::relay`]): stop the loop. Its
/// children are all reaped by then: each is waited for before the next.
fn stop_if_interrupted() -> Result<()> {
    match labkit::relay::pending() {
        Some(sig) => Err(labkit::relay::interrupted(sig, "every child was reaped")),
        None => Ok(()),
    }
}

fn create_failed(what: &str, errno: Errno) -> Error {
    Error::failed(format!("{what}: {}", describe_errno(errno)))
}

// ANCHOR: fork_wait
pub fn fork_wait(n: u64) -> Result<()> {
    for _ in 0..n {
        stop_if_interrupted()?;
        // SAFETY: the child calls only _exit, which is async-signal-safe.
        match unsafe { fork() } {
            // SAFETY: in the child; _exit ends it at once.
            Ok(ForkResult::Child) => unsafe { libc::_exit(0) },
            Ok(ForkResult::Parent { child }) => wait_ok(child, "fork")?,
            Err(errno) => return Err(create_failed("fork", errno)),
        }
    }
    Ok(())
}
// ANCHOR_END: fork_wait

extern "C" fn vfork_child(_: *mut c_void) -> c_int {
    // SAFETY: _exit ends the child at once, touching nothing it shares.
    unsafe { libc::_exit(0) }
}

// ANCHOR: vfork
/// vfork without its pitfalls: clone with CLONE_VM | CLONE_VFORK, as
/// glibc's posix_spawn does, so the child shares the parent's memory (no
/// page tables copied) and the parent sleeps until it exits; the child runs
/// on a stack of its own. Signals are blocked for the whole loop, as
/// posix_spawn blocks them across its clone, so that no handler runs in a
/// child on the memory it shares with the parent; a signal that comes
/// meanwhile takes effect when the loop ends (the program stops between
/// loops). Blocked once, not per clone: the mask is not part of the timed
/// work.
pub fn vfork_exit(n: u64) -> Result<()> {
    use nix::sys::signal::{SigSet, SigmaskHow::SIG_SETMASK, pthread_sigmask};
    let failed = |e| create_failed("pthread_sigmask", e);
    let mut saved = SigSet::empty();
    pthread_sigmask(SIG_SETMASK, Some(&SigSet::all()), Some(&mut saved))
        .map_err(failed)?;
    let result = vfork_loop(n);
    pthread_sigmask(SIG_SETMASK, Some(&saved), None).map_err(failed)?;
    result
}

fn vfork_loop(n: u64) -> Result<()> {
    let mut stack = vec![0u128; 4096]; // 64 KiB, 16-byte aligned
    let top = stack.as_mut_ptr_range().end.cast::<c_void>();
    for _ in 0..n {
        stop_if_interrupted()?;
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
        // SAFETY: the child runs `vfork_child` on `stack`, which outlives
        // it (CLONE_VFORK: clone returns once the child has exited), and
        // only calls _exit; every signal is blocked (vfork_exit), so no
        // handler runs in the child on the memory it shares with us.
        let pid =
            unsafe { libc::clone(vfork_child, top, flags, std::ptr::null_mut()) };
        if pid == -1 {
            return Err(create_failed("clone(CLONE_VM|CLONE_VFORK)", Errno::last()));
        }
        wait_ok(Pid::from_raw(pid), "vfork child")?;
    }
    Ok(())
}
// ANCHOR_END: vfork

pub fn fork_exec(n: u64, exec: &Exec) -> Result<()> {
    for _ in 0..n {
        stop_if_interrupted()?;
        // SAFETY: the child calls only execve and _exit, both
        // async-signal-safe; argv and envp were built before the fork.
        match unsafe { fork() } {
            // SAFETY: in the child: execve with pointers built before the
            // fork, and _exit if it returns.
            Ok(ForkResult::Child) => unsafe {
                libc::execve(
                    exec.path.as_ptr(),
                    exec.argv.as_ptr().cast(),
                    exec.envp.as_ptr().cast(),
                );
                libc::_exit(127)
            },
            Ok(ForkResult::Parent { child }) => wait_ok(child, "fork+exec")?,
            Err(errno) => return Err(create_failed("fork", errno)),
        }
    }
    Ok(())
}

pub fn posix_spawn(n: u64, exec: &Exec) -> Result<()> {
    for _ in 0..n {
        stop_if_interrupted()?;
        let mut pid = 0;
        // SAFETY: valid NUL-terminated path, NULL-terminated argv and envp
        // that outlive the call; no file actions or attributes.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                exec.path.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                exec.argv.as_ptr(),
                exec.envp.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(create_failed("posix_spawn", Errno::from_raw(rc)));
        }
        wait_ok(Pid::from_raw(pid), "posix_spawn")?;
    }
    Ok(())
}

pub fn command(n: u64, exec: &Exec) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(exec.path.as_bytes());
    for _ in 0..n {
        stop_if_interrupted()?;
        let status = std::process::Command::new(path)
            .env_clear()
            .status()
            .map_err(|e| Error::io("std::process::Command", e))?;
        if !status.success() {
            return Err(Error::failed(format!(
                "Command: child {}",
                labkit::children::ended(status)
            )));
        }
    }
    Ok(())
}

/// The empty thread body of pthreadcreat.c.
fn empty(_: &()) -> i32 {
    0
}

/// The C way, for comparison with std::thread: no attributes, so glibc's
/// default stack (the soft RLIMIT_STACK) from its stack cache.
pub fn pthread_join(n: u64) -> Result<()> {
    use labkit::pthread::{self, Attr, Start};
    let attr = Attr::default_stack();
    let start = Start { run: empty, data: &() };
    for _ in 0..n {
        stop_if_interrupted()?;
        // SAFETY: `start` borrows a static unit and outlives the thread,
        // which is joined before the next iteration.
        let id = unsafe { pthread::spawn(&attr, &start) }
            .map_err(|e| create_failed("pthread_create", e))?;
        pthread::join(id).map_err(|e| create_failed("pthread_join", e))?;
    }
    Ok(())
}

pub fn thread_join(n: u64, stack: Option<u64>) -> Result<()> {
    for _ in 0..n {
        stop_if_interrupted()?;
        let mut builder = std::thread::Builder::new();
        if let Some(s) = stack {
            builder = builder.stack_size(s as usize);
        }
        let thread =
            builder.spawn(|| {}).map_err(|e| Error::io("thread spawn", e))?;
        thread.join().map_err(|_| Error::failed("an empty thread panicked"))?;
    }
    Ok(())
}

// ANCHOR: pool
/// The pool the articles argue about, at its smallest: one thread made
/// once, waiting on a channel; each "creation" hands it a job and waits
/// for the answer. Timed without the pool's own start and end: returns the
/// microseconds per hand-off.
pub fn pool(n: u64, worker_cpu: Option<usize>) -> Result<f64> {
    let (jobs, inbox) = mpsc::channel::<u64>();
    let (replies, answers) = mpsc::channel::<u64>();
    let worker = std::thread::Builder::new()
        .spawn(move || {
            if let Some(cpu) = worker_cpu {
                // 0: the calling thread, the worker alone.
                let _ = labkit::affinity::pin_task(0, cpu);
            }
            for job in inbox {
                if replies.send(job).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::io("thread spawn", e))?;
    // One job before the clock starts, so the worker is up and waiting.
    let mut lost = jobs.send(n).is_err() || answers.recv() != Ok(n);
    let start = Instant::now();
    for job in 0..n {
        if labkit::relay::pending().is_some() {
            break;
        }
        if lost || jobs.send(job).is_err() || answers.recv() != Ok(job) {
            lost = true;
            break;
        }
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    drop(jobs);
    let joined = worker.join().is_ok();
    stop_if_interrupted()?;
    if lost || !joined {
        return Err(Error::failed("the pool thread lost a job"));
    }
    Ok(us)
}
// ANCHOR_END: pool

#[cfg(feature = "run")]
// ANCHOR: tokio
/// Microseconds per task spawned and awaited on a current-thread runtime.
pub fn tokio_tasks(n: u64) -> Result<f64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    rt.block_on(async {
        let start = Instant::now();
        for i in 0..n {
            stop_if_interrupted()?;
            match tokio::spawn(async move { i }).await {
                Ok(j) if j == i => {}
                _ => return Err(Error::failed("a tokio task lost its result")),
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
    })
}
// ANCHOR_END: tokio
