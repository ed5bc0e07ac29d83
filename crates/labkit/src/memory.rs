//! Resident memory made on purpose: the "parent with N MiB touched" that
//! fork and copy-on-write experiments need.

use nix::errno::Errno;

/// The page size the experiments write at: 4 KiB, the size that
/// copy-on-write copies when huge pages are off.
pub const PAGE: usize = 4096;

/// A private anonymous mapping with every 4 KiB page written once, so it is
/// resident and this process's own. Huge pages are turned off for it
/// (`MADV_NOHUGEPAGE`), so that a write after `fork` copies 4 KiB, as in
/// most heaps, whatever the machine's transparent-huge-page setting.
/// Unmapped when dropped.
pub struct Touched {
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; callers that
// share it across threads only store bytes into it (see their own notes).
unsafe impl Send for Touched {}
unsafe impl Sync for Touched {}

impl Touched {
    /// Map and touch `len` bytes (nothing is mapped for 0).
    pub fn new(len: usize) -> Result<Touched, Errno> {
        if len == 0 {
            return Ok(Touched {
                addr: std::ptr::NonNull::dangling().as_ptr(),
                len,
            });
        }
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        // SAFETY: advice on our own mapping; failure only leaves THP as is.
        unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
        let touched = Touched { addr: addr.cast(), len };
        // SAFETY: the mapping is writable and exactly `len` bytes long.
        unsafe { touched.write_pages(1) };
        Ok(touched)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Store `value` in the first byte of every page (a volatile store, so
    /// the page fault happens). Async-signal-safe: a forked child may call it.
    ///
    /// # Safety
    /// Other threads may store into the same pages at the same time only
    /// because nobody reads the values; callers must not rely on them.
    pub unsafe fn write_pages(&self, value: u8) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: `off` < len, inside the writable mapping.
            unsafe { self.addr.add(off).write_volatile(value) };
        }
    }
}

impl Drop for Touched {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping exactly the mapping made in `new`.
            unsafe { libc::munmap(self.addr.cast(), self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn touched_memory_is_resident_until_dropped() {
        let before = vm_rss_kib();
        let region = Touched::new(32 << 20).unwrap();
        assert_eq!(region.len(), 32 << 20);
        let during = vm_rss_kib();
        assert!(during >= before + 30 * 1024, "{before} -> {during} KiB");
        drop(region);
        assert!(vm_rss_kib() < during - 30 * 1024);
        assert!(Touched::new(0).unwrap().is_empty());
    }
}
