//! serv02 and serv02l: prefork. The parent forks `--pool` children up front;
//! each child loops accepting and serving on the listener they share. The
//! parent only waits for a stop signal, then ends and reaps the children
//! so that their CPU time is counted (`getrusage(RUSAGE_CHILDREN)` only
//! counts reaped children, which is why Stevens' `sig_int` kills and waits
//! for them first).
//!
//! - `prefork` (serv02): every child blocks in `accept`. In Stevens' day a
//!   new connection woke every child (the thundering herd); Linux has woken
//!   only one blocked acceptor since 2.4 (an exclusive wait: the one that
//!   has waited longest), so no lock is needed.
//! - `prefork-select` (serv02l): every child blocks in `select` on the
//!   listener and then accepts. `select` is not exclusive: every child
//!   wakes, one wins, the others find nothing. The listener is made
//!   non-blocking here so that the losers get EAGAIN and go back to
//!   `select` (Stevens' children blocked in `accept` instead); each return
//!   from `select` counts as a wake-up, so the herd shows in the meter.

use std::net::TcpListener;
use std::os::fd::AsRawFd;

use labkit::error::{Error, Result, describe_errno};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{ForkResult, Pid, fork};

use crate::protocol::{self, Served};
use crate::{Config, Design, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let select = cfg.design == Design::PreforkSelect;
    if select {
        // An fd_set holds descriptors below FD_SETSIZE only.
        let fd = listener.as_raw_fd();
        if fd >= libc::FD_SETSIZE as i32 {
            return Err(Error::failed(format!(
                "prefork-select: the listener is descriptor {fd}, and select(2) \
                 takes only descriptors below {}; start the server with fewer \
                 descriptors open",
                libc::FD_SETSIZE
            )));
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("O_NONBLOCK on the listener", e))?;
    }
    let mut kids = Children::default();
    for i in 0..cfg.pool {
        // SAFETY: `child` is async-signal-safe and allocates nothing: it
        // keeps to select (prefork-select; the listener is below
        // FD_SETSIZE, checked above), accept4, and `serve` (setsockopt,
        // recv, send, close, atomics in the shared meters, `say`'s one
        // write from a stack buffer, fixed error strings), and after a
        // failed accept `accept_failed` (`say`, nanosleep).
        unsafe { kids.fork_or_stop(|| child(i, &listener, cfg, meters, select)) }?;
    }
    let stopped = crate::wait_for_stop();
    crate::shutdown_fd(listener.as_raw_fd());
    kids.wind_down(cfg.proto.timeout);
    stopped?;
    Ok(Outcome { members: cfg.pool, counts_wakeups: select })
}

// ANCHOR: child
/// A child's life: accept, serve, and again, until the parent shuts the
/// listener down.
fn child(i: usize, listener: &TcpListener, cfg: &Config, m: &Meters, select: bool) {
    loop {
        if select {
            wait_in_select(listener.as_raw_fd());
            m.woke(i);
        }
        match listener.accept() {
            Ok((stream, _)) => {
                m.accepted(i);
                serve(&stream, cfg, m, i);
            }
            Err(e) if listener_closed(&e) => return,
            Err(e) => crate::accept_failed(&e),
        }
    }
}
// ANCHOR_END: child

/// `accept` on a listener the parent has shut down fails with EINVAL.
pub(crate) fn listener_closed(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Block in `select(2)` until the listener is readable; `fd` is below
/// FD_SETSIZE (checked in [`run`] before any child is forked).
fn wait_in_select(fd: i32) {
    // SAFETY: an fd_set on the stack, cleared and given one descriptor,
    // the listener, which `run` checked is below FD_SETSIZE before
    // forking, so FD_SET writes inside the set; select(2) only reads and
    // writes that set.
    unsafe {
        let mut set: libc::fd_set = std::mem::zeroed();
        libc::FD_ZERO(&mut set);
        libc::FD_SET(fd, &mut set);
        let none = std::ptr::null_mut();
        libc::select(fd + 1, &mut set, none, none, std::ptr::null_mut());
    }
}

/// Serve one accepted connection in a child and count it.
pub(crate) fn serve(
    stream: &std::net::TcpStream,
    cfg: &Config,
    m: &Meters,
    i: usize,
) {
    let served = match protocol::set_timeouts(stream, cfg.proto.timeout) {
        Ok(()) => protocol::serve(stream, &cfg.proto, m.get(i)),
        Err(e) => Served {
            error: Some(protocol::io_reason(&e, false)),
            ..Served::default()
        },
    };
    crate::account(m, i, &served);
}

/// The children of a process-based server.
#[derive(Default)]
pub(crate) struct Children {
    pids: Vec<Pid>,
}

impl Children {
    /// Fork a child that runs `body` and leaves with `_exit`.
    ///
    /// # Safety
    /// `body` must be async-signal-safe, as the parent may have a second
    /// thread (`labkit::limits::enough_stack` runs main on one under a
    /// small RLIMIT_STACK) whose locks the child inherits held: system
    /// calls on buffers that exist already, atomics, no allocation, no
    /// lock a parent thread may hold, no std I/O that locks (`println!`),
    /// no panic.
    pub(crate) unsafe fn fork(&mut self, body: impl FnOnce()) -> Result<Pid> {
        let parent = std::process::id() as i32;
        // SAFETY: the child stays async-signal-safe: it runs `in_child`
        // (prctl, getppid, signal, sigprocmask), then `body`, which the
        // caller guarantees is async-signal-safe and allocates nothing, then
        // `exit_child`, which leaves with _exit. The parent only records the
        // pid.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => {
                in_child(parent);
                body();
                exit_child()
            }
            Ok(ForkResult::Parent { child }) => {
                self.pids.push(child);
                Ok(child)
            }
            Err(e) => Err(Error::failed(format!("fork: {}", describe_errno(e)))),
        }
    }

    /// [`Children::fork`] for a pool: on failure the children already
    /// started are stopped and reaped.
    ///
    /// # Safety
    /// As for [`Children::fork`]: `body` must be async-signal-safe.
    pub(crate) unsafe fn fork_or_stop(
        &mut self,
        body: impl FnOnce(),
    ) -> Result<Pid> {
        // SAFETY: the caller's guarantee for `body`, passed on.
        unsafe { self.fork(body) }.map_err(|e| {
            let started = self.pids.len();
            self.stop();
            Error::failed(format!(
                "{e}; stopped and reaped the {started} children started"
            ))
        })
    }

    /// Reap the children that have exited, as Stevens' `sig_chld` does: one
    /// `wait4(-1, WNOHANG)` per ended child, not one per child alive; how
    /// many.
    pub(crate) fn reap_finished(&mut self) -> usize {
        let mut n = 0;
        while let Some(pid) = labkit::children::reap_ended() {
            self.pids.retain(|p| p.as_raw() != pid);
            n += 1;
        }
        n
    }

    /// Reap the children as they finish; after `timeout` and a second, send
    /// the rest SIGTERM and reap them too.
    pub(crate) fn wind_down(&mut self, timeout: std::time::Duration) {
        let deadline =
            std::time::Instant::now() + timeout + std::time::Duration::from_secs(1);
        while !self.pids.is_empty() && std::time::Instant::now() < deadline {
            if self.reap_finished() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        self.stop();
    }

    /// Send every child SIGTERM and reap them all.
    pub(crate) fn stop(&mut self) {
        for &pid in &self.pids {
            let _ = kill(pid, Signal::SIGTERM);
        }
        for pid in self.pids.drain(..) {
            let _ = labkit::children::wait4(pid.as_raw(), 0);
        }
    }
}

/// First thing in every child: die with the parent if it is killed
/// outright (a pool member is the runner's grandchild, which the runner's
/// own death signal does not reach), ignore SIGINT and SIGHUP (a Ctrl-C
/// reaches the whole process group; the parent decides how its children
/// stop) and unblock the signals the parent blocked, so that the parent's
/// SIGTERM ends a child at once.
pub(crate) fn in_child(parent: i32) {
    if !labkit::children::die_with_parent(parent) {
        exit_child(); // the parent is already gone
    }
    // SAFETY: signal and sigprocmask are async-signal-safe; an empty set
    // on the stack.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Leave a child without running any of the parent's exit code.
pub(crate) fn exit_child() -> ! {
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(0) }
}
