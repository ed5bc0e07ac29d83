//! Memory for the ladder: page-aligned mappings that may be backed by huge
//! pages, and the ring of stamped blocks the writer sends from.

use std::fmt;

use labkit::error::{Error, Result, describe_errno};
use labkit::memory::PAGE;

/// A huge page on x86-64 and most 64-bit Linux machines: 2 MiB.
pub const HUGE: usize = 2 << 20;

/// What backs a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// 4 KiB pages (huge pages were not asked for).
    Pages,
    /// `MAP_HUGETLB`: the kernel's reserved pool of huge pages.
    Hugetlb,
    /// `MADV_HUGEPAGE`, and the kernel did back the mapping with
    /// transparent huge pages (`AnonHugePages` in `/proc/self/smaps`).
    Thp,
    /// `MADV_HUGEPAGE` was given, but the kernel kept 4 KiB pages.
    ThpRefused,
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backing::Pages => "4 KiB pages",
            Backing::Hugetlb => "MAP_HUGETLB",
            Backing::Thp => "MADV_HUGEPAGE",
            Backing::ThpRefused => "MADV_HUGEPAGE asked, 4 KiB pages given",
        })
    }
}

/// A private anonymous mapping of at least `len` bytes, page-aligned (2 MiB
/// aligned with huge pages), every page written once before use so that
/// no page fault lands in the timed loop. Unmapped when dropped.
pub struct Mapping {
    /// Where the mapping the kernel gave starts, and its length.
    raw: *mut libc::c_void,
    raw_len: usize,
    /// The part handed out: aligned, `len` bytes.
    ptr: *mut u8,
    len: usize,
    pub backing: Backing,
}

// SAFETY: it owns its memory, like a Box<[u8]>: moving it to another
// thread moves the only handle to the mapping.
unsafe impl Send for Mapping {}
// SAFETY: a shared `&Mapping` only reads the bytes (writing needs `&mut`,
// through `DerefMut`), so threads sharing one cannot race.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn new(len: usize, huge: bool) -> Result<Mapping> {
        let len = len.max(1);
        if huge {
            // The reserved pool first (`vm.nr_hugepages`; usually empty).
            let rounded = len.div_ceil(HUGE) * HUGE;
            if let Ok(mut m) =
                Self::map(rounded, libc::MAP_HUGETLB, 0, Backing::Hugetlb)
            {
                m.touch();
                m.len = len;
                return Ok(m);
            }
            // Transparent huge pages: a 2 MiB-aligned stretch inside a
            // mapping one huge page larger, marked MADV_HUGEPAGE before its
            // first touch, so the first fault can take a whole huge page.
            let mut m = Self::map(rounded + HUGE, 0, HUGE, Backing::ThpRefused)?;
            m.len = rounded;
            // SAFETY: advice on a range inside our own mapping.
            let rc =
                unsafe { libc::madvise(m.ptr.cast(), rounded, libc::MADV_HUGEPAGE) };
            m.touch();
            if rc == 0 && anon_huge_kib(m.ptr as usize) > 0 {
                m.backing = Backing::Thp;
            }
            m.len = len;
            return Ok(m);
        }
        let mut m = Self::map(len.div_ceil(PAGE) * PAGE, 0, PAGE, Backing::Pages)?;
        // SAFETY: advice on our own mapping; 4 KiB pages, as asked, whatever
        // the machine's transparent-huge-page default.
        unsafe { libc::madvise(m.raw, m.raw_len, libc::MADV_NOHUGEPAGE) };
        m.touch();
        m.len = len;
        Ok(m)
    }

    fn map(
        len: usize,
        flags: i32,
        align: usize,
        backing: Backing,
    ) -> Result<Mapping> {
        let raw = labkit::memory::map_anonymous(len, libc::MAP_PRIVATE | flags)
            .map_err(|e| {
                Error::failed(format!(
                    "cannot map {len} bytes for the ring: mmap: {}",
                    describe_errno(e)
                ))
            })?
            .as_ptr()
            .cast::<libc::c_void>();
        let skip = if align > PAGE {
            (raw as usize).next_multiple_of(align) - raw as usize
        } else {
            0
        };
        Ok(Mapping {
            raw,
            raw_len: len,
            // SAFETY: `skip` < align <= the extra length mapped.
            ptr: unsafe { raw.cast::<u8>().add(skip) },
            len: len - skip,
            backing,
        })
    }

    /// Write every page once (zeros), so it is resident before the clock.
    fn touch(&mut self) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: `off` < len, inside the writable mapping.
            unsafe { self.ptr.add(off).write_volatile(0) };
        }
    }
}

impl std::ops::Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes of our mapping, initialised (zero or written).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for Mapping {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`.
        unsafe { libc::munmap(self.raw, self.raw_len) };
    }
}

/// KiB of transparent huge pages behind the mapping that contains `addr`
/// (`AnonHugePages` of its `/proc/self/smaps` entry); 0 if unknown.
fn anon_huge_kib(addr: usize) -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().unwrap_or("");
        if let Some((from, to)) = range.split_once('-') {
            if let (Ok(from), Ok(to)) =
                (usize::from_str_radix(from, 16), usize::from_str_radix(to, 16))
            {
                inside = (from..to).contains(&addr);
                continue;
            }
        }
        if inside && line.starts_with("AnonHugePages:") {
            return line
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}
