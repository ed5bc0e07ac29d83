//! serv03 and serv04: prefork with a lock around `accept`, so that only one
//! child at a time waits in it. Stevens needed the lock on kernels that
//! woke every child blocked in `accept` (the thundering herd), and on
//! systems where `accept` in several processes on one socket was not even
//! safe. On Linux it is neither needed nor harmful to correctness: it only
//! adds the lock's own cost.
//!
//! - `prefork-fcntl` (serv03): an `fcntl` write lock (`F_SETLKW`) on a
//!   temporary file, unlinked at once, which every child inherits, as
//!   Stevens' serv03 takes it.
//! - `prefork-mutex` (serv04): a `pthread_mutex_t` marked
//!   `PTHREAD_PROCESS_SHARED`, in a shared anonymous mapping.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use labkit::error::{Error, Result, describe_io};

use crate::prefork::{Children, listener_closed, serve};
use crate::{Config, Design, Meters, Outcome};

/// The lock that serialises `accept` across the children.
enum Lock {
    File(OwnedFd),
    Mutex(*mut libc::pthread_mutex_t),
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Lock::Mutex(m) = *self {
            // SAFETY: the parent's own mapping of the mutex, made by
            // `shared_mutex` and unmapped only here, once; the parent never
            // locks it, and a child's copy of the mapping is its own. The
            // mutex is not destroyed: a child killed while holding it
            // leaves it locked, and destroying a locked mutex is undefined.
            unsafe {
                libc::munmap(m.cast(), std::mem::size_of::<libc::pthread_mutex_t>());
            }
        }
    }
}

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let lock = match cfg.design {
        Design::PreforkMutex => shared_mutex()?,
        _ => lock_file()?,
    };
    let mut kids = Children::default();
    for i in 0..cfg.pool {
        // SAFETY: `child` is async-signal-safe and allocates nothing: the
        // lock is fcntl(F_SETLKW) or the process-shared mutex (futex calls
        // on the shared mapping; no parent thread ever locks it, so no
        // child inherits it held by a thread that is gone), then accept4
        // and `serve`, as in prefork's `child`.
        unsafe { kids.fork_or_stop(|| child(i, &listener, &lock, cfg, meters)) }?;
    }
    let stopped = crate::wait_for_stop();
    // Every child finishes its connection, then finds accept failing.
    crate::shutdown_fd(listener.as_raw_fd());
    kids.wind_down(cfg.proto.timeout);
    // The lock goes when `run` returns, on this path or an error's (a
    // fork that failed partway): Lock's Drop unmaps the mutex.
    stopped?;
    Ok(Outcome { members: cfg.pool, counts_wakeups: false })
}

// ANCHOR: child
fn child(i: usize, listener: &TcpListener, lock: &Lock, cfg: &Config, m: &Meters) {
    loop {
        lock_wait(lock);
        let accepted = listener.accept();
        lock_release(lock);
        match accepted {
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

// ANCHOR: locks
fn lock_wait(lock: &Lock) {
    match lock {
        Lock::File(fd) => file_lock(fd.as_raw_fd(), libc::F_WRLCK),
        // SAFETY: a process-shared mutex initialised in `shared_mutex`,
        // mapped in every child.
        Lock::Mutex(m) => unsafe {
            libc::pthread_mutex_lock(*m);
        },
    }
}

fn lock_release(lock: &Lock) {
    match lock {
        Lock::File(fd) => file_lock(fd.as_raw_fd(), libc::F_UNLCK),
        // SAFETY: as above; this child holds the mutex.
        Lock::Mutex(m) => unsafe {
            libc::pthread_mutex_unlock(*m);
        },
    }
}

/// `fcntl(fd, F_SETLKW, ...)` on the whole file, retried on EINTR.
fn file_lock(fd: i32, kind: i32) {
    // SAFETY: a zeroed flock (whole file from offset 0) on the stack and an
    // open descriptor; fcntl is async-signal-safe.
    unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        while libc::fcntl(fd, libc::F_SETLKW, &fl) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
    }
}
// ANCHOR_END: locks

/// Stevens' `my_lock_init`: a temporary file, unlinked at once, whose
/// descriptor the children inherit.
fn lock_file() -> Result<Lock> {
    let mut template = std::env::temp_dir()
        .join("servers-lock.XXXXXX")
        .into_os_string()
        .into_encoded_bytes();
    template.push(0);
    // SAFETY: mkstemp gets a writable, NUL-terminated template and returns
    // a new descriptor or -1.
    let fd = unsafe { libc::mkstemp(template.as_mut_ptr().cast()) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::failed(format!(
            "mkstemp for the lock file: {}",
            describe_io(&e)
        )));
    }
    // SAFETY: the path mkstemp just filled in, NUL-terminated; unlinking
    // leaves the open descriptor valid and nothing on disk.
    unsafe { libc::unlink(template.as_ptr().cast()) };
    // SAFETY: a new descriptor that we own.
    Ok(Lock::File(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Stevens' `my_lock_init` for serv04: a mutex in shared memory.
fn shared_mutex() -> Result<Lock> {
    let size = std::mem::size_of::<libc::pthread_mutex_t>();
    let p = labkit::memory::map_anonymous(size, libc::MAP_SHARED)
        .map_err(|e| Error::io("mmap for the mutex", e.into()))?;
    // SAFETY: `p` is a fresh shared mapping of one mutex's size; the mutex
    // and its attribute are initialised before any child exists.
    unsafe {
        let m = p.as_ptr().cast::<libc::pthread_mutex_t>();
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        libc::pthread_mutexattr_init(&mut attr);
        libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
        let r = libc::pthread_mutex_init(m, &attr);
        libc::pthread_mutexattr_destroy(&mut attr);
        if r != 0 {
            libc::munmap(p.as_ptr().cast(), size);
            let e = std::io::Error::from_raw_os_error(r);
            return Err(Error::failed(format!(
                "pthread_mutex_init: {}",
                describe_io(&e)
            )));
        }
        Ok(Lock::Mutex(m))
    }
}
