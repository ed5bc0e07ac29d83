//! Memory made on purpose: the "parent with N MiB touched" that fork and
//! copy-on-write experiments need, and page-aligned buffers for the pipe
//! programs.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use nix::errno::Errno;

/// The page size the experiments write at: 4 KiB, the size that
/// copy-on-write copies when huge pages are off.
pub const PAGE: usize = 4096;

/// `mmap` of `len` (not 0) fresh zero-filled bytes, readable and writable,
/// backed by no file. `flags` holds `libc::MAP_PRIVATE` (a child forked
/// later gets copy-on-write pages) or `libc::MAP_SHARED` (parent and
/// children see each other's writes: Stevens' meters and lock), and any
/// other flag (`MAP_HUGETLB`, say) but `MAP_FIXED` and
/// `MAP_FIXED_NOREPLACE`, which are refused with `EINVAL`: the kernel picks
/// the address. The caller owns the mapping: it unmaps it, or keeps it for
/// the process's life.
pub fn map_anonymous(len: usize, flags: libc::c_int) -> Result<NonNull<u8>, Errno> {
    if flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: a fresh mapping at an address the kernel picks (no MAP_FIXED,
    // refused above); no existing memory is touched.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    Ok(NonNull::new(addr.cast()).expect("mmap succeeds only with an address"))
}

/// A private anonymous mapping with every 4 KiB page written once, so it is
/// resident and this process's own. Huge pages are turned off for it
/// (`MADV_NOHUGEPAGE`), so that a write after `fork` copies 4 KiB, as in
/// most heaps, whatever the machine's transparent-huge-page setting.
/// Unmapped when dropped.
pub struct Touched {
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value, unmapped only
// when it is dropped; the only access through `&Touched` is
// [`Touched::write_pages`], whose stores are atomic, so threads sharing it
// never race.
unsafe impl Send for Touched {}
// SAFETY: as for Send.
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
        let addr = map_anonymous(len, libc::MAP_PRIVATE)?.as_ptr();
        // SAFETY: advice on our own mapping; failure only leaves THP as is.
        unsafe { libc::madvise(addr.cast(), len, libc::MADV_NOHUGEPAGE) };
        let touched = Touched { addr, len };
        touched.write_pages(1);
        Ok(touched)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Store `value` in the first byte of every page, so that each page is
    /// faulted in (or, after `fork`, copied). The stores are atomic
    /// (relaxed): several threads may write the same pages at once without
    /// a data race. Async-signal-safe (plain stores): a forked child may
    /// call it.
    pub fn write_pages(&self, value: u8) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: `off` < len, so the byte is inside the writable
            // mapping, which lives as long as `self`; every access to it
            // is through an AtomicU8 (here), and u8 has AtomicU8's size
            // and alignment.
            let byte = unsafe { AtomicU8::from_ptr(self.addr.add(off)) };
            byte.store(value, Ordering::Relaxed);
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

/// A zeroed byte buffer that starts on a page boundary, for the data the
/// pipe programs move (Rust and C alike).
///
/// Where a buffer starts within its page changes what the kernel's copies
/// cost. Measured on the AMD EPYC of the lab's reference runs, with two
/// threads on one CPU and 128 KiB blocks: `read` from a pipe into a buffer
/// 16 bytes past a page boundary ran at 1.25 GB/s, and at 3.2 GB/s with the
/// buffer on the boundary or 64 or more bytes past it. glibc's `malloc`
/// puts blocks of 128 KiB and more exactly 16 bytes past a boundary and
/// smaller ones wherever its heap happens to be, so with plain `Vec`s the
/// rate would depend on the allocator's history, not on the program.
pub struct PageAligned {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: it owns its bytes, like a Box<[u8]>.
unsafe impl Send for PageAligned {}
// SAFETY: as Box<[u8]>: `&PageAligned` only reads them (Deref), and
// writing needs `&mut`.
unsafe impl Sync for PageAligned {}

impl PageAligned {
    /// `len` zero bytes (resident or not, as for [`Self::zeroed`]), or
    /// `ENOMEM` if the memory cannot be had (an `RLIMIT_AS`, say, or a size
    /// that does not fit in `isize`): for buffers whose size the user
    /// chose, which must fail with a message, not abort.
    pub fn try_zeroed(len: usize) -> Result<PageAligned, Errno> {
        if len == 0 {
            return Ok(PageAligned::zeroed(0));
        }
        let layout =
            Layout::from_size_align(len, PAGE).map_err(|_| Errno::ENOMEM)?;
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| PageAligned { ptr, len }).ok_or(Errno::ENOMEM)
    }

    /// `len` zero bytes. Nothing is promised about residency: this
    /// function writes no page itself, and whether the allocator does is
    /// its business (std's allocator on Linux happens to `memset` memory
    /// aligned this way; a `calloc`-like one hands out untouched zero
    /// pages of an anonymous `mmap`, faulted in on first touch). A caller
    /// that needs every page resident before a clock starts writes them,
    /// as `pipespeed2::pattern` and `copylimit`'s buffers do.
    ///
    /// # Panics
    /// If `len` rounded up to a page does not fit in `isize`; aborts if
    /// the memory cannot be had, as `vec!` does. See [`Self::try_zeroed`].
    pub fn zeroed(len: usize) -> PageAligned {
        if len == 0 {
            /// A page-aligned address with nothing behind it.
            #[repr(align(4096))]
            struct Page;
            return PageAligned { ptr: NonNull::<Page>::dangling().cast(), len };
        }
        let layout = Self::layout(len);
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr)
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageAligned { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, PAGE).expect("a buffer size that fits in isize")
    }
}

impl std::ops::Deref for PageAligned {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes owned by self (or none, dangling).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageAligned {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageAligned {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: `ptr` came from alloc_zeroed in `zeroed` or
            // `try_zeroed`, both with Self::layout(len), rebuilt here.
            unsafe {
                std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len))
            };
        }
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes: what the kernel thinks
/// can be allocated without swapping. The lab's one reader of it, for the
/// programs and the runner that must never touch more.
pub fn mem_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_mappings_are_refused() {
        for flag in [libc::MAP_FIXED, libc::MAP_FIXED_NOREPLACE] {
            let flags = libc::MAP_PRIVATE | flag;
            assert_eq!(map_anonymous(PAGE, flags), Err(Errno::EINVAL));
        }
    }

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

    #[test]
    fn page_aligned_buffers_start_on_a_page_and_are_zeroed() {
        for len in [0, 1, 4095, 4097, 128 << 10] {
            let mut b = PageAligned::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % PAGE, 0, "{len}");
            assert!(b.iter().all(|&x| x == 0));
            b.fill(7);
            assert!(b.iter().all(|&x| x == 7));
        }
        let b = PageAligned::try_zeroed(8192).unwrap();
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_ptr() as usize % PAGE, 0);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(
            PageAligned::try_zeroed(usize::MAX - 10).err(),
            Some(Errno::ENOMEM)
        );
    }
}
