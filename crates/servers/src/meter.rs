//! Stevens' meter (serv02m, serv03m): each pool member counts the
//! connections it handled in memory shared with the parent, which prints
//! the counts at the end. Here every design has one: an array of atomic
//! counters in an anonymous `MAP_SHARED` mapping, made before any fork, so
//! that forked children and threads update the same counters. The mapping
//! is made once per server and lives until the process exits, so every
//! thread may hold a `&'static Meters`.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use labkit::error::{Error, Result};
use labkit::memory::map_anonymous;

use crate::protocol::Served;

/// One pool member's counters.
#[derive(Default)]
#[repr(C)]
pub struct Meter {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
    /// Connections closed early.
    pub bad: AtomicU64,
    /// Wake-ups to take a connection (select/epoll returns).
    pub wakeups: AtomicU64,
}

/// A plain copy of a meter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub connections: u64,
    pub requests: u64,
    pub bytes: u64,
    pub bad: u64,
    pub wakeups: u64,
}

/// `n` meters in shared memory.
pub struct Meters {
    ptr: NonNull<Meter>,
    n: usize,
}

// SAFETY: the meters are atomics, safe to share between threads; the
// mapping is never unmapped.
unsafe impl Send for Meters {}
// SAFETY: as above, all access goes through atomics.
unsafe impl Sync for Meters {}

impl Meters {
    /// `n` zeroed meters, for the rest of the process's life.
    pub fn new(n: usize) -> Result<&'static Meters> {
        let len = n * std::mem::size_of::<Meter>();
        // Zero-filled by the kernel: all-zero bytes are valid AtomicU64s.
        let ptr = map_anonymous(len, libc::MAP_SHARED)
            .map_err(|e| Error::io("mmap of the meters", e.into()))?
            .cast::<Meter>();
        Ok(Box::leak(Box::new(Meters { ptr, n })))
    }

    /// The meters, one per member.
    pub fn all(&self) -> &[Meter] {
        // SAFETY: `n` zero-initialised meters live at `ptr` for good.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.n) }
    }

    /// Member `i`'s meter (the last one if `i` is out of range).
    pub fn get(&self, i: usize) -> &Meter {
        &self.all()[i.min(self.n - 1)]
    }

    /// Count the end of a connection served by member `i` (its replies
    /// were counted as they were written).
    pub fn served(&self, i: usize, s: &Served) {
        if s.error.is_some() {
            self.get(i).bad.fetch_add(1, Relaxed);
        }
    }

    /// Count one accepted connection for member `i`.
    pub fn accepted(&self, i: usize) {
        self.get(i).connections.fetch_add(1, Relaxed);
    }

    /// Count a wake-up of member `i`.
    pub fn woke(&self, i: usize) {
        self.get(i).wakeups.fetch_add(1, Relaxed);
    }

    /// The sums over every member.
    pub fn total(&self) -> Counts {
        let mut t = Counts::default();
        for m in self.all() {
            t.connections += m.connections.load(Relaxed);
            t.requests += m.requests.load(Relaxed);
            t.bytes += m.bytes.load(Relaxed);
            t.bad += m.bad.load(Relaxed);
            t.wakeups += m.wakeups.load(Relaxed);
        }
        t
    }
}

impl Meter {
    /// Count one whole reply of `bytes` bytes, as soon as it is written:
    /// a worker stopped later (a child killed by the parent's SIGTERM, a
    /// task dropped by the runtime) has already counted it.
    pub fn replied(&self, bytes: usize) {
        self.requests.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes as u64, Relaxed);
    }

    pub fn counts(&self) -> Counts {
        Counts {
            connections: self.connections.load(Relaxed),
            requests: self.requests.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            bad: self.bad.load(Relaxed),
            wakeups: self.wakeups.load(Relaxed),
        }
    }
}
