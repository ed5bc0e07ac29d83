//! `pipespeed2`: how fast can one thread push bytes through a pipe?
//!
//! Reproduces `pipespeed2.cpp` from E. G. Bradford's article on pipes in
//! Windows 2000, Windows XP and Linux (book References: bradford-2001): create a
//! pipe, then COUNT times write a block of BYTES into it and read the block
//! back, all in one thread, and print the rate. With no second thread there
//! is no context switch: the figure is the cost of the kernel's pipe code
//! path itself (two system calls and two copies per block).
//!
//! What it does differently, on purpose:
//! - The article assumed a 4096-byte pipe buffer (Linux 2.4). A block that
//!   does not fit would block the only thread forever, so the program asks
//!   the kernel for the real size (`F_GETPIPE_SZ`) and refuses such a block
//!   with a clear message (exit 2), or grows the pipe when `--pipe-size`
//!   asks (`F_SETPIPE_SZ`, which rounds up; the size granted is reported).
//! - The write end is non-blocking as a second guard: should the kernel
//!   ever take less than the whole block, the run fails instead of hanging.
//! - The last block read back is compared with the block written, and every
//!   byte is counted.
//!
//! The library also holds what `pipespeed2t` shares with it: the block
//! pattern, the pipe-size calls, whole-block reads and writes, the report.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use clap::Parser;
use labkit::error::{Error, Result, describe_errno};
use labkit::limits::size_in;
use labkit::memory::PageAligned;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use serde::{Deserialize, Serialize};

/// One MB in the rates printed: 10^6 bytes.
pub const MB: f64 = 1e6;

/// What a run did, printed as one line or as one JSON object. The C
/// references (`c/pipespeed2.c`, `pipespeed2t.c`) print the same object
/// with `--json`, and the runner reads both as this type.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// `pipespeed2`, `pipespeed2t`, or the C twin's `pipespeed2.c`, ...
    pub program: String,
    /// `pipe`, `fifo` or `socketpair`.
    pub transport: String,
    /// `single thread`, `threads` or `processes` (`, vmsplice` when the
    /// writer gave its pages to the pipe instead of copying them).
    pub mode: String,
    pub count: u64,
    pub block_bytes: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// Bytes moved per second, in MB (10^6 bytes).
    pub mb_per_s: f64,
    /// The pipe's buffer as the kernel reports it (`F_GETPIPE_SZ`); none for
    /// a socket pair.
    pub pipe_size: Option<u64>,
    /// Every byte was counted and checked against what was written.
    pub verified: bool,
    /// `pipespeed2t --cpus A,B`: the CPUs the writer and the reader ended
    /// their loops on, as the kernel said (A and B, where each was pinned);
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<[usize; 2]>,
}

impl Report {
    /// The line printed without `--json`.
    pub fn text(&self) -> String {
        let buffer = self
            .pipe_size
            .map_or(String::new(), |n| format!(", pipe buffer {n} bytes"));
        format!(
            "{} x {} bytes = {} bytes in {:.6} s: {:.1} MB/s ({}, {}{buffer})\n",
            self.count,
            self.block_bytes,
            self.bytes,
            self.elapsed_s,
            self.mb_per_s,
            self.transport,
            self.mode
        )
    }
}

/// COUNT and BYTES, as pipespeed2 and pipespeed2t both take them.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct Blocks {
    /// Blocks to send; 500k means 500,000 (the article used 500k below
    /// about 100 bytes and 100k above)
    #[arg(value_parser = parse_count)]
    pub count: u64,

    /// Bytes per block, e.g. 64, 4096, 4k, 1M (the article went from 1 to
    /// 4k)
    #[arg(value_parser = labkit::limits::size_in(1, 1 << 30))]
    pub bytes: u64,
}

impl Blocks {
    /// `COUNT BYTES` on a command line, in digits.
    pub fn args(&self) -> [OsString; 2] {
        [self.count.to_string().into(), self.bytes.to_string().into()]
    }
}

/// Write a block of BYTES into a pipe and read it back, COUNT times, in one
/// thread (Bradford's pipespeed2), and print the rate in MB/s (10^6 bytes).
/// A block larger than the pipe's buffer is refused, since one thread would
/// wait forever. Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    #[command(flatten)]
    pub blocks: Blocks,

    /// Ask for a pipe buffer of this size (F_SETPIPE_SZ; the kernel rounds
    /// up to a power of two pages) [default: the kernel's, F_GETPIPE_SZ]
    #[arg(long, value_name = "BYTES", value_parser = size_in(1, 1 << 30))]
    pub pipe_size: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// `pipespeed2 COUNT BYTES`: no other option.
    pub fn new(count: u64, bytes: u64) -> Options {
        Options { blocks: Blocks { count, bytes }, pipe_size: None, json: false }
    }

    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `COUNT BYTES [--json] [--pipe-size BYTES]`, sizes
    /// in digits.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = self.blocks.args().to_vec();
        if self.json {
            args.push("--json".into());
        }
        if let Some(bytes) = self.pipe_size {
            args.extend(["--pipe-size".into(), bytes.to_string().into()]);
        }
        args
    }

    /// The C twin's command line for the same run (`c/pipespeed2.c`, which
    /// takes the pipe's size by position): `COUNT BYTES [PIPE_SIZE]
    /// [--json]`.
    pub fn c_args(&self) -> Vec<OsString> {
        let mut args = self.blocks.args().to_vec();
        args.extend(self.pipe_size.map(|bytes| bytes.to_string().into()));
        if self.json {
            args.push("--json".into());
        }
        args
    }
}

/// Parse a block count the way the article's script wrote them: `500k` is
/// 500,000 and `1m` a million (decimal, unlike sizes).
pub fn parse_count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000),
        _ => (t, 1),
    };
    let bad = || format!("'{text}' is not a count (examples: 1000, 100k, 1m)");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    match n.checked_mul(mult) {
        Some(0) => Err(format!("'{text}': the count must be at least 1")),
        Some(n) if n <= 1_000_000_000_000 => Ok(n),
        _ => Err(format!("'{text}' is too large (at most 10^12 blocks)")),
    }
}

/// The block every program sends: bytes that are not all equal and do not
/// repeat with a power-of-two period, so a lost or repeated piece shows.
/// Page-aligned, as every buffer the pipe programs copy (see
/// [`PageAligned`]).
pub fn pattern(block: usize) -> PageAligned {
    let mut data = PageAligned::zeroed(block);
    fill(&mut data);
    data
}

/// Write the pattern into `block` (see [`pattern`]).
pub fn fill(block: &mut [u8]) {
    for (i, byte) in block.iter_mut().enumerate() {
        *byte = (i % 251) as u8 ^ 0x5a;
    }
}

/// The two buffers each program needs, [`pattern`] and one to read into,
/// allocated fallibly since the user chose the size: `pipespeed2t 2 1G`
/// under a low `RLIMIT_AS` is an exit 1 that names the size, not an abort.
pub fn buffers(block: u64) -> Result<(PageAligned, PageAligned)> {
    let fail = |errno| {
        Error::failed(format!(
            "cannot allocate two {} buffers (the block and the one it is read \
             into): {}; nothing was started",
            labkit::limits::format_size(block),
            describe_errno(errno)
        ))
    };
    let len = usize::try_from(block).map_err(|_| fail(Errno::ENOMEM))?;
    let mut data = PageAligned::try_zeroed(len).map_err(fail)?;
    fill(&mut data);
    let back = PageAligned::try_zeroed(len).map_err(fail)?;
    Ok((data, back))
}

/// Does `got`, which arrived at stream offset `offset`, match the stream
/// of repeated `block`s? (`got` is at most one block long.)
pub fn matches(block: &[u8], offset: u64, got: &[u8]) -> bool {
    let start = (offset % block.len() as u64) as usize;
    let first = got.len().min(block.len() - start);
    got[..first] == block[start..start + first]
        && got[first..] == block[..got.len() - first]
}

/// The pipe's buffer size in bytes (`F_GETPIPE_SZ`).
pub fn pipe_size(fd: impl AsFd) -> Result<u64> {
    fcntl(fd, FcntlArg::F_GETPIPE_SZ).map(|n| n as u64).map_err(|errno| {
        Error::failed(format!("fcntl(F_GETPIPE_SZ): {}", describe_errno(errno)))
    })
}

/// Ask for a pipe buffer of `asked` bytes (`F_SETPIPE_SZ`) and return what
/// the kernel granted (it rounds up to a power of two pages).
pub fn grow_pipe(fd: impl AsFd, asked: u64) -> Result<u64> {
    let Ok(size) = i32::try_from(asked) else {
        return Err(Error::usage(format!("--pipe-size {asked} is too large")));
    };
    match fcntl(&fd, FcntlArg::F_SETPIPE_SZ(size)) {
        Ok(granted) => Ok(granted as u64),
        Err(errno @ Errno::EPERM) => Err(Error::usage(format!(
            "cannot give the pipe a {asked}-byte buffer: fcntl(F_SETPIPE_SZ): {}; \
             unprivileged processes may ask for at most /proc/sys/fs/pipe-max-size \
             ({} bytes here)",
            describe_errno(errno),
            std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
                .map_or("unknown".into(), |s| s.trim().to_string())
        ))),
        Err(errno) => Err(Error::failed(format!(
            "cannot give the pipe a {asked}-byte buffer: fcntl(F_SETPIPE_SZ): {}",
            describe_errno(errno)
        ))),
    }
}

/// Write all of `buf`, going on after short writes and signals.
pub fn write_all(fd: impl AsFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        match nix::unistd::write(&fd, buf) {
            Ok(n) => buf = &buf[n..],
            Err(Errno::EINTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}

/// Fill `buf` from `fd`, going on after short reads; fewer bytes only at
/// end of file. Returns how many bytes were read.
pub fn read_full(fd: impl AsFd, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(&fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(got)
}

/// A new pipe, `(read end, write end)`, closed on exec.
pub fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|errno| Error::failed(format!("pipe: {}", describe_errno(errno))))
}

/// Open the pipe for one block of `block` bytes: grow it if asked, and
/// refuse a block that cannot fit, since one thread would wait forever.
fn open(block: u64, asked: Option<u64>) -> Result<(OwnedFd, OwnedFd, u64)> {
    // ANCHOR: refuse
    let (rx, tx) = pipe()?;
    let size = match asked {
        Some(asked) => grow_pipe(&tx, asked)?,
        None => pipe_size(&tx)?,
    };
    if block > size {
        let how = if asked.is_some() { "was granted" } else { "has" };
        return Err(Error::usage(format!(
            "a {block}-byte block does not fit: the pipe {how} a {size}-byte buffer, \
             and a single thread writing more than that would wait forever for a \
             reader; use --pipe-size {block} or a smaller block (or pipespeed2t, \
             which reads in a second thread)"
        )));
    }
    // ANCHOR_END: refuse
    // Belt and braces: should the kernel take less than the block after
    // all, a non-blocking write fails instead of hanging.
    fcntl(&tx, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(|errno| {
        Error::failed(format!(
            "fcntl(F_SETFL, O_NONBLOCK): {}",
            describe_errno(errno)
        ))
    })?;
    Ok((rx, tx, size))
}

/// Write a block of `block` bytes into a pipe and read it back, `count`
/// times, in this one thread.
pub fn run(count: u64, block: u64, pipe_size: Option<u64>) -> Result<Report> {
    let Some(total) = count.checked_mul(block) else {
        return Err(Error::usage(format!("{count} x {block} bytes is too many")));
    };
    let (rx, tx, size) = open(block, pipe_size)?;
    let (data, mut back) = buffers(block)?;
    let start = Instant::now();

    // ANCHOR: loop
    for i in 0..count {
        match nix::unistd::write(&tx, &data) {
            Ok(n) if n == data.len() => {}
            Ok(n) => return Err(short(i * block, total, "write", n, block)),
            Err(errno) => return Err(failed(i * block, total, "write", errno)),
        }
        match read_full(&rx, &mut back) {
            Ok(n) if n == back.len() => {}
            Ok(n) => return Err(short(i * block, total, "read", n, block)),
            Err(errno) => return Err(failed(i * block, total, "read", errno)),
        }
    }
    // ANCHOR_END: loop

    let elapsed_s = start.elapsed().as_secs_f64();
    if back[..] != data[..] {
        return Err(Error::failed(
            "the block read back differs from the block written",
        ));
    }
    Ok(Report {
        program: "pipespeed2".into(),
        transport: "pipe".into(),
        mode: "single thread".into(),
        count,
        block_bytes: block,
        bytes: total,
        elapsed_s,
        mb_per_s: total as f64 / elapsed_s / MB,
        pipe_size: Some(size),
        verified: true,
        cpus: None,
    })
}

fn failed(done: u64, total: u64, call: &str, errno: Errno) -> Error {
    Error::failed(format!(
        "{call} after {done} of {total} bytes: {}",
        describe_errno(errno)
    ))
}

fn short(done: u64, total: u64, call: &str, n: usize, block: u64) -> Error {
    Error::failed(format!(
        "{call} moved only {n} of a {block}-byte block after {done} of {total} bytes"
    ))
}
