//! `pipespeed2t`: a writer and a reader move COUNT blocks through a pipe.
//!
//! Reproduces `pipespeed2t.cpp` from E. G. Bradford's article on pipes in
//! Windows 2000, Windows XP and Linux (book References: bradford-2001): the first
//! thread writes COUNT blocks of BYTES into a pipe, a second thread reads
//! them; timing ends when every byte has been read and the reader has
//! ended. Unlike `pipespeed2`, blocks may be larger than the pipe's buffer:
//! the two threads take turns, and each turn costs a wake-up and often a
//! context switch.
//!
//! What it does differently, on purpose:
//! - The reader checks every byte against the stream it should receive
//!   (a repeated, non-periodic block) and counts them; a mismatch or a
//!   short count fails the run (exit 1).
//! - The article's follow-up questions are one flag away: `--fifo` (a named
//!   pipe in a temporary directory, removed at once), `--pipe-size`
//!   (`F_SETPIPE_SZ`), `--socketpair` (a Unix stream socket pair instead of
//!   a pipe), `--processes` (the reader is a forked child process) and
//!   `--vmsplice` (the writer hands its pages to the pipe instead of
//!   copying them, to see what one copy less buys).
//! - `--cpus A,B` pins the writer to CPU A (before the clock starts) and
//!   the reader (thread or child process) to CPU B (first thing it does):
//!   `--cpus 0,0` puts both on one CPU, where every hand-off is a context
//!   switch, `--cpus 0,1` one on each, where every hand-off is a wake-up
//!   across CPUs. Unpinned, a run lands on either, which is why unpinned
//!   rates scatter. The report then names the CPU each loop ended on
//!   (`cpus`).
//! - A reader that goes away early gives the writer `EPIPE`, reported in
//!   one line: Rust programs ignore `SIGPIPE`, so the writer is not killed
//!   by it, and it still joins the reader (or reaps the child).
//! - `--method write|vmsplice|splice-null` (with `--pipe-size` and
//!   `--huge-pages`) runs the ladder instead ([`ladder`]): one change at a
//!   time from the article's loop towards the limit of memory copying,
//!   every block checked by sequence number and checksum.

pub mod copy;
pub mod ladder;
mod ring;

use std::ffi::OsString;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

use clap::Parser;
use labkit::error::{Error, Result, describe_errno};
use labkit::limits::size_in;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sched::{CpuSet, sched_getcpu, sched_setaffinity};
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, munmap};
use nix::unistd::{ForkResult, Pid, fork};
use pipespeed2::{
    Blocks, MB, Report, buffers, grow_pipe, matches, pipe_size, write_all,
};

use ladder::{Check, Method};

/// What carries the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// An unnamed pipe, `pipe(2)`.
    Pipe,
    /// A named pipe, `mkfifo(3)`, in a temporary directory.
    Fifo,
    /// A Unix stream socket pair, `socketpair(2)`.
    Socketpair,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Fifo => "fifo",
            Transport::Socketpair => "socketpair",
        }
    }
}

/// One run's settings: what [`run`] takes, made from the command line
/// by [`Options::settings`].
#[derive(Clone, Debug)]
pub struct Settings {
    pub count: u64,
    pub block: u64,
    pub transport: Transport,
    /// `F_SETPIPE_SZ` for a pipe or fifo.
    pub pipe_size: Option<u64>,
    /// The reader is a child process instead of a thread.
    pub processes: bool,
    /// The writer gives its pages to the pipe with `vmsplice(2)` instead of
    /// copying them with `write(2)` (pipes and fifos only).
    pub vmsplice: bool,
    /// Fault drill: the reader closes its end after this many bytes.
    pub reader_stops_after: Option<u64>,
    /// Pin the writer to the first CPU and the reader to the second.
    pub cpus: Option<[usize; 2]>,
}

/// A size in bytes as a command line wrote it (`1M`, `1048576`): the
/// program reads its bytes, and [`Options::args`] writes it again in the
/// same words, so that a caller says a size as it always did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    bytes: u64,
    text: String,
}

impl Size {
    /// `n` MiB, written `nM`.
    pub fn mib(n: u64) -> Size {
        Size { bytes: n << 20, text: format!("{n}M") }
    }

    /// The bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A clap value parser for sizes within `min..=max` bytes, as
    /// [`size_in`] reads them (with its messages), keeping the text.
    pub fn parser(
        min: u64,
        max: u64,
    ) -> impl Fn(&str) -> Result<Size, String> + Clone {
        let bytes = size_in(min, max);
        move |text| Ok(Size { bytes: bytes(text)?, text: text.into() })
    }
}

impl From<u64> for Size {
    /// `bytes`, written in digits.
    fn from(bytes: u64) -> Size {
        Size { bytes, text: bytes.to_string() }
    }
}

/// Write COUNT blocks of BYTES into a pipe from one thread while a second
/// thread reads them (Bradford's pipespeed2t); the clock stops when every
/// byte has been read, checked and the reader joined. Prints the rate in
/// MB/s (10^6 bytes). Exit status: 0 ok, 1 failed (including bytes lost or
/// changed, or a reader that went away), 2 bad usage.
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(version)]
pub struct Options {
    #[command(flatten)]
    pub blocks: Blocks,

    /// Use a named pipe (mkfifo in a temporary directory) instead of an
    /// unnamed one [default: unnamed pipe]
    #[arg(long, conflicts_with = "socketpair")]
    pub fifo: bool,

    /// Use a Unix stream socket pair instead of a pipe
    #[arg(long)]
    pub socketpair: bool,

    /// Ask for a pipe buffer of this size (F_SETPIPE_SZ; the kernel rounds
    /// up to a power of two pages) [default: the kernel's, F_GETPIPE_SZ]
    #[arg(long, value_name = "BYTES", value_parser = Size::parser(1, 1 << 30),
          conflicts_with = "socketpair")]
    pub pipe_size: Option<Size>,

    /// Read in a forked child process instead of a second thread
    #[arg(long)]
    pub processes: bool,

    /// Write with vmsplice(2): the pipe takes the writer's pages instead of
    /// a copy, so each byte is copied once (by the reader), not twice
    #[arg(long, conflicts_with = "socketpair")]
    pub vmsplice: bool,

    /// Run a rung of the pipe ladder instead of the article's loop: blocks
    /// from a ring of page-aligned buffers, each stamped with its sequence
    /// number; the reader checks the number and a checksum of every block
    /// (write, vmsplice), or splices them to /dev/null unchecked
    /// (splice-null, reported as not verified). A pipe and threads only.
    #[arg(long, value_enum,
          conflicts_with_all = ["fifo", "socketpair", "processes", "vmsplice",
                                "reader_stops_after"])]
    pub method: Option<Method>,

    /// With --method: back the ring and the reader's buffer with huge pages
    /// (MAP_HUGETLB if the kernel has a pool, else MADV_HUGEPAGE; the
    /// report says which took)
    #[arg(long, requires = "method")]
    pub huge_pages: bool,

    /// With --method: slots in the writer's ring; vmsplice refuses fewer
    /// than the pipe's capacity in blocks plus two [default: 1 for write,
    /// that least for vmsplice]
    #[arg(long, value_name = "SLOTS", requires = "method",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub ring: Option<u64>,

    /// With --method: what the reader checks in every block
    #[arg(long, value_enum, default_value_t = Check::Checksum, requires = "method")]
    pub check: Check,

    /// With --method: make both ends non-blocking and spin on EAGAIN
    /// instead of sleeping (no wake-ups, two CPUs busy; compare the CPU
    /// time in --json)
    #[arg(long, requires = "method")]
    pub busy_poll: bool,

    /// Pin the writer to CPU A and the reader (thread, or child process with
    /// --processes) to CPU B: A,A puts both on one CPU, A,B one on each;
    /// the report then says where each loop ended [default: where the
    /// scheduler puts them]
    #[arg(long, value_name = "A,B", value_parser = parse_cpus,
          conflicts_with = "method")]
    pub cpus: Option<[usize; 2]>,

    /// Fault drill: the reader closes its end after this many bytes, so the
    /// writer meets EPIPE (the run then fails, exit 1) [default: never]
    #[arg(long, value_name = "BYTES", value_parser = labkit::limits::parse_size)]
    pub reader_stops_after: Option<u64>,

    /// Print one JSON object instead of the line
    #[arg(long)]
    pub json: bool,
}

/// `A,B`: two CPUs (the same one twice for one CPU), each one this process
/// may run on.
fn parse_cpus(text: &str) -> Result<[usize; 2], String> {
    let bad = || format!("'{text}' is not two CPUs like 0,1 or 0,0");
    let (a, b) = text.split_once(',').ok_or_else(bad)?;
    let cpu = |c: &str| c.trim().parse::<usize>().map_err(|_| bad());
    let cpus = [cpu(a)?, cpu(b)?];
    labkit::affinity::check_allowed(&cpus).map_err(|e| e.message)?;
    Ok(cpus)
}

impl Options {
    /// `pipespeed2t COUNT BYTES`: a pipe between two threads, every other
    /// option at its default.
    pub fn new(count: u64, bytes: u64) -> Options {
        Options {
            blocks: Blocks { count, bytes },
            fifo: false,
            socketpair: false,
            pipe_size: None,
            processes: false,
            vmsplice: false,
            method: None,
            huge_pages: false,
            ring: None,
            check: Check::Checksum,
            busy_poll: false,
            cpus: None,
            reader_stops_after: None,
            json: false,
        }
    }

    /// What carries the bytes: `--fifo`, `--socketpair`, or a pipe.
    pub fn transport(&self) -> Transport {
        match (self.fifo, self.socketpair) {
            (true, _) => Transport::Fifo,
            (_, true) => Transport::Socketpair,
            _ => Transport::Pipe,
        }
    }

    /// The article's loop's settings (what [`run`] takes).
    pub fn settings(&self) -> Settings {
        Settings {
            count: self.blocks.count,
            block: self.blocks.bytes,
            transport: self.transport(),
            pipe_size: self.pipe_size.as_ref().map(Size::bytes),
            processes: self.processes,
            vmsplice: self.vmsplice,
            reader_stops_after: self.reader_stops_after,
            cpus: self.cpus,
        }
    }

    /// With `--method`, the ladder's settings (what [`ladder::run`] takes)
    /// instead of the article's loop.
    pub fn ladder(&self) -> Option<ladder::Settings> {
        Some(ladder::Settings {
            count: self.blocks.count,
            block: self.blocks.bytes,
            method: self.method?,
            pipe_size: self.pipe_size.as_ref().map(Size::bytes),
            huge_pages: self.huge_pages,
            ring: self.ring,
            check: self.check,
            busy_poll: self.busy_poll,
        })
    }

    /// The program's command line for these options, as a caller (the
    /// runner) starts it: `COUNT BYTES`, then `--json`, then each option
    /// that is not at its default, in the order `--method`, `--fifo`,
    /// `--socketpair`, `--pipe-size` (as written), `--processes`,
    /// `--vmsplice`, `--huge-pages`, `--ring`, `--check`, `--busy-poll`,
    /// `--cpus A,B`, `--reader-stops-after`; numbers in digits.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = self.blocks.args().to_vec();
        let value = |name: &str, value: String| [name.into(), value.into()];
        if self.json {
            args.push("--json".into());
        }
        if let Some(method) = self.method {
            args.extend(value("--method", method.name().into()));
        }
        for (on, name) in [(self.fifo, "--fifo"), (self.socketpair, "--socketpair")]
        {
            if on {
                args.push(name.into());
            }
        }
        if let Some(size) = &self.pipe_size {
            args.extend(value("--pipe-size", size.text.clone()));
        }
        for (on, name) in [
            (self.processes, "--processes"),
            (self.vmsplice, "--vmsplice"),
            (self.huge_pages, "--huge-pages"),
        ] {
            if on {
                args.push(name.into());
            }
        }
        if let Some(slots) = self.ring {
            args.extend(value("--ring", slots.to_string()));
        }
        if self.check != Check::Checksum {
            args.extend(value("--check", self.check.name().into()));
        }
        if self.busy_poll {
            args.push("--busy-poll".into());
        }
        if let Some([a, b]) = self.cpus {
            args.extend(value("--cpus", format!("{a},{b}")));
        }
        if let Some(bytes) = self.reader_stops_after {
            args.extend(value("--reader-stops-after", bytes.to_string()));
        }
        args
    }

    /// The C twin's command line for the same run (`c/pipespeed2t.c`, which
    /// takes the pipe's size by position): `COUNT BYTES [PIPE_SIZE]
    /// [--json]`, the size in digits.
    ///
    /// # Panics
    ///
    /// If any other option is set: the C program has only a pipe between
    /// two threads.
    pub fn c_args(&self) -> Vec<OsString> {
        let plain = Options {
            pipe_size: self.pipe_size.clone(),
            json: self.json,
            ..Options::new(self.blocks.count, self.blocks.bytes)
        };
        assert!(
            *self == plain,
            "pipespeed2t.c takes COUNT BYTES [PIPE_SIZE] [--json] only: {self:?}"
        );
        let mut args = self.blocks.args().to_vec();
        args.extend(self.pipe_size.as_ref().map(|s| s.bytes.to_string().into()));
        if self.json {
            args.push("--json".into());
        }
        args
    }
}

/// What the reader saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    pub bytes: u64,
    /// Stream offset of the first read that did not match, if any.
    pub mismatch_at: Option<u64>,
}

/// Create the channel: `(read end, write end, pipe buffer size)`.
fn channel(opts: &Settings) -> Result<(OwnedFd, OwnedFd, Option<u64>)> {
    let (rx, tx) = match opts.transport {
        Transport::Pipe => pipespeed2::pipe()?,
        Transport::Fifo => fifo()?,
        Transport::Socketpair => {
            let (a, b) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| Error::io("socketpair", e))?;
            (OwnedFd::from(b), OwnedFd::from(a))
        }
    };
    let size = match (opts.transport, opts.pipe_size) {
        (Transport::Socketpair, _) => None,
        (_, Some(asked)) => Some(grow_pipe(&tx, asked)?),
        (_, None) => Some(pipe_size(&tx)?),
    };
    Ok((rx, tx, size))
}

/// A named pipe with both ends open, in a temporary directory that is gone
/// again before the first byte moves.
fn fifo() -> Result<(OwnedFd, OwnedFd)> {
    let dir = labkit::cleanup::tempdir("pipespeed2t-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let path = dir.path().join("fifo");
    nix::unistd::mkfifo(
        &path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .map_err(|errno| {
        Error::failed(format!(
            "mkfifo {}: {}",
            path.display(),
            describe_errno(errno)
        ))
    })?;
    let open = |write: bool, flags: i32| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(flags)
            .open(&path)
            .map(OwnedFd::from)
            .map_err(|e| Error::io(format!("open {}", path.display()), e))
    };
    // Opening a fifo blocks until the other end is open too: open the read
    // end non-blocking first (that returns at once), then the write end,
    // then make the read end blocking again.
    let rx = open(false, libc::O_NONBLOCK)?;
    let tx = open(true, 0)?;
    fcntl(&rx, FcntlArg::F_SETFL(OFlag::empty())).map_err(|errno| {
        Error::failed(format!("fcntl(F_SETFL): {}", describe_errno(errno)))
    })?;
    dir.close()
        .map_err(|e| Error::io("cannot remove the temporary directory", e))?;
    Ok((rx, tx))
}

// ANCHOR: reader
/// The reader: read blocks until end of file, count the bytes and check
/// each piece against the stream the writer sends.
fn read_all(
    rx: OwnedFd,
    block: &[u8],
    buf: &mut [u8],
    stop: u64,
) -> Result<Received, Errno> {
    let mut got = Received::default();
    while got.bytes < stop {
        let n = match nix::unistd::read(&rx, buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(errno) => return Err(errno),
        };
        if got.mismatch_at.is_none() && !matches(block, got.bytes, &buf[..n]) {
            got.mismatch_at = Some(got.bytes);
        }
        got.bytes += n as u64;
    }
    Ok(got) // dropping `rx` closes the read end
}
// ANCHOR_END: reader

/// Move `opts.count` blocks from this thread to a reader thread (or child
/// process) and report the rate.
pub fn run(opts: &Settings) -> Result<Report> {
    let Some(total) = opts.count.checked_mul(opts.block) else {
        return Err(Error::usage(format!(
            "{} x {} bytes is too many",
            opts.count, opts.block
        )));
    };
    // The reader (a forked child with --processes) must not panic: it
    // takes stream offsets modulo the block length.
    if opts.block == 0 {
        return Err(Error::usage("a block needs at least one byte"));
    }
    if opts.vmsplice && opts.transport == Transport::Socketpair {
        return Err(Error::usage(
            "vmsplice needs a pipe or a fifo, not a socket pair",
        ));
    }
    let (block, mut buf) = buffers(opts.block)?;
    let (rx, tx, size) = channel(opts)?;
    let stop = opts.reader_stops_after.unwrap_or(u64::MAX);
    if let Some([writer, _]) = opts.cpus {
        pin(Some(writer)).map_err(|errno| {
            Error::failed(format!(
                "cannot pin the writer to CPU {writer}: {}",
                describe_errno(errno)
            ))
        })?;
    }
    let start = Instant::now();
    let job = Job {
        rx,
        tx,
        block: &block,
        buf: &mut buf,
        count: opts.count,
        stop,
        gift: opts.vmsplice,
        reader_cpu: opts.cpus.map(|[_, reader]| reader),
    };
    let (written, received) =
        if opts.processes { with_process(job)? } else { with_thread(job) };
    let elapsed_s = start.elapsed().as_secs_f64();

    let what = format!(
        "{} {}",
        opts.transport.name(),
        if opts.processes { "reader process" } else { "reader thread" }
    );
    // The reader's own failure is the cause of anything the writer saw.
    let (got, reader_cpu) = received?;
    match written {
        Err(errno @ (Errno::EPIPE | Errno::ECONNRESET)) => {
            return Err(Error::failed(format!(
                "the {what} went away after reading {} of {total} bytes: write: {}; \
                 the writer stopped (SIGPIPE is ignored, so it was told, not killed)",
                got.bytes,
                describe_errno(errno)
            )));
        }
        Err(errno) => {
            return Err(Error::failed(format!("write: {}", describe_errno(errno))));
        }
        Ok(_) => {}
    }
    if let Some(at) = got.mismatch_at {
        return Err(Error::failed(format!(
            "the {what} received different bytes from those written, from stream \
             offset {at} on"
        )));
    }
    if got.bytes != total {
        return Err(Error::failed(format!(
            "the {what} received {} of {total} bytes",
            got.bytes
        )));
    }
    Ok(Report {
        program: "pipespeed2t".into(),
        transport: opts.transport.name().into(),
        mode: match (opts.processes, opts.vmsplice) {
            (false, false) => "threads",
            (true, false) => "processes",
            (false, true) => "threads, vmsplice",
            (true, true) => "processes, vmsplice",
        }
        .into(),
        count: opts.count,
        block_bytes: opts.block,
        bytes: total,
        elapsed_s,
        mb_per_s: total as f64 / elapsed_s / MB,
        pipe_size: size,
        verified: true,
        cpus: opts.cpus.and(written.ok()).map(|writer| [writer, reader_cpu]),
    })
}

/// Pin the calling thread to `cpu` (none: leave it where it is). No
/// allocation: a forked child may call it.
fn pin(cpu: Option<usize>) -> Result<(), Errno> {
    let Some(cpu) = cpu else { return Ok(()) };
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)
}

/// The CPU the calling thread runs on now (0 if the kernel will not say).
fn cpu_now() -> usize {
    sched_getcpu().unwrap_or(0)
}

/// The writer's loop: `count` whole blocks, then close the write end so
/// the reader sees end of file; the CPU it ended on.
fn write_blocks(
    tx: OwnedFd,
    block: &[u8],
    count: u64,
    gift: bool,
) -> Result<usize, Errno> {
    // ANCHOR: writer
    for _ in 0..count {
        if gift { vmsplice_all(&tx, block)? } else { write_all(&tx, block)? }
    }
    // ANCHOR_END: writer
    Ok(cpu_now()) // dropping `tx` closes the write end: the reader sees end of file
}

// ANCHOR: vmsplice
/// Hand the pages of `buf` to the pipe instead of copying them in
/// (`vmsplice(2)`): the reader's `read` is then the only copy. Safe here
/// only because the block never changes while the pipe still refers to it.
fn vmsplice_all(fd: &OwnedFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one valid iovec describing `buf`, which outlives the
        // transfer (the block lives until the reader has ended), and is
        // never written to (vmsplice only reads it).
        let n = unsafe { libc::vmsplice(fd.as_raw_fd(), &iov, 1, 0) };
        match Errno::result(n) {
            Ok(n) => buf = &buf[n as usize..],
            Err(Errno::EINTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}
// ANCHOR_END: vmsplice

/// What the writer and the reader are given: the two ends, the block to
/// send `count` times (given to the pipe with vmsplice if `gift`), the
/// buffer to read into, where the reader stops (the fault drill) and the
/// CPU it is pinned to.
struct Job<'a> {
    rx: OwnedFd,
    tx: OwnedFd,
    block: &'a [u8],
    buf: &'a mut [u8],
    count: u64,
    stop: u64,
    gift: bool,
    reader_cpu: Option<usize>,
}

/// What the writer saw, and what the reader received, each with the CPU
/// its loop ended on.
type Outcome = (Result<usize, Errno>, Result<(Received, usize)>);

/// The article's way: the reader is a second thread, joined before the
/// clock stops (the C program's `pthread_create` and `pthread_join`).
fn with_thread(job: Job<'_>) -> Outcome {
    let Job { rx, tx, block, buf, count, stop, gift, reader_cpu } = job;
    // ANCHOR: spawn
    let (written, received) = std::thread::scope(|s| {
        let reader = s.spawn(|| reader_thread(rx, block, buf, stop, reader_cpu));
        let written = write_blocks(tx, block, count, gift);
        (written, reader.join())
    });
    // ANCHOR_END: spawn
    let received = received
        .unwrap_or_else(|_| Err(Error::failed("the reader thread panicked")));
    (written, received)
}

/// The reader thread: pinned to `cpu` if asked, [`read_all`], and the CPU
/// it ended on.
fn reader_thread(
    rx: OwnedFd,
    block: &[u8],
    buf: &mut [u8],
    stop: u64,
    cpu: Option<usize>,
) -> Result<(Received, usize)> {
    let fail = |what: String, errno| {
        Error::failed(format!("reader thread: {what}: {}", describe_errno(errno)))
    };
    pin(cpu).map_err(|e| fail(format!("cannot pin it to CPU {cpu:?}"), e))?;
    let got = read_all(rx, block, buf, stop).map_err(|e| fail("read".into(), e))?;
    Ok((got, cpu_now()))
}

/// What the reader child leaves for its parent, in a shared page.
#[repr(C)]
struct Shared {
    bytes: u64,
    /// `u64::MAX`: no mismatch.
    mismatch_at: u64,
    errno: i32,
    /// The CPU its loop ended on.
    cpu: u32,
}

/// The reader is a forked child process, reaped before the clock stops;
/// it tells what it received through a shared anonymous page.
fn with_process(job: Job<'_>) -> Result<Outcome> {
    let Job { rx, tx, block, buf, count, stop, gift, reader_cpu } = job;
    let len = NonZeroUsize::new(std::mem::size_of::<Shared>()).expect("not empty");
    // SAFETY: a fresh anonymous mapping, shared with the child to come;
    // mmap zero-fills it, which is a valid `Shared`.
    let page = unsafe {
        mmap_anonymous(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED,
        )
    }
    .map_err(|errno| Error::failed(format!("mmap: {}", describe_errno(errno))))?;
    let shared = page.cast::<Shared>();
    // SAFETY: the child only closes descriptors, sets its CPU, reads,
    // compares memory, stores into the shared page and leaves with _exit,
    // all async-signal-safe, and allocates nothing (`buf` exists already),
    // so it is sound even if the parent has a second thread.
    let child = match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            drop(tx);
            let read = pin(reader_cpu).and_then(|()| read_all(rx, block, buf, stop));
            let (got, errno) = match read {
                Ok(got) => (got, 0),
                Err(errno) => (Received::default(), errno as i32),
            };
            let report = Shared {
                bytes: got.bytes,
                mismatch_at: got.mismatch_at.unwrap_or(u64::MAX),
                errno,
                cpu: cpu_now() as u32,
            };
            // SAFETY: the page is mapped, aligned and only this process
            // writes it; the parent reads it after reaping us.
            unsafe { shared.as_ptr().write_volatile(report) };
            // SAFETY: _exit ends the child at once; nothing is left to run.
            unsafe { libc::_exit(0) }
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(errno) => {
            // SAFETY: the mapping made above, unused by anyone else.
            let _ = unsafe { munmap(page, len.get()) };
            return Err(Error::failed(format!("fork: {}", describe_errno(errno))));
        }
    };
    drop(rx);
    let written = write_blocks(tx, block, count, gift);
    let status = labkit::children::wait4(child.as_raw(), 0);
    let received = match status {
        Ok(Some((status, _))) if status.success() => {
            // SAFETY: the child exited and was reaped, so nobody writes the
            // page any more; it wrote the whole `Shared` before `_exit`,
            // and the page is mapped and aligned.
            let report = unsafe { shared.as_ptr().read_volatile() };
            if report.errno != 0 {
                Err(Error::failed(format!(
                    "reader process: {}: {}",
                    if reader_cpu.is_some() { "pin or read" } else { "read" },
                    describe_errno(Errno::from_raw(report.errno))
                )))
            } else {
                let got = Received {
                    bytes: report.bytes,
                    mismatch_at: (report.mismatch_at != u64::MAX)
                        .then_some(report.mismatch_at),
                };
                Ok((got, report.cpu as usize))
            }
        }
        Ok(Some((status, _))) => Err(Error::failed(format!(
            "the reader process ended unexpectedly: {status}"
        ))),
        Ok(None) => Err(Error::failed("wait4 found the reader process running")),
        Err(e) => Err(Error::io(format!("wait4({child})"), e)),
    };
    // SAFETY: the mapping made above, unmapped once; the page was only read
    // (into a copy) if the child had been reaped. A child that could not be
    // reaped keeps its own mapping of the page.
    let _ = unsafe { munmap(page, len.get()) };
    Ok((written, received))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipespeed2::pattern;

    #[test]
    fn options_say_the_runners_command_lines() {
        let o = |count, bytes| Options { json: true, ..Options::new(count, bytes) };
        assert_eq!(labtest::words(o(20_000, 64).args()), ["20000", "64", "--json"]);
        assert_eq!(
            labtest::words(o(20_000, 64).c_args()),
            ["20000", "64", "--json"]
        );
        // The grid's forms, one at each placement.
        let forms = [
            (
                Options { pipe_size: Some(Size::mib(1)), ..o(16, 4096) },
                "--pipe-size 1M",
            ),
            (Options { fifo: true, ..o(16, 4096) }, "--fifo"),
            (Options { processes: true, ..o(16, 4096) }, "--processes"),
            (Options { socketpair: true, ..o(16, 4096) }, "--socketpair"),
            (
                Options { vmsplice: true, cpus: Some([0, 1]), ..o(16, 4096) },
                "--vmsplice --cpus 0,1",
            ),
        ];
        for (o, flags) in forms {
            assert_eq!(labtest::line(o.args()), format!("16 4096 --json {flags}"));
        }
        // The ladder's rungs: the big pipe's size in digits, as measured.
        let rung = Options {
            method: Some(Method::Vmsplice),
            pipe_size: Some(Size::from(1 << 20)),
            huge_pages: true,
            busy_poll: true,
            ..o(512, 65536)
        };
        assert_eq!(
            labtest::words(rung.args()),
            [
                "512",
                "65536",
                "--json",
                "--method",
                "vmsplice",
                "--pipe-size",
                "1048576",
                "--huge-pages",
                "--busy-poll"
            ]
        );
        let o = Options { pipe_size: Some(Size::mib(1)), ..o(16, 4096) };
        assert_eq!(labtest::words(o.c_args()), ["16", "4096", "1048576", "--json"]);
    }

    #[test]
    #[should_panic(expected = "pipespeed2t.c takes COUNT BYTES")]
    fn the_c_program_is_never_asked_for_a_fifo() {
        Options { fifo: true, ..Options::new(1, 1) }.c_args();
    }

    #[test]
    fn options_parse_back_from_their_args() {
        let least = labtest::parse::<Options>("pipespeed2t", &["1", "1"]).unwrap();
        assert_eq!(least, Options::new(1, 1));
        let o = |count, bytes| Options { json: true, ..Options::new(count, bytes) };
        let written = Size::parser(1, 1 << 30)("64KiB").unwrap();
        assert_eq!((written.bytes(), written.text.as_str()), (65536, "64KiB"));
        for o in [
            least,
            o(500_000, 1),
            Options { fifo: true, pipe_size: Some(Size::mib(1)), ..o(7, 4096) },
            Options {
                pipe_size: Some(written),
                vmsplice: true,
                processes: true,
                ..o(7, 8)
            },
            Options { socketpair: true, cpus: Some([0, 0]), ..o(3, 3) },
            Options { reader_stops_after: Some(5000), ..Options::new(9, 1 << 20) },
            Options {
                method: Some(Method::SpliceNull),
                pipe_size: Some(Size::from(1 << 20)),
                huge_pages: true,
                ring: Some(40),
                check: Check::Bytes,
                busy_poll: true,
                ..o(100, 65536)
            },
            Options { method: Some(Method::Write), ..o(100, 4096) },
        ] {
            labtest::parses_back("pipespeed2t", &o, o.args());
        }
    }

    #[test]
    fn the_method_and_check_names_are_claps() {
        use clap::ValueEnum;
        for m in Method::value_variants() {
            assert_eq!(m.to_possible_value().unwrap().get_name(), m.name());
        }
        for c in Check::value_variants() {
            assert_eq!(c.to_possible_value().unwrap().get_name(), c.name());
        }
    }

    #[test]
    fn the_options_give_the_settings_each_run_takes() {
        let o = Options {
            fifo: true,
            pipe_size: Some(Size::mib(1)),
            ..Options::new(7, 8)
        };
        let s = o.settings();
        assert_eq!((s.count, s.block, s.transport), (7, 8, Transport::Fifo));
        assert_eq!(s.pipe_size, Some(1 << 20));
        assert!(o.ladder().is_none());
        let o = Options { method: Some(Method::Write), ring: Some(3), ..o };
        let l = o.ladder().unwrap();
        assert_eq!(
            (l.method, l.ring, l.pipe_size),
            (Method::Write, Some(3), Some(1 << 20))
        );
        let transport = |fifo, socketpair| {
            Options { fifo, socketpair, ..Options::new(1, 1) }.transport()
        };
        assert_eq!(transport(false, false), Transport::Pipe);
        assert_eq!(transport(false, true), Transport::Socketpair);
    }

    fn opts(block: u64, transport: Transport, processes: bool) -> Settings {
        Settings {
            count: 7,
            block,
            transport,
            pipe_size: None,
            processes,
            vmsplice: false,
            reader_stops_after: None,
            cpus: None,
        }
    }

    #[test]
    fn threads_move_every_byte() {
        for transport in [Transport::Pipe, Transport::Fifo, Transport::Socketpair] {
            let r = run(&opts(65537, transport, false)).unwrap();
            assert_eq!(r.bytes, 7 * 65537);
            assert_eq!(r.pipe_size.is_none(), transport == Transport::Socketpair);
        }
    }

    #[test]
    fn the_reader_catches_lost_and_changed_bytes() {
        let block = pattern(100);
        let mut buf = vec![0u8; 100];
        let (rx, tx) = pipespeed2::pipe().unwrap();
        // One whole block, then a block missing its first byte.
        write_all(&tx, &block).unwrap();
        write_all(&tx, &block[1..]).unwrap();
        drop(tx);
        let got = read_all(rx, &block, &mut buf, u64::MAX).unwrap();
        assert_eq!(got, Received { bytes: 199, mismatch_at: Some(100) });

        let (rx, tx) = pipespeed2::pipe().unwrap();
        write_all(&tx, &block).unwrap();
        drop(tx);
        let got = read_all(rx, &block, &mut buf, u64::MAX).unwrap();
        assert_eq!(got, Received { bytes: 100, mismatch_at: None });
    }

    #[test]
    fn a_zero_byte_block_is_refused_before_any_reader_starts() {
        for processes in [false, true] {
            let err = run(&opts(0, Transport::Pipe, processes)).unwrap_err();
            assert!(matches!(err.code, labkit::error::ExitCode::Usage), "{err}");
        }
    }

    #[test]
    fn pinned_parties_end_on_their_cpus() {
        let cpus = labkit::affinity::allowed_cpus().unwrap();
        let (a, b) = (cpus[0], *cpus.last().unwrap());
        for processes in [false, true] {
            let o = Settings {
                cpus: Some([a, b]),
                ..opts(4096, Transport::Pipe, processes)
            };
            assert_eq!(run(&o).unwrap().cpus, Some([a, b]));
        }
        assert_eq!(run(&opts(4096, Transport::Pipe, false)).unwrap().cpus, None);
    }

    #[test]
    fn a_reader_process_moves_every_byte() {
        for transport in [Transport::Pipe, Transport::Socketpair] {
            let r = run(&opts(4097, transport, true)).unwrap();
            assert_eq!(r.bytes, 7 * 4097);
        }
    }

    #[test]
    fn an_early_reader_exit_is_epipe() {
        let o = Settings {
            reader_stops_after: Some(10),
            ..opts(4096, Transport::Pipe, false)
        };
        let err = run(&Settings { count: 1000, ..o }).unwrap_err();
        assert!(err.message.contains("EPIPE"), "{err}");
    }
}
