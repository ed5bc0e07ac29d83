//! `pthread_create` and `pthread_join`, called directly.
//!
//! `std::thread` is the idiomatic way to start a thread in Rust, but it does
//! more than `pthread_create`: it maps, protects and installs an alternate
//! signal stack in every new thread (to report stack overflows), asks for
//! the thread's attributes and CPU set, and allocates its handle. With 255
//! short-lived threads that was about a fifth more time than the C
//! program on the lab's machine. The programs that reproduce C's
//! `pthread_create` loops use this module instead, so that they measure
//! what the C measured; the `spawn-methods` experiment compares the two.

use std::ffi::c_void;

use nix::errno::Errno;

/// Thread attributes: the default ones, or a given stack size
/// (`pthread_attr_setstacksize`).
pub struct Attr(Option<libc::pthread_attr_t>);

impl Attr {
    /// What `pthread_create(..., NULL, ...)` uses: glibc's default stack,
    /// the soft `RLIMIT_STACK` at program start.
    pub fn default_stack() -> Attr {
        Attr(None)
    }

    /// A stack of `bytes` (rounded up to whole pages by glibc).
    pub fn stack_size(bytes: usize) -> Result<Attr, Errno> {
        // SAFETY: pthread_attr_t is plain data that pthread_attr_init fills.
        let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to our attr.
        Errno::result(unsafe { libc::pthread_attr_init(&mut attr) })?;
        // SAFETY: attr was initialised above.
        let rc = unsafe { libc::pthread_attr_setstacksize(&mut attr, bytes) };
        if rc != 0 {
            // SAFETY: attr was initialised above and is destroyed once.
            unsafe { libc::pthread_attr_destroy(&mut attr) };
            return Err(Errno::from_raw(rc));
        }
        Ok(Attr(Some(attr)))
    }

    /// The `attr` argument of `pthread_create` (null for the default), for
    /// a loop that calls it itself; valid while `self` lives unmoved.
    pub fn as_ptr(&self) -> *const libc::pthread_attr_t {
        self.0.as_ref().map_or(std::ptr::null(), |a| a as *const _)
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        if let Some(attr) = self.0.as_mut() {
            // SAFETY: initialised in `stack_size`, destroyed only here.
            unsafe { libc::pthread_attr_destroy(attr) };
        }
    }
}

/// What a thread runs: a plain function and the shared data it reads. The
/// function's `i32` is the thread's result (0 for success, else an errno).
pub struct Start<'a, T: Sync> {
    pub run: fn(&T) -> i32,
    pub data: &'a T,
}

extern "C" fn trampoline<T: Sync>(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `spawn` passes a pointer to a live `Start<T>`, which its
    // caller keeps alive until this thread is joined.
    let start = unsafe { &*(arg as *const Start<'_, T>) };
    (start.run)(start.data) as isize as *mut c_void
}

/// A started thread, until it is joined. Not `Copy` or `Clone`: [`join`]
/// takes it by value, so safe code cannot join one thread twice (undefined
/// behaviour in glibc) or join a thread that was never started.
#[must_use = "a thread must be joined before what it borrows goes away"]
#[derive(Debug)]
pub struct Thread(libc::pthread_t);

/// `pthread_create(&id, attr, run, data)`.
///
/// # Safety
/// The caller must keep `start` (and what it borrows) alive, and must
/// [`join`] the returned thread before that ends; `start.run` must not
/// panic (a panic cannot unwind out of the thread and aborts the process).
pub unsafe fn spawn<T: Sync>(
    attr: &Attr,
    start: &Start<'_, T>,
) -> Result<Thread, Errno> {
    let mut id: libc::pthread_t = 0;
    let arg = start as *const Start<'_, T> as *mut c_void;
    // SAFETY: valid pointers; the contract above keeps `arg` alive.
    let rc = unsafe {
        libc::pthread_create(&mut id, attr.as_ptr(), trampoline::<T>, arg)
    };
    if rc == 0 { Ok(Thread(id)) } else { Err(Errno::from_raw(rc)) }
}

/// `pthread_join(thread)`: wait for the thread and return its result. The
/// handle is consumed, so each thread is joined at most once.
pub fn join(thread: Thread) -> Result<i32, Errno> {
    let mut ret: *mut c_void = std::ptr::null_mut();
    // SAFETY: `thread.0` came from a successful pthread_create in `spawn`;
    // `Thread` is neither Copy nor Clone and is moved in here, so this is
    // the only join of that thread, and it was never detached.
    let rc = unsafe { libc::pthread_join(thread.0, &mut ret) };
    if rc == 0 { Ok(ret as isize as i32) } else { Err(Errno::from_raw(rc)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Each thread returns the count it found: 0, 1, 2, ... once each.
    fn bump(n: &AtomicU32) -> i32 {
        n.fetch_add(1, Ordering::SeqCst) as i32
    }

    #[test]
    fn threads_run_and_return_their_results() {
        let count = AtomicU32::new(0);
        let start = Start { run: bump, data: &count };
        let attrs = [Attr::default_stack(), Attr::stack_size(64 << 10).unwrap()];
        for (round, attr) in attrs.iter().enumerate() {
            // SAFETY: `start` outlives the threads, which are joined here.
            let threads: Vec<Thread> =
                (0..4).map(|_| unsafe { spawn(attr, &start) }.unwrap()).collect();
            let first = 4 * round as i32;
            let mut results: Vec<i32> =
                threads.into_iter().map(|t| join(t).unwrap()).collect();
            results.sort();
            // Every thread ran once and its own return value came back.
            let want: Vec<i32> = (first..first + 4).collect();
            assert_eq!(results, want);
        }
        assert_eq!(count.load(Ordering::SeqCst), 8);
    }

    #[test]
    fn impossible_stacks_are_refused() {
        assert_eq!(Attr::stack_size(1).err(), Some(Errno::EINVAL));
    }
}
