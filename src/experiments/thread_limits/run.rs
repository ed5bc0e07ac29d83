//! The probes: `stacklimit threads|forks --json` (read as the program's
//! own `stacklimit::Count`) and the article's `thread`, each in a limited
//! child with a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use labkit::cli::Workload;
use labkit::limited::{Copied, Limits, NOBODY, Outcome};
use labkit::limits::format_size;
use labkit::{Error, Result};
use stacklimit::Api;

use super::{Args, KINDS, Overflow, Probe, ProgramRun, ProgramStack, Row};
use crate::engine::{Engine, setting};

fn limited(cmd: &mut Command, limits: Limits, timeout: Duration) -> Result<Outcome> {
    // A backtrace cannot be printed without memory, and trying can hang;
    // the probes' failures are described by their exit and last line.
    cmd.env_remove("RUST_BACKTRACE");
    let program = cmd.get_program().to_string_lossy().into_owned();
    // Who it ran as: an exec that fails as uid 65534 and would not as root
    // (a path closed to nobody) is told apart.
    let who = limits.runs_as();
    labkit::limited::run(cmd, limits, timeout)
        .map_err(|e| Error::io(format!("cannot run {program} as {who}"), e))
}

/// The `stacklimit` that the RLIMIT_NPROC probe runs as [`NOBODY`]: a copy
/// it can reach, since a checkout in root's 0700 home is closed to it.
/// Made before any probe runs, so a run that cannot make one stops at
/// once, in one line that says why; `None` when not root (the row is
/// skipped, [`processes`]).
pub(super) fn copy_for_nobody(stacklimit: &Path) -> Result<Option<Copied>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    labkit::limited::copy_for(NOBODY, stacklimit).map(Some)
}

/// Run one `stacklimit ... --json` probe under `limits` and read its count.
pub(super) fn count(
    cmd: &mut Command,
    limits: Limits,
    timeout: Duration,
) -> Result<Probe> {
    let done = limited(cmd, limits, timeout)?;
    let counted: Option<stacklimit::Count> = done
        .status
        .success()
        .then(|| serde_json::from_str(done.stdout.trim()).ok())
        .flatten();
    Ok(Probe {
        created: counted.as_ref().map(|c| c.created),
        stopped_by: counted.as_ref().and_then(|c| c.stopped_by.clone()),
        ended: done.ended(),
        said: if counted.is_some() { String::new() } else { done.last_words() },
        vm_peak_kib: counted.map(|c| c.vm_peak_kib),
        wall_s: done.wall_s,
    })
}

/// The article's `./thread` with N threads under the address-space limit.
pub(super) fn run_thread(
    thread: &Path,
    n: u32,
    stack: ProgramStack,
    space: Limits,
    timeout: Duration,
) -> Result<ProgramRun> {
    let dir = labkit::cleanup::tempdir("lab-thread-limits-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let log: PathBuf = dir.path().join("logFile.log");
    let work = Workload { count: 1000, log: log.clone(), line: None, json: false };
    let mut o = thread::Options { threads: n, stack_size: None, work };
    let mut limits = space;
    match stack {
        ProgramStack::Flag => o.stack_size = Some(1 << 20),
        ProgramStack::Ulimit => limits.stack = Some(1 << 20),
        ProgramStack::Default => limits.stack = Some(8 << 20),
    }
    let setting = stack.label();
    let mut cmd = Command::new(thread);
    cmd.args(o.args());
    let done = limited(&mut cmd, limits, timeout)?;
    let log_checked = done.status.success();
    if log_checked {
        let data = std::fs::read(&log).map_err(|e| Error::io(log.display(), e))?;
        let text = labkit::lines::payload(None);
        labkit::lines::check_log(&data, &text, u64::from(n), 1000).map_err(|e| {
            Error::failed(format!("thread --threads {n} ({setting}): bad log: {e}"))
        })?;
    }
    let (ended, said, wall_s) = (done.ended(), done.last_words(), done.wall_s);
    Ok(ProgramRun { threads: n, setting, ended, said, log_checked, wall_s })
}

/// A thread overflowing a 64 KiB stack, made by each API.
pub(super) fn overflows(
    stacklimit: &Path,
    timeout: Duration,
) -> Result<Vec<Overflow>> {
    let apis = [(Api::Pthread, "pthread_create"), (Api::Std, "std::thread")];
    let overflow = |(api, name)| {
        let stack_size = 64 << 10;
        let probe = stacklimit::Probe::Overflow { stack_size, api };
        let mut cmd = Command::new(stacklimit);
        cmd.args(stacklimit::Options { probe }.args());
        let done = limited(&mut cmd, Limits::default(), timeout)?;
        // The probe announces itself first; if that is all there is, the
        // process died without a word.
        let mut said = done.last_words();
        if said.starts_with("stacklimit: overflowing") {
            said = "(nothing more: the kernel killed the process)".into();
        }
        Ok(Overflow { api: name, stack_size, ended: done.ended(), said })
    };
    apis.into_iter().map(overflow).collect()
}

/// Forks (and threads) under the same address-space limit, and as an
/// unprivileged user under RLIMIT_NPROC (from `nobody`'s copy of
/// `stacklimit`, [`copy_for_nobody`]; not run without one).
pub(super) fn processes(
    engine: &mut Engine,
    stacklimit: &Path,
    nobody: Option<&Copied>,
    args: &Args,
    max: u32,
) -> Result<Vec<Row>> {
    let timeout = Duration::from_secs(args.timeout);
    let mut row =
        |limit: String, user, predicted, cmd: &dyn Fn() -> Command, limits| {
            let at = setting([("limit", limit.into())]);
            let runs = engine.measure(&at, &KINDS, |k| {
                let mut cmd = cmd();
                cmd.args(process_probe(KINDS[k], max).args());
                count(&mut cmd, limits, timeout)
            })?;
            let runs = KINDS.into_iter().zip(runs).collect();
            Ok::<_, Error>(Row { at, user, predicted, runs })
        };
    let space =
        Limits { address_space: Some(args.address_space), ..Limits::default() };
    let limit = format!("RLIMIT_AS = {}", format_size(args.address_space));
    let local = || Command::new(stacklimit);
    let mut rows = vec![row(limit, space.runs_as(), None, &local, space)?];
    let limit = format!("RLIMIT_NPROC = {}", args.nproc);
    if let Some(nobody) = nobody {
        let nproc = Limits { nproc: Some(args.nproc), user: Some(NOBODY), ..space };
        let before = tasks_of(NOBODY);
        let user = format!("uid {NOBODY} ({before} tasks already)");
        // The probe itself is one of the user's tasks.
        let predicted = Some(args.nproc.saturating_sub(before + 1));
        rows.push(row(limit, user, predicted, &|| nobody.command(), nproc)?);
    } else {
        let user = format!("uid {NOBODY} (skipped: needs root)");
        let at = setting([("limit", limit.into())]);
        rows.push(Row { at, user, predicted: None, runs: Default::default() });
    }
    Ok(rows)
}

/// The process probe of condition `kind` ([`KINDS`]), counting up to `max`:
/// `forks`, or `threads` with 64 KiB stacks.
fn process_probe(kind: &str, max: u32) -> stacklimit::Options {
    let probe = if kind == "threads" {
        let (stack_size, api) = (Some(64 << 10), stacklimit::Api::Pthread);
        stacklimit::Probe::Threads { stack_size, api, max, json: true }
    } else {
        stacklimit::Probe::Forks { max, json: true }
    };
    stacklimit::Options { probe }
}

/// Tasks (threads of every process) that `uid` owns now: RLIMIT_NPROC
/// counts them all.
fn tasks_of(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    let mut tasks = 0;
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim)
        };
        let real = field("Uid:").and_then(|u| u.split_whitespace().next());
        if real == Some(&uid.to_string()) {
            tasks += field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        }
    }
    tasks
}
