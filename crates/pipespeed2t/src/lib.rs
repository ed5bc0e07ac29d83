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

use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sched::{CpuSet, sched_getcpu, sched_setaffinity};
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, munmap};
use nix::unistd::{ForkResult, Pid, fork};
use pipespeed2::{MB, Report, buffers, grow_pipe, matches, pipe_size, write_all};

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

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Options {
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

/// What the reader saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    pub bytes: u64,
    /// Stream offset of the first read that did not match, if any.
    pub mismatch_at: Option<u64>,
}

/// Create the channel: `(read end, write end, pipe buffer size)`.
fn channel(opts: &Options) -> Result<(OwnedFd, OwnedFd, Option<u64>)> {
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
pub fn run(opts: &Options) -> Result<Report> {
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

    fn opts(block: u64, transport: Transport, processes: bool) -> Options {
        Options {
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
            let o = Options {
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
        let o = Options {
            reader_stops_after: Some(10),
            ..opts(4096, Transport::Pipe, false)
        };
        let err = run(&Options { count: 1000, ..o }).unwrap_err();
        assert!(err.message.contains("EPIPE"), "{err}");
    }
}
