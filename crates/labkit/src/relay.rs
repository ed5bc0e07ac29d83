//! Termination for the programs that fork: SIGINT, SIGTERM and SIGHUP are
//! passed on to the children, the parent reaps them and exits 128 + N.
//!
//! How a parent uses it (see `fork`, `forkcreat`, `creattime`, `footprint`,
//! `stacklimit`):
//!
//! 1. [`install`] before the first `fork`, with room for every child. It
//!    catches the three signals with a handler that records the first one
//!    and sends it on (`kill(2)`) to every child registered so far. The
//!    handler is installed without `SA_RESTART`, so a parent blocked in
//!    `waitpid` or `read` returns with `EINTR` and can look.
//! 2. The child calls [`in_child`] first thing after `fork`:
//!    `PR_SET_PDEATHSIG`. (The handler it inherits knows it is not the
//!    parent: it restores the default action and raises the signal again.)
//! 3. The parent calls [`add`] with each new child, [`pending`] in its
//!    loops (stop creating when a signal came), [`pass_on`] again after an
//!    `EINTR` (a child forked while the handler ran is covered too), reaps
//!    every child and returns [`interrupted`].
//!
//! Why `PR_SET_PDEATHSIG` as the backstop: a parent killed with `SIGKILL`,
//! or one that crashes, cannot pass anything on. With
//! `prctl(PR_SET_PDEATHSIG, SIGKILL)` the kernel kills each child when its
//! parent dies, so no worker outlives its program. The alternatives fall
//! short: a process group is shared with the shell's job or the runner and
//! needs someone alive to signal it; a pipe that children poll would change
//! the workers' code the articles measure. The cost is two cheap system
//! calls in each child, `prctl` and `getppid`. (The death signal is tied to
//! the thread that forked: the programs fork from the thread that runs
//! `main`, which lives until the program ends.)
//!
//! Everything here is async-signal-safe: the handler uses only atomics,
//! `getpid`, `kill`, `signal` and `raise`, and leaves `errno` as it found
//! it; [`in_child`] only `prctl`, `getppid` and `_exit`.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use crate::error::Error;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The first signal received, or 0.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The parent's pid: the handler, inherited by a child that has not yet
/// called [`in_child`], must not act as the parent.
static PARENT: AtomicI32 = AtomicI32::new(0);
/// The registered children, leaked by [`install`] and never freed.
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());

/// Room for `slots.len()` children. [`add`] reserves the next slot with
/// one `fetch_add` on `next`, then stores the pid in it: concurrent callers
/// each get a slot of their own. A slot is 0 until its pid is stored (the
/// handler may run in between: it skips zeros) and again once its child
/// is about to be reaped.
struct Registry {
    next: AtomicUsize,
    slots: Box<[AtomicI32]>,
}

fn registry() -> Option<&'static Registry> {
    let ptr = REGISTRY.load(Ordering::Acquire);
    // SAFETY: a non-null `ptr` was published by `install` from `Box::leak`,
    // so it points to a live, never-freed registry; its counter and slots
    // travel together in that one pointer, so a second `install` cannot
    // pair one registry's counter with another's slots.
    unsafe { ptr.as_ref() }
}

fn slots() -> &'static [AtomicI32] {
    registry().map_or(&[], |r| &r.slots)
}

extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: errno is thread-local and always valid to read; the handler
    // may change it (kill, signal), so it puts back the interrupted
    // code's value before returning.
    let saved = unsafe { *libc::__errno_location() };
    handle(sig);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// The handler's work ([`on_signal`] keeps errno around it).
fn handle(sig: libc::c_int) {
    // SAFETY: getpid cannot fail and is async-signal-safe.
    if unsafe { libc::getpid() } != PARENT.load(Ordering::Relaxed) {
        // A child that has not reset its handlers yet: die of the signal.
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    pass_on();
}

/// Catch SIGINT, SIGTERM and SIGHUP in this process, with room to pass
/// them on to `capacity` children. Call once, before the first `fork`.
pub fn install(capacity: usize) {
    let slots = (0..capacity).map(|_| AtomicI32::new(0)).collect();
    let registry = Registry { next: AtomicUsize::new(0), slots };
    REGISTRY.store(Box::leak(Box::new(registry)), Ordering::Release);
    // SAFETY: getpid cannot fail.
    PARENT.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with a valid handler and an empty
        // mask; no SA_RESTART, so blocking calls return EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// In a child, right after `fork`: `PR_SET_PDEATHSIG(SIGKILL)`, and leave
/// at once if the parent is already gone. The inherited handler needs no
/// reset: in a child it restores the default action and raises the signal
/// again, so the child dies of it. Two system calls, async-signal-safe.
pub fn in_child() {
    // SAFETY: prctl, getppid and _exit are async-signal-safe system calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // The parent died between fork and prctl: the death signal would
        // never come.
        if libc::getppid() != PARENT.load(Ordering::Relaxed) {
            libc::_exit(1);
        }
    }
}

/// Register a new child; returns its slot for [`reap`]. Children beyond
/// the capacity are not registered (the death signal still covers them).
/// Safe to call from several threads at once: each call takes a slot of
/// its own. A signal that comes before the pid is stored does not reach
/// that child; [`pass_on`] after the next `EINTR` does.
pub fn add(pid: i32) -> usize {
    let Some(registry) = registry() else { return 0 };
    let i = registry.next.fetch_add(1, Ordering::AcqRel);
    if let Some(slot) = registry.slots.get(i) {
        slot.store(pid, Ordering::Release);
    }
    i
}

/// Never signal the child in `slot` again: it is about to be reaped.
fn reaped(slot: usize) {
    if let Some(s) = slots().get(slot) {
        s.store(0, Ordering::Release);
    }
}

/// Reap the child `pid` registered in `slot`: wait until it has ended
/// without reaping it (`WNOWAIT`), clear its slot, and only then reap it,
/// so the handler never signals a pid that was reaped, which the kernel
/// may already have given to another process. An `EINTR` passes the
/// signal on ([`pass_on`]) and waits again.
pub fn reap(slot: usize, pid: i32) -> std::io::Result<std::process::ExitStatus> {
    crate::children::wait_ended(pid)?;
    reaped(slot);
    let (status, _) = crate::children::wait4(pid, 0)?
        .ok_or_else(|| std::io::Error::other("a blocking wait4 returned nothing"))?;
    Ok(status)
}

/// The signal received, if any.
pub fn pending() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Send the received signal (if any) to every registered, unreaped child.
pub fn pass_on() {
    let Some(sig) = pending() else { return };
    let Some(registry) = registry() else { return };
    let reserved = registry.next.load(Ordering::Acquire);
    for slot in registry.slots.iter().take(reserved) {
        let pid = slot.load(Ordering::Acquire);
        if pid > 0 {
            // SAFETY: kill only sends a signal. A slot is cleared before its
            // child is reaped ([`reap`]), so `pid` is our live or zombie child.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// The error that ends an interrupted program: exit 128 + N, with what
/// was done, e.g. "interrupted by SIGTERM; passed it on to the 255
/// children and reaped them".
pub fn interrupted(sig: i32, done: &str) -> Error {
    Error::interrupted(sig, done)
}

#[cfg(test)]
mod tests {
    use std::sync::{Barrier, Mutex};

    use super::Ordering;

    /// The registry is one per process: one test at a time installs it.
    static INSTALL: Mutex<()> = Mutex::new(());

    #[test]
    fn reap_clears_the_slot_and_returns_the_status() {
        let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
        super::install(2);
        let child = std::process::Command::new("sh").args(["-c", "exit 3"]).spawn();
        let pid = child.unwrap().id() as i32;
        let slot = super::add(pid);
        assert_eq!(super::slots()[slot].load(Ordering::Acquire), pid);
        let status = super::reap(slot, pid).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(super::slots()[slot].load(Ordering::Acquire), 0);
        // A second install gives a new slice, whole.
        super::install(5);
        assert_eq!(super::slots().len(), 5);
    }

    #[test]
    fn concurrent_adds_register_every_pid_exactly_once() {
        const THREADS: i32 = 8;
        const EACH: i32 = 500;
        const CAPACITY: usize = (THREADS * EACH) as usize - 100;
        let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
        super::install(CAPACITY);
        // Above any pid_max (2^22), so never a real process; no signal is
        // pending, so nothing is sent to them anyway.
        let fake = |t: i32, k: i32| 10_000_000 + t * EACH + k;
        let start = Barrier::new(THREADS as usize);
        let mut taken: Vec<(usize, i32)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        (0..EACH)
                            .map(|k| (super::add(fake(t, k)), fake(t, k)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
        });
        // Every call got a slot of its own: 0..THREADS * EACH, each once.
        taken.sort_unstable();
        let slots: Vec<usize> = taken.iter().map(|&(slot, _)| slot).collect();
        assert_eq!(slots, (0..(THREADS * EACH) as usize).collect::<Vec<_>>());
        // The first CAPACITY holds its caller's pid; the rest were refused.
        for &(slot, pid) in &taken[..CAPACITY] {
            assert_eq!(super::slots()[slot].load(Ordering::Acquire), pid);
        }
        let mut stored: Vec<i32> =
            super::slots().iter().map(|s| s.load(Ordering::Acquire)).collect();
        let mut expected: Vec<i32> =
            taken[..CAPACITY].iter().map(|&(_, pid)| pid).collect();
        stored.sort_unstable();
        expected.sort_unstable();
        assert_eq!(stored, expected, "each pid once, no other");
        // Clear them, as reap would, so no later test signals them.
        (0..CAPACITY).for_each(super::reaped);
    }
}
