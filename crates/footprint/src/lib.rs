//! `footprint`: what N idle threads, or N idle processes, really cost in
//! memory.
//!
//! Article 000 (book References: zhou-2010) opens with the folk wisdom it set
//! out to test: processes are "slow to create and heavy in memory and
//! resources", threads "light". The article measured time only; this
//! program measures the memory. It creates N workers that do nothing but
//! wait (each blocked in `read` on one pipe), and counts what they cost,
//! the way the kernel does:
//!
//! - `Pss` from `/proc/<pid>/smaps_rollup` of this process and of every
//!   child: resident memory with each shared page divided among the
//!   processes sharing it (summing `Rss` instead counts the shared library
//!   and program pages once per process);
//! - the kernel's own memory, from `/proc/meminfo` deltas: `KernelStack`
//!   (one kernel stack per task, thread or process), `PageTables` and
//!   `SUnreclaim` (task, memory map and file structures);
//! - `VmPTE` from `/proc/<pid>/status`: the page tables of each process
//!   (threads share their process's);
//! - `VmSize`, the address space reserved (a thread's 8 MiB stack is
//!   reserved, not resident).
//!
//! With `--touch BYTES` the parent first fills a buffer of that size, and
//! every worker then writes one byte to each of its pages: threads share
//! the buffer, so nothing is copied; each forked child gets its own copy of
//! every page it writes (copy-on-write).
//!
//! The figures are taken before the workers are created and when all of
//! them have started (and touched), so the deltas are the workers' own.
//! `/proc/meminfo` is machine-wide: other activity on the machine shows up
//! in its deltas, so repeat runs and take the median.
//!
//! A worker process that dies before it reports is an error (exit 1) that
//! names it; the others are released and reaped. SIGINT, SIGTERM and
//! SIGHUP are passed on to the workers, which are reaped (or joined); the
//! exit status is then 128 + N. Worker processes also ask for
//! `PR_SET_PDEATHSIG`, so none outlives a parent killed outright
//! ([`labkit::relay`] says why).

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Instant;

use clap::Parser;
use labkit::children::ended;
use labkit::error::{Error, Result, describe_errno, describe_io};
use labkit::limits::size_in;
use labkit::memory::Touched;
use labkit::pthread::{self, Attr, Start};
use nix::errno::Errno;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::{ForkResult, Pid, fork};
use serde::{Deserialize, Serialize};

/// Threads or processes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Threads,
    Procs,
}

impl Kind {
    /// Its `--kind` spelling: `threads` or `procs`.
    pub fn name(self) -> String {
        labkit::cli::spelling(&self)
    }
}

/// Create N idle threads or N idle processes and report what they cost in
/// memory (PSS and RSS from /proc/<pid>/smaps_rollup, kernel stacks, page
/// tables and slab from /proc/meminfo), per worker. Exit status: 0 ok,
/// 1 failed (a worker that died is named), 2 bad usage,
/// 128+N on signal N (SIGINT, SIGTERM, SIGHUP: passed on to the children,
/// which are reaped).
#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(version)]
pub struct Options {
    /// Threads or processes
    #[arg(long, value_enum, default_value_t = Kind::Threads)]
    pub kind: Kind,

    /// Workers to create
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub workers: u32,

    /// Fill a buffer of this size first, then let every worker write one
    /// byte to each of its pages (copy-on-write for processes)
    #[arg(long, value_name = "BYTES", default_value = "0",
          value_parser = size_in(0, 1 << 30))]
    pub touch: u64,

    /// Print the measurements as one JSON object
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// The program's command line for these options: `--json` if set, then
    /// `--kind`, `--workers` and `--touch` (in bytes), always.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if self.json {
            args.push("--json".into());
        }
        args.extend(["--kind".into(), self.kind.name().into()]);
        args.extend(["--workers".into(), self.workers.to_string().into()]);
        args.extend(["--touch".into(), self.touch.to_string().into()]);
        args
    }
}

/// Memory figures at one moment, KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Snapshot {
    /// Sum over this process and its children of `Pss`.
    pub pss_kib: u64,
    /// Sum of `Pss_Anon`: the anonymous part of it (no program or library
    /// pages, whose share also depends on who else maps those files).
    pub pss_anon_kib: u64,
    /// Sum of `Rss` (shared pages counted once per process).
    pub rss_kib: u64,
    /// Sum of `Private_Dirty`: pages only one process has written.
    pub private_dirty_kib: u64,
    /// Sum of `VmSize`: address space reserved.
    pub vm_size_kib: u64,
    /// Sum of `VmPTE`: each process's own page tables.
    pub vm_pte_kib: u64,
    /// Machine-wide `/proc/meminfo` fields.
    pub kernel_stack_kib: u64,
    pub page_tables_kib: u64,
    pub slab_unreclaimable_kib: u64,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Footprint {
    pub kind: Kind,
    pub workers: u32,
    pub touch_bytes: u64,
    /// Before any worker existed (the buffer, if any, already filled).
    pub before: Snapshot,
    /// With every worker started (and done touching).
    pub during: Snapshot,
    /// Seconds from the first creation until every worker reported in.
    pub ready_s: f64,
}

impl Footprint {
    /// `during - before` per worker, KiB (negative when the machine-wide
    /// figures fell because something else ended meanwhile).
    pub fn per_worker(&self, f: fn(&Snapshot) -> u64) -> f64 {
        (f(&self.during) as f64 - f(&self.before) as f64) / f64::from(self.workers)
    }
}

fn field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Add one process's figures (gone processes add nothing).
fn add_process(s: &mut Snapshot, pid: &str) {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default();
    s.pss_kib += field(&rollup, "Pss");
    s.pss_anon_kib += field(&rollup, "Pss_Anon");
    s.rss_kib += field(&rollup, "Rss");
    s.private_dirty_kib += field(&rollup, "Private_Dirty");
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.vm_size_kib += field(&status, "VmSize");
    s.vm_pte_kib += field(&status, "VmPTE");
}

/// This process, its `children`, and the machine's kernel figures now.
pub fn snapshot(children: &[Pid]) -> Snapshot {
    let mut s = Snapshot::default();
    add_process(&mut s, "self");
    for pid in children {
        add_process(&mut s, &pid.to_string());
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    s.kernel_stack_kib = field(&meminfo, "KernelStack");
    s.page_tables_kib = field(&meminfo, "PageTables");
    s.slab_unreclaimable_kib = field(&meminfo, "SUnreclaim");
    s
}

/// What every worker shares: the pipes and the buffer to touch.
struct Shared {
    /// Workers block reading this until every write end is closed.
    gate: File,
    /// Each worker writes one byte here once it has started and touched.
    done: OwnedFd,
    /// Resident before any worker exists; unmapped after all are gone.
    buffer: Touched,
}

// ANCHOR: worker
/// A worker's whole life: touch every page of the buffer, report in, wait
/// for the gate to close. Only write(2), read(2) and stores: a forked child
/// may run it.
fn worker(s: &Shared) -> i32 {
    // Atomic stores: threads writing the same pages at once do not race.
    // What counts is the page faults (a copy for each forked child).
    s.buffer.write_pages(2);
    let byte = 1u8;
    // SAFETY: a valid one-byte buffer and an open fd.
    if unsafe { libc::write(s.done.as_raw_fd(), (&raw const byte).cast(), 1) } != 1 {
        return Errno::last() as i32;
    }
    let mut got = 0u8;
    loop {
        // SAFETY: a valid one-byte buffer and an open fd.
        match unsafe { libc::read(s.gate.as_raw_fd(), (&raw mut got).cast(), 1) } {
            0 => return 0,
            n if n < 0 && Errno::last() != Errno::EINTR => {
                return Errno::last() as i32;
            }
            _ => {}
        }
    }
}
// ANCHOR_END: worker

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| {
        Error::failed(format!("cannot create a pipe: {}", describe_errno(e)))
    })
}

/// Create `workers` idle workers of `kind` (touching `touch` bytes each),
/// measure, then release and join or reap them all.
pub fn run(kind: Kind, workers: u32, touch: u64) -> Result<Footprint> {
    let len =
        usize::try_from(touch).map_err(|_| Error::usage("--touch is too large"))?;
    let (gate, opener) = pipe()?;
    let (reports, done) = pipe()?;
    let buffer = Touched::new(len).map_err(|e| {
        Error::failed(format!(
            "cannot map a {len}-byte buffer: {}",
            describe_errno(e)
        ))
    })?;
    let shared = Shared { gate: File::from(gate), done, buffer };
    // SIGINT, SIGTERM, SIGHUP: passed on to the workers, which are reaped
    // (or joined); the program then exits 128 + N (labkit::relay).
    labkit::relay::install(workers as usize);
    let before = snapshot(&[]);
    let start = Instant::now();
    let result = match kind {
        Kind::Threads => threads(&shared, workers, opener, &reports, start),
        Kind::Procs => procs(&shared, workers, opener, &reports, start),
    };
    drop(shared); // every worker has been joined or reaped
    let (during, ready_s) = result?;
    Ok(Footprint { kind, workers, touch_bytes: touch, before, during, ready_s })
}

/// Wait until `n` workers have written their byte on `reports`.
/// Wait for `n` one-byte reports. The parent holds the pipe's write end
/// (its threads need it), so a worker process that dies before it reports
/// would leave a plain `read` waiting forever: whenever nothing has come
/// for 100 ms, `dead` is asked for a worker that has ended. A signal
/// (SIGINT, SIGTERM, SIGHUP) stops the wait too.
fn await_reports(
    reports: &OwnedFd,
    n: u32,
    dead: impl Fn() -> Option<String>,
) -> Result<()> {
    let mut left = n as usize;
    let mut buf = [0u8; 4096];
    while left > 0 {
        if let Some(sig) = labkit::relay::pending() {
            return Err(labkit::relay::interrupted(sig, "waiting for the workers"));
        }
        let mut fd = libc::pollfd {
            fd: reports.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; poll only fills in `revents`.
        let ready = unsafe { libc::poll(&mut fd, 1, 100) };
        match Errno::result(ready) {
            Ok(0) => {
                if let Some(which) = dead() {
                    return Err(Error::failed(which));
                }
                continue;
            }
            Err(Errno::EINTR) => continue,
            Err(e) => {
                return Err(Error::failed(format!(
                    "waiting for the workers' reports: {}",
                    describe_errno(e)
                )));
            }
            Ok(_) => {}
        }
        match nix::unistd::read(reports, &mut buf[..left.min(4096)]) {
            Ok(0) => {
                return Err(Error::failed("the workers' report pipe closed early"));
            }
            Ok(k) => left -= k,
            Err(Errno::EINTR) => {}
            Err(e) => {
                return Err(Error::failed(format!(
                    "reading the workers' reports: {}",
                    describe_errno(e)
                )));
            }
        }
    }
    Ok(())
}

/// A worker process that has ended, found without reaping it (`WNOWAIT`),
/// named by its place among `children`.
fn dead_worker(children: &[Pid]) -> Option<String> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    let status = waitid(Id::All, flags).ok()?;
    let pid = status.pid()?;
    let i = children.iter().position(|&c| c == pid)?;
    // As wait(2) would have said it: the exit code in the second byte, a
    // signal in the first.
    let raw = match status {
        WaitStatus::Exited(_, code) => code << 8,
        WaitStatus::Signaled(_, sig, _) => sig as i32,
        _ => return None, // WEXITED reports nothing else
    };
    Some(format!(
        "worker {} of {} (pid {pid}) {} before it reported",
        i + 1,
        children.len(),
        labkit::children::ended(ExitStatus::from_raw(raw))
    ))
}

type Measured = Result<(Snapshot, f64)>;

/// Call `make` up to `n` times, until it fails or a signal came: what it
/// made, and the error that stopped it, if any.
fn create<T>(
    n: u32,
    mut make: impl FnMut() -> Result<T, Errno>,
) -> (Vec<T>, Option<Errno>) {
    let mut made = Vec::with_capacity(n as usize);
    while made.len() < n as usize && labkit::relay::pending().is_none() {
        match make() {
            Ok(one) => made.push(one),
            Err(e) => return (made, Some(e)),
        }
    }
    (made, None)
}

fn threads(
    shared: &Shared,
    n: u32,
    opener: OwnedFd,
    reports: &OwnedFd,
    start: Instant,
) -> Measured {
    let attr = Attr::default_stack();
    let job = Start { run: worker, data: shared };
    // SAFETY: `job` and `shared` outlive the threads, joined below.
    let (ids, failed) = create(n, || unsafe { pthread::spawn(&attr, &job) });
    let created = ids.len() as u32;
    let measured = match failed {
        None => await_reports(reports, n, || None).map(|()| {
            let ready = start.elapsed().as_secs_f64();
            (snapshot(&[]), ready)
        }),
        Some(e) => Err(Error::failed(format!(
            "created {created} of {n} threads; pthread_create: {}; joined the {created}",
            describe_errno(e)
        ))),
    };
    drop(opener);
    let bad = ids.into_iter().map(pthread::join).filter(|r| *r != Ok(0)).count();
    if let Some(sig) = labkit::relay::pending() {
        let done = format!("released and joined the {created} threads");
        return Err(labkit::relay::interrupted(sig, &done));
    }
    if bad > 0 && measured.is_ok() {
        return Err(Error::failed(format!("{bad} of {n} threads failed")));
    }
    measured
}

fn procs(
    shared: &Shared,
    n: u32,
    opener: OwnedFd,
    reports: &OwnedFd,
    start: Instant,
) -> Measured {
    let (children, failed) = create(n, || {
        // SAFETY: the child asks for its death signal (relay::in_child:
        // prctl, getppid), closes its copies of the write ends it must not
        // hold, runs `worker` (write, read, atomic stores) and leaves with
        // _exit: all async-signal-safe, no allocation, so it is sound even
        // with a second thread in the parent (enough_stack's).
        match unsafe { fork() }? {
            // SAFETY: as above: async-signal-safe calls only, then _exit.
            ForkResult::Child => unsafe {
                labkit::relay::in_child();
                libc::close(opener.as_raw_fd());
                libc::close(reports.as_raw_fd());
                libc::_exit(worker(shared))
            },
            ForkResult::Parent { child } => {
                labkit::relay::add(child.as_raw());
                Ok(child)
            }
        }
    });
    let created = children.len();
    let measured = match failed {
        None => await_reports(reports, n, || dead_worker(&children)).map(|()| {
            let ready = start.elapsed().as_secs_f64();
            (snapshot(&children), ready)
        }),
        Some(e) => Err(Error::failed(format!(
            "created {created} of {n} processes; fork: {}; waited for the {created}",
            describe_errno(e)
        ))),
    };
    drop(opener); // every worker's read() now returns 0: they end
    let mut bad = Vec::new();
    for (i, &pid) in children.iter().enumerate() {
        let worker = || format!("worker {} (pid {pid})", i + 1);
        // Its relay slot is cleared before it is reaped (relay::reap).
        match labkit::relay::reap(i, pid.as_raw()) {
            Ok(status) if status.code() == Some(0) => {}
            Ok(status) => bad.push(format!("{} {}", worker(), ended(status))),
            Err(e) => {
                bad.push(format!("wait for {}: {}", worker(), describe_io(&e)))
            }
        }
    }
    if let Some(sig) = labkit::relay::pending() {
        return Err(labkit::relay::interrupted(
            sig,
            &format!("passed it on to the {created} workers and reaped them"),
        ));
    }
    match measured {
        Err(e) if failed.is_none() => Err(Error::failed(format!(
            "{e}; released and reaped the {created} workers"
        ))),
        Ok(_) if !bad.is_empty() => Err(Error::failed(format!(
            "{} of {n} workers failed; first: {}",
            bad.len(),
            bad[0]
        ))),
        ok => ok,
    }
}
