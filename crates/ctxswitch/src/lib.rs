//! `ctxswitch`: what one context switch costs.
//!
//! Article 004 (book References: mq-2006) blamed about 30% of a message
//! server's CPU on switching between its 300 threads; checking a verdict
//! like that needs the price of one switch. This program measures it the
//! way lmbench's `lat_ctx` and `perf bench sched pipe` do: two tasks, A and
//! B, pass a one-byte token back and forth over a pair of pipes. Each
//! `read(2)` finds its pipe empty and sleeps until the other task writes,
//! so one round trip is two switches (A to B, B to A) plus two writes and
//! two reads.
//!
//! What it does differently, on purpose:
//! - It gives both answers: the raw time (what `perf bench sched pipe`
//!   prints, per round trip) and lmbench's, with the cost of the pipe calls
//!   themselves (one task writing a byte and reading it back, no switch)
//!   subtracted.
//! - It checks its assumption, two switches per round trip, against the
//!   kernel's own voluntary and involuntary counts (`getrusage` per thread,
//!   `wait4` for a child process), and fails when they disagree.
//! - Placement is a flag, `--pin same|cross|none`, applied to each task
//!   with `sched_setaffinity(2)`; `perf bench sched pipe` 6.1 has none, and
//!   `taskset` can only confine both tasks to the same CPUs.
//! - The token is a counter that both sides check, so a lost or doubled
//!   byte is an error, not a faster figure.
//! - Only the round trips are timed, after a warm-up, not the creation of
//!   the second task.

mod place;
mod text;

use std::ffi::OsString;
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno, describe_io};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::{ForkResult, Pid, fork, pipe2};
use serde::{Deserialize, Serialize};

pub use place::placement;
use place::{Pinned, cpu_set};
pub use text::render;

/// What the two tasks are.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Two threads of one process: a switch keeps the address space
    Threads,
    /// Two processes: a switch changes the address space as well
    Processes,
}

/// Where the two tasks run.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Pin {
    /// Both on one CPU: every round trip is two real task-to-task switches
    Same,
    /// On two different CPUs: each task sleeps and is woken from the other
    /// CPU
    Cross,
    /// Not pinned: wherever the scheduler puts them
    None,
}

impl Mode {
    /// Its `--mode` spelling: `threads`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Threads => "threads",
            Mode::Processes => "processes",
        }
    }
}

impl Pin {
    /// Its `--pin` spelling: `same`.
    pub fn name(self) -> &'static str {
        match self {
            Pin::Same => "same",
            Pin::Cross => "cross",
            Pin::None => "none",
        }
    }
}

/// Measure one context switch: two tasks bounce a one-byte token over a
/// pair of pipes (lmbench's lat_ctx, `perf bench sched pipe`). Prints
/// microseconds per round trip and per switch, raw and without the pipe
/// calls' own cost, and the kernel's switch count. Exit status: 0 ok,
/// 1 failed (or the kernel's count disagreed), 2 bad usage.
#[derive(Clone, Debug, PartialEq, clap::Parser)]
#[command(version)]
pub struct Options {
    /// The two tasks: threads of one process, or two processes
    #[arg(short, long, value_enum, default_value_t = Mode::Threads)]
    pub mode: Mode,

    /// Placement of the two tasks (sched_setaffinity)
    #[arg(short, long, value_enum, default_value_t = Pin::Same)]
    pub pin: Pin,

    /// Timed round trips (two switches each)
    #[arg(short = 'n', long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub iterations: u64,

    /// Untimed round trips first
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub warmup: u64,

    /// CPUs to pin to: A for --pin same, A,B for --pin cross [default: the
    /// first one or two this process may run on]
    #[arg(long, value_name = "A[,B]", value_delimiter = ',')]
    pub cpus: Vec<usize>,

    /// Print one JSON object instead of the text
    #[arg(long)]
    pub json: bool,
}

/// Every flag at its default: `ctxswitch` with no arguments.
impl Default for Options {
    fn default() -> Self {
        use clap::Parser;
        Self::try_parse_from(["ctxswitch"]).expect("no flags parse")
    }
}

impl Options {
    /// The words `ctxswitch` takes for these options, in the order the
    /// runner has always given them: `--mode`, `--pin` and `--iterations`
    /// always, the rest only when set (`--json`, `--cpus`) or not at their
    /// default (`--warmup`). Parsed back, they give these options.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut say = |flag: &str, value: Option<String>| {
            args.push(flag.into());
            args.extend(value.map(OsString::from));
        };
        say("--mode", Some(self.mode.name().into()));
        say("--pin", Some(self.pin.name().into()));
        if self.json {
            say("--json", None);
        }
        say("--iterations", Some(self.iterations.to_string()));
        if self.warmup != Self::default().warmup {
            say("--warmup", Some(self.warmup.to_string()));
        }
        if !self.cpus.is_empty() {
            let cpus: Vec<String> = self.cpus.iter().map(usize::to_string).collect();
            say("--cpus", Some(cpus.join(",")));
        }
        args
    }

    /// What to run, from the flags.
    pub fn config(&self) -> Config {
        Config {
            mode: self.mode,
            pin: self.pin,
            iterations: self.iterations,
            warmup: self.warmup,
            cpus: self.cpus.clone(),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    pub pin: Pin,
    /// Timed round trips.
    pub iterations: u64,
    /// Untimed round trips before them.
    pub warmup: u64,
    /// CPUs asked for with `--cpus` (empty: the first allowed ones).
    pub cpus: Vec<usize>,
}

/// How far the kernel's switch count may be from the assumed one before
/// the figures are refused: 10% plus a few for starting and ending a task.
pub const TOLERANCE: f64 = 0.10;
pub const SLACK: u64 = 10;

/// The method's assumption, two switches per round trip, against the
/// kernel's count for both tasks over all round trips (warm-up included).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Switches {
    /// Two per round trip.
    pub expected: u64,
    /// The kernel's voluntary switches of both tasks (they slept).
    pub voluntary: u64,
    /// The kernel's involuntary switches (they were preempted).
    pub involuntary: u64,
    /// (voluntary + involuntary) per round trip.
    pub per_round_trip: f64,
    /// Whether the kernel's total is within 10% (plus 10) of `expected`.
    pub holds: bool,
}

/// One run's figures. Times are microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    pub mode: Mode,
    pub pin: Pin,
    /// The CPUs task A and task B were pinned to (`null` for `--pin none`).
    pub cpus: Option<[usize; 2]>,
    /// The CPUs A and B were on when they finished (`u32::MAX` if
    /// `sched_getcpu` failed).
    pub last_cpus: [usize; 2],
    pub iterations: u64,
    pub warmup: u64,
    /// Wall-clock seconds of the timed round trips.
    pub elapsed_s: f64,
    pub us_per_round_trip: f64,
    /// Half a round trip: what `perf bench sched pipe` implies per switch.
    pub us_per_switch: f64,
    /// One task writing one byte to a pipe and reading it back: the pipe
    /// calls' share of a switch, without the switch.
    pub pipe_us: f64,
    /// A round trip less its two pipe write+read pairs (lmbench's way).
    pub net_us_per_round_trip: f64,
    pub net_us_per_switch: f64,
    pub switches: Switches,
}

/// Measure: check the placement, time the pipe calls alone, then bounce
/// the token between two threads or two processes.
pub fn run(cfg: &Config) -> Result<Report> {
    let cpus = placement(cfg.pin, &cfg.cpus)?;
    let total = cfg.warmup.checked_add(cfg.iterations).ok_or_else(|| {
        Error::usage("--warmup plus --iterations is too large".to_string())
    })?;
    // Task A is the calling thread; pin it for the run and restore its old
    // mask afterwards.
    let _pinned = Pinned::to(cpus.map(|c| c[0]))?;
    let pipe_us = pipe_cost(cfg.warmup, cfg.iterations)?;
    let (a, b) = match cfg.mode {
        Mode::Threads => threads(total, cfg.warmup, cpus)?,
        Mode::Processes => processes(total, cfg.warmup, cpus)?,
    };
    let round_trip = a.elapsed_s * 1e6 / cfg.iterations as f64;
    let net = round_trip - 2.0 * pipe_us;
    let (voluntary, involuntary) = (a.nvcsw + b.nvcsw, a.nivcsw + b.nivcsw);
    let expected = 2 * total;
    let counted = voluntary + involuntary;
    let holds = agrees(expected, counted);
    Ok(Report {
        mode: cfg.mode,
        pin: cfg.pin,
        cpus,
        last_cpus: [a.cpu, b.cpu],
        iterations: cfg.iterations,
        warmup: cfg.warmup,
        elapsed_s: a.elapsed_s,
        us_per_round_trip: round_trip,
        us_per_switch: round_trip / 2.0,
        pipe_us,
        net_us_per_round_trip: net,
        net_us_per_switch: net / 2.0,
        switches: Switches {
            expected,
            voluntary,
            involuntary,
            per_round_trip: counted as f64 / total.max(1) as f64,
            holds,
        },
    })
}

/// Whether the kernel's count of switches agrees with the expected one:
/// within 10%, plus a few for starting and ending a task.
pub fn agrees(expected: u64, counted: u64) -> bool {
    (counted as f64 - expected as f64).abs()
        <= TOLERANCE * expected as f64 + SLACK as f64
}

/// Why a task stopped before its last round trip.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    Os(Errno),
    /// The other task closed its end of the pipe: it ended or died.
    Eof,
    /// Not the token expected: a byte was lost or doubled.
    Token {
        round: u64,
        got: u8,
        want: u8,
    },
}

impl Stop {
    fn describe(self) -> String {
        match self {
            Stop::Os(e) => describe_errno(e),
            Stop::Eof => "the other task closed its pipe".to_string(),
            Stop::Token { round, got, want } => {
                format!("round trip {round}: token {got}, expected {want}")
            }
        }
    }
}

/// Write one byte. Only a system call, so a forked child may use it.
fn put(fd: RawFd, byte: u8) -> Result<(), Stop> {
    loop {
        // SAFETY: `fd` stays open for the whole run; the buffer is one byte
        // of our own stack.
        let n = unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
        if n == 1 {
            return Ok(());
        }
        match Errno::last() {
            Errno::EINTR if n < 0 => continue,
            e if n < 0 => return Err(Stop::Os(e)),
            _ => return Err(Stop::Os(Errno::EIO)),
        }
    }
}

/// Read one byte, sleeping until there is one. Only a system call.
fn get(fd: RawFd) -> Result<u8, Stop> {
    let mut byte = 0u8;
    loop {
        // SAFETY: as in `put`; read writes at most one byte into `byte`.
        let n = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
        match n {
            1 => return Ok(byte),
            0 => return Err(Stop::Eof),
            _ => match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(Stop::Os(e)),
            },
        }
    }
}

// ANCHOR: bounce
/// Task A: send the token, then sleep in read(2) until B sends it back,
/// one higher. Each round trip: B is switched in, then A again.
fn ping(tx: RawFd, rx: RawFd, rounds: Range<u64>) -> Result<(), Stop> {
    for round in rounds {
        let token = round as u8;
        put(tx, token)?; // wakes B
        let back = get(rx)?; // A sleeps until B has answered
        if back != token.wrapping_add(1) {
            return Err(Stop::Token {
                round,
                got: back,
                want: token.wrapping_add(1),
            });
        }
    }
    Ok(())
}

/// Task B: sleep until A's token arrives, send it back one higher.
fn pong(rx: RawFd, tx: RawFd, rounds: Range<u64>) -> Result<(), Stop> {
    for round in rounds {
        let token = get(rx)?; // B sleeps until A has written
        if token != round as u8 {
            return Err(Stop::Token { round, got: token, want: round as u8 });
        }
        put(tx, token.wrapping_add(1))?; // wakes A
    }
    Ok(())
}
// ANCHOR_END: bounce

// ANCHOR: pipe_cost
/// The pipe calls without the switches: one task writes a byte to a pipe
/// and reads it straight back (the read never sleeps). Microseconds per
/// write+read pair.
fn pipe_cost(warmup: u64, iterations: u64) -> Result<f64> {
    let (rx, tx) = new_pipe()?;
    let (tx, rx) = (tx.as_raw_fd(), rx.as_raw_fd());
    let pass = |rounds: Range<u64>| -> Result<(), Stop> {
        for round in rounds {
            put(tx, round as u8)?;
            let back = get(rx)?;
            if back != round as u8 {
                return Err(Stop::Token { round, got: back, want: round as u8 });
            }
        }
        Ok(())
    };
    let fail = |s: Stop| Error::failed(format!("pipe alone: {}", s.describe()));
    pass(0..warmup).map_err(fail)?;
    let start = Instant::now();
    pass(0..iterations).map_err(fail)?;
    Ok(start.elapsed().as_secs_f64() * 1e6 / iterations as f64)
}
// ANCHOR_END: pipe_cost

/// A pipe whose descriptors no other program inherits: a stray copy of a
/// write end would keep a reader from ever seeing its peer go.
fn new_pipe() -> Result<(OwnedFd, OwnedFd)> {
    pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| Error::failed(format!("pipe: {}", describe_errno(e))))
}

/// What one task did: its switch counts, its last CPU and, for A, the
/// timed stretch and the CPU B said it ended on.
#[derive(Clone, Copy, Debug, Default)]
struct Side {
    nvcsw: u64,
    nivcsw: u64,
    cpu: usize,
    peer_cpu: usize,
    elapsed_s: f64,
}

/// (voluntary, involuntary) switches of the calling thread so far.
fn thread_switches() -> (u64, u64) {
    let u = labkit::measure::usage(libc::RUSAGE_THREAD);
    (u.voluntary_switches, u.involuntary_switches)
}

/// The CPU the caller is on now (a system call, or the vDSO);
/// `u32::MAX` if unknown.
fn current_cpu() -> u32 {
    // SAFETY: no arguments; returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(u32::MAX)
}

/// Send a CPU number as four bytes (B to A, after the last round trip).
/// Only system calls, so a forked child may use it.
fn put_cpu(fd: RawFd, cpu: u32) -> Result<(), Stop> {
    cpu.to_le_bytes().into_iter().try_for_each(|byte| put(fd, byte))
}

/// Receive the four bytes of [`put_cpu`].
fn get_cpu(fd: RawFd) -> Result<u32, Stop> {
    let mut bytes = [0u8; 4];
    for byte in &mut bytes {
        *byte = get(fd)?;
    }
    Ok(u32::from_le_bytes(bytes))
}

// ANCHOR: side_a
/// Task A's whole part: warm up, time the round trips, then collect the
/// CPU B ended on. The kernel counts switches for this thread alone.
fn side_a(tx: RawFd, rx: RawFd, warmup: u64, total: u64) -> Result<Side, Stop> {
    let (v0, i0) = thread_switches();
    ping(tx, rx, 0..warmup)?;
    let start = Instant::now();
    ping(tx, rx, warmup..total)?;
    let elapsed_s = start.elapsed().as_secs_f64();
    let cpu = current_cpu() as usize;
    let peer_cpu = get_cpu(rx)? as usize;
    let (v1, i1) = thread_switches();
    Ok(Side { nvcsw: v1 - v0, nivcsw: i1 - i0, cpu, peer_cpu, elapsed_s })
}
// ANCHOR_END: side_a

/// Task B's whole part: answer every token, then send its CPU number.
fn side_b(rx: RawFd, tx: RawFd, total: u64) -> Result<(), Stop> {
    pong(rx, tx, 0..total)?;
    put_cpu(tx, current_cpu())
}

/// The error to report when A or B stopped early: the first cause, not
/// the other side's "closed its pipe".
fn blame<B>(a: Result<Side, Stop>, b: Result<B, String>) -> Result<(Side, B)> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        // A's end-of-file or broken pipe is B going away: B says why.
        (Err(Stop::Eof | Stop::Os(Errno::EPIPE)), Err(b)) | (Ok(_), Err(b)) => {
            Err(Error::failed(format!("task B: {b}")))
        }
        (Err(a), _) => Err(Error::failed(format!("task A: {}", a.describe()))),
    }
}

/// One task's ends of the two pipes: (read, write).
type Ends = (OwnedFd, OwnedFd);

/// The two pipes, as A's ends and B's (B writes to A's read end, A to
/// B's), and B's CPU set if it is pinned.
fn two_ends(cpus: Option<[usize; 2]>) -> Result<(Ends, Ends, Option<CpuSet>)> {
    let (a_rx, b_tx) = new_pipe()?; // B to A
    let (b_rx, a_tx) = new_pipe()?; // A to B
    let b_set = cpus.map(|c| cpu_set(c[1])).transpose()?;
    Ok(((a_rx, a_tx), (b_rx, b_tx), b_set))
}

/// A and B as two threads of this process.
fn threads(
    total: u64,
    warmup: u64,
    cpus: Option<[usize; 2]>,
) -> Result<(Side, Side)> {
    let ((a_rx, a_tx), (b_rx, b_tx), b_set) = two_ends(cpus)?;
    std::thread::scope(|scope| {
        // B owns its two ends: when it returns, early or not, they close
        // and A's read sees end-of-file instead of sleeping forever.
        let b = std::thread::Builder::new()
            .name("ctxswitch-b".into())
            .spawn_scoped(scope, move || -> Result<Side, String> {
                if let Some(set) = &b_set {
                    sched_setaffinity(Pid::from_raw(0), set).map_err(|e| {
                        format!("cannot pin itself: {}", describe_errno(e))
                    })?;
                }
                let (v0, i0) = thread_switches();
                side_b(b_rx.as_raw_fd(), b_tx.as_raw_fd(), total)
                    .map_err(Stop::describe)?;
                let (v1, i1) = thread_switches();
                Ok(Side { nvcsw: v1 - v0, nivcsw: i1 - i0, ..Side::default() })
            })
            .map_err(|e| {
                Error::failed(format!("cannot start thread B: {}", describe_io(&e)))
            })?;
        let a = side_a(a_tx.as_raw_fd(), a_rx.as_raw_fd(), warmup, total);
        drop((a_tx, a_rx)); // a B still waiting now sees end-of-file
        let b = b.join().unwrap_or_else(|_| Err("panicked".to_string()));
        let (a, b) = blame(a, b)?;
        Ok((a, Side { cpu: a.peer_cpu, ..b }))
    })
}

/// Exit statuses of the child B, beyond the errno values (1..=133).
const CHILD_EOF: i32 = 200;
const CHILD_TOKEN: i32 = 201;
const CHILD_PIN: i32 = 202;

/// A and B as two processes: this one and a forked child.
fn processes(
    total: u64,
    warmup: u64,
    cpus: Option<[usize; 2]>,
) -> Result<(Side, Side)> {
    // Everything the child needs is made before the fork.
    let ((a_rx, a_tx), (b_rx, b_tx), b_set) = two_ends(cpus)?;
    // ANCHOR: fork
    // SAFETY: the child runs only `child`, which makes system calls
    // (close, sched_setaffinity, read, write, sched_getcpu, _exit), all
    // async-signal-safe, touches no lock or allocator, and never returns.
    let pid = match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            drop((a_rx, a_tx)); // A's ends: so A sees end-of-file if B dies
            child(b_rx.as_raw_fd(), b_tx.as_raw_fd(), b_set.as_ref(), total)
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return Err(Error::failed(format!("fork: {}", describe_errno(e)))),
    };
    drop((b_rx, b_tx)); // B's ends: so B sees end-of-file if A stops
    let a = side_a(a_tx.as_raw_fd(), a_rx.as_raw_fd(), warmup, total);
    drop((a_tx, a_rx));
    // The child's switches come from the kernel's record of the whole
    // child, which wait4 hands over when reaping it.
    let waited = labkit::children::wait4(pid.as_raw(), 0)
        .map_err(|e| Error::failed(format!("wait4({pid}): {}", describe_io(&e))))?;
    let Some((status, ru)) = waited else {
        return Err(Error::failed(format!("wait4({pid}): no status")));
    };
    // ANCHOR_END: fork
    let b = match (status.code(), status.signal()) {
        (Some(0), _) => Ok(Side {
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
            ..Side::default()
        }),
        (Some(CHILD_EOF), _) => Err(Stop::Eof.describe()),
        (Some(CHILD_TOKEN), _) => Err("a lost or doubled token".to_string()),
        (Some(CHILD_PIN), _) => Err("cannot pin itself to its CPU".to_string()),
        (Some(errno), _) => Err(describe_errno(Errno::from_raw(errno))),
        (None, _) => Err(labkit::children::ended(status)),
    };
    let (a, b) = blame(a, b.map_err(|e| format!("child {pid}: {e}")))?;
    Ok((a, Side { cpu: a.peer_cpu, ..b }))
}

/// The child B's whole life. Only system calls, then `_exit`.
fn child(rx: RawFd, tx: RawFd, set: Option<&CpuSet>, total: u64) -> ! {
    let pinned = set.map_or(Ok(()), |s| sched_setaffinity(Pid::from_raw(0), s));
    let status = match pinned.map_err(|_| CHILD_PIN).and_then(|()| {
        side_b(rx, tx, total).map_err(|stop| match stop {
            Stop::Os(errno) => errno as i32,
            Stop::Eof => CHILD_EOF,
            Stop::Token { .. } => CHILD_TOKEN,
        })
    }) {
        Ok(()) => 0,
        Err(code) => code,
    };
    // SAFETY: _exit ends the process at once, running no atexit handler
    // and flushing no stdio buffer of the parent's.
    unsafe { libc::_exit(status) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sched::sched_getaffinity;

    fn config(mode: Mode, pin: Pin) -> Config {
        Config { mode, pin, iterations: 100, warmup: 10, cpus: vec![] }
    }

    /// The words as text.
    fn words(o: &Options) -> Vec<String> {
        labtest::words(o.args())
    }

    #[test]
    fn options_say_the_words_the_runner_always_gave() {
        // ctx-switch's `cross` run and mq-sweep's switch cost.
        let o = Options {
            mode: Mode::Processes,
            pin: Pin::Cross,
            iterations: 100_000,
            cpus: vec![0, 1],
            json: true,
            ..Options::default()
        };
        assert_eq!(
            words(&o),
            "--mode processes --pin cross --json --iterations 100000 --cpus 0,1"
                .split(' ')
                .collect::<Vec<_>>()
        );
        let o = Options { iterations: 20_000, json: true, ..Options::default() };
        assert_eq!(
            words(&o).join(" "),
            "--mode threads --pin same --json --iterations 20000"
        );
    }

    #[test]
    fn options_parse_back_from_their_words() {
        let every = Options {
            mode: Mode::Processes,
            pin: Pin::None,
            iterations: 7,
            warmup: 0,
            cpus: vec![3],
            json: true,
        };
        let some =
            Options { pin: Pin::Cross, cpus: vec![1, 2], ..Options::default() };
        for o in [Options::default(), every, some] {
            labtest::parses_back("ctxswitch", &o, o.args());
        }
    }

    #[test]
    fn a_vanished_partner_is_end_of_file_not_a_hang() {
        let (a_rx, b_tx) = new_pipe().unwrap();
        let (_b_rx, a_tx) = new_pipe().unwrap();
        drop(b_tx);
        let got = side_a(a_tx.as_raw_fd(), a_rx.as_raw_fd(), 0, 5);
        assert_eq!(got.unwrap_err(), Stop::Eof);
        for a in [Stop::Eof, Stop::Os(Errno::EPIPE)] {
            let err = blame(Err(a), Err::<(), _>("killed by signal 9".into()));
            assert_eq!(err.unwrap_err().message, "task B: killed by signal 9");
        }
        let err = blame(Err(Stop::Os(Errno::EIO)), Err::<(), _>("x".into()));
        assert_eq!(err.unwrap_err().message, "task A: Input/output error (EIO)");
    }

    #[test]
    fn a_lost_or_doubled_token_is_an_error() {
        let (a_rx, b_tx) = new_pipe().unwrap();
        let (b_rx, a_tx) = new_pipe().unwrap();
        // A B that answers the first token twice: the second answer is
        // one token too early for A's second round trip.
        let b = std::thread::spawn(move || {
            let t = get(b_rx.as_raw_fd()).unwrap();
            put(b_tx.as_raw_fd(), t + 1).unwrap();
            put(b_tx.as_raw_fd(), t + 1).unwrap();
            (b_rx, b_tx) // kept open until A is done
        });
        let got = ping(a_tx.as_raw_fd(), a_rx.as_raw_fd(), 0..3);
        assert_eq!(got, Err(Stop::Token { round: 1, got: 1, want: 2 }));
        b.join().unwrap();
        // And a B that receives a wrong token says so.
        let (rx, tx) = new_pipe().unwrap();
        put(tx.as_raw_fd(), 7).unwrap();
        let got = pong(rx.as_raw_fd(), tx.as_raw_fd(), 0..1);
        assert_eq!(got, Err(Stop::Token { round: 0, got: 7, want: 0 }));
    }

    #[test]
    fn every_child_is_reaped_and_the_callers_mask_restored() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        for mode in [Mode::Threads, Mode::Processes] {
            // Whether the kernel's count agrees is the scheduler's business
            // (other load preempts); the expected count is the method's.
            let r = run(&config(mode, Pin::Same)).unwrap();
            assert_eq!(r.switches.expected, 220);
        }
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        // wait4(-1) finds no child left behind.
        // SAFETY: a null status pointer is allowed; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!((r, Errno::last()), (-1, Errno::ECHILD));
    }

    #[test]
    fn cpu_numbers_past_255_survive_the_trip_from_b_to_a() {
        let (rx, tx) = new_pipe().unwrap();
        for cpu in [0, 255, 256, 4095, u32::MAX] {
            put_cpu(tx.as_raw_fd(), cpu).unwrap();
            assert_eq!(get_cpu(rx.as_raw_fd()).unwrap(), cpu);
        }
    }

    #[test]
    fn the_count_check_has_its_documented_tolerance() {
        assert!(agrees(20_000, 20_000));
        assert!(agrees(20_000, 22_010) && agrees(20_000, 17_990));
        assert!(!agrees(20_000, 22_011) && !agrees(20_000, 17_989));
        // One switch per round trip (reads that never slept) is refused.
        assert!(!agrees(20_000, 10_000));
        assert!(agrees(0, 10) && !agrees(0, 11));
    }
}
