//! The programs of create-destroy and one run of each, read through the
//! program crates' own report types, and what a run yields to the engine.
//! The C programs print the same JSON under the same `--json`, so a Rust
//! program and its C twin are read by the same code.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bins::run_json;
use crate::engine::Observed;
use crate::results::shell_words;
use forkcreat::Reap;
use labkit::cli::LoopEnd;
use labkit::measure::Usage;
use labkit::{Error, Result};

/// A create+destroy loop's own figures (forkcreat's and pthreadcreat's
/// reports share them): microseconds per create+destroy, timed around the
/// loop.
impl Observed for LoopEnd {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let us = self.us_per_create.map(|us| ("us_per_create", us));
        [("elapsed_s", self.elapsed_s)].into_iter().chain(us).collect()
    }
}

/// creattime's figures: the average create call of each kind, their ratio,
/// and the zombies counted just before reaping.
impl Observed for creattime::Report {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let (fork, thread) = (self.fork.average_ms, self.thread.average_ms);
        let mut m = vec![("zombies", self.zombies_before_reaping as f64)];
        m.extend(fork.map(|ms| ("fork_ms", ms)));
        m.extend(thread.map(|ms| ("thread_ms", ms)));
        m.extend(fork.zip(thread).map(|(f, t)| ("ratio", f / t)));
        m
    }
}

/// Which report a loop program prints.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// `forkcreat` or `forkcreat.c`: [`forkcreat::Report`].
    Fork,
    /// `pthreadcreat` or `pthreadcreat.c`: [`pthreadcreat::Report`].
    Thread,
}

/// A program of table 1 or 2 and its arguments.
pub(super) struct Loop {
    /// `forkcreat --reap wait`; a C twin's is its Rust program's with
    /// ` (C)`, or ` (C, Rust's mappings)` for forkcreat.c linked with
    /// rust_image.c.
    pub label: String,
    pub path: PathBuf,
    /// Its command line, `--json` included: the program crate's
    /// `Options::args` (or `c_args` for a C twin).
    pub args: Vec<OsString>,
    pub kind: Kind,
}

pub(super) fn forkcreat(n: u64, reap: Reap) -> forkcreat::Options {
    forkcreat::Options { iterations: n, reap, json: true }
}

pub(super) struct CPrograms {
    pub forkcreat: PathBuf,
    /// forkcreat.c linked with rust_image.c.
    pub forkcreat_image: PathBuf,
    pub pthreadcreat: PathBuf,
    pub creattime: PathBuf,
}

pub(super) fn c_programs() -> Result<CPrograms> {
    let root = crate::checkout::sources();
    let forkcreat = root.join("crates/forkcreat/c/forkcreat.c");
    let image = root.join("crates/forkcreat/c/rust_image.c");
    let c = |path: &str, name| crate::bins::compile_c(&root.join(path), name);
    Ok(CPrograms {
        forkcreat: crate::bins::compile_c(&forkcreat, "forkcreat-c")?,
        forkcreat_image: crate::bins::compile_c_with(
            &[&forkcreat, &image],
            &["-Wl,--no-as-needed", "-lgcc_s"],
            "forkcreat-c-rust-image",
        )?,
        pthreadcreat: c("crates/pthreadcreat/c/pthreadcreat.c", "pthreadcreat-c")?,
        creattime: c("crates/creattime/c/creattime.c", "creattime-c")?,
    })
}

/// forkcreat in each reap mode and pthreadcreat (`bins`, in that order),
/// each followed by its C twins when `c` is given.
pub(super) fn loops(
    bins: &[PathBuf],
    c: Option<&CPrograms>,
    n: u64,
    modes: &[Reap],
) -> Vec<Loop> {
    let mut list = Vec::new();
    let mut add = |label: String, kind, path: &Path, args| {
        list.push(Loop { label, path: path.into(), args, kind });
    };
    for &mode in modes {
        let (label, o) =
            (format!("forkcreat --reap {}", mode.name()), forkcreat(n, mode));
        add(label.clone(), Kind::Fork, &bins[0], o.args());
        if let Some(c) = c {
            add(format!("{label} (C)"), Kind::Fork, &c.forkcreat, o.c_args());
            let image = format!("{label} (C, Rust's mappings)");
            add(image, Kind::Fork, &c.forkcreat_image, o.c_args());
        }
    }
    let o = pthreadcreat::Options {
        iterations: n,
        stack_size: None,
        api: pthreadcreat::Api::Pthread,
        json: true,
    };
    add("pthreadcreat".into(), Kind::Thread, &bins[1], o.args());
    if let Some(c) = c {
        add("pthreadcreat (C)".into(), Kind::Thread, &c.pthreadcreat, o.c_args());
    }
    list
}

/// One run of a create+destroy loop (Rust or C; both print the same
/// report): check that every creation succeeded and take the program's own
/// microseconds per create+destroy, and what the process cost.
pub(super) fn run_loop(l: &Loop) -> Result<(LoopEnd, Usage)> {
    let mut cmd = Command::new(&l.path);
    cmd.args(&l.args);
    let what = format!("{} {}", l.label, shell_words(l.args.iter().cloned()));
    let (failed, end, cost) = match l.kind {
        Kind::Fork => {
            let (r, cost): (forkcreat::Report, _) = run_json(cmd, &what)?;
            (r.failed, r.end, cost)
        }
        Kind::Thread => {
            let (r, cost): (pthreadcreat::Report, _) = run_json(cmd, &what)?;
            (r.failed, r.end, cost)
        }
    };
    match end.us_per_create {
        Some(_) if failed == 0 => Ok((end, cost)),
        _ => Err(Error::failed(format!("{what}: {failed} creations failed"))),
    }
}

/// The create calls of each kind a round of creattime times at every
/// sample count: one run of 20 or 255 calls is moved by a slow call or
/// two, so a round runs the program until it has timed this many.
pub(super) const CREATTIME_CALLS: u64 = 510;

/// creattime, or with `c` creattime.c (the program at `path`), at
/// `samples`, run `times` times in a row and pooled: each kind's create
/// calls summed over the runs and averaged over its successes, the zombies
/// each run counted averaged over the runs, and the usage summed. Each run
/// forks and keeps `samples` children as the article's did; the repeats
/// give every sample count as many timed calls ([`CREATTIME_CALLS`]), so
/// that their averages are equally precise.
pub(super) fn run_creattime(
    path: &Path,
    c: bool,
    samples: u64,
    times: u64,
) -> Result<(creattime::Report, Usage)> {
    let what = format!("{} {samples}", path.display());
    let o = creattime::Options { samples, stack_size: None, json: true };
    let args = if c { o.c_args() } else { o.args() };
    let mut pooled = creattime::Report { samples, ..Default::default() };
    let mut usage = Usage::default();
    let mut zombies = 0;
    for _ in 0..times.max(1) {
        let mut cmd = Command::new(path);
        cmd.args(&args);
        let (r, cost): (creattime::Report, Usage) = run_json(cmd, &what)?;
        for (sum, one) in
            [(&mut pooled.fork, &r.fork), (&mut pooled.thread, &r.thread)]
        {
            sum.successes += one.successes;
            sum.failures += one.failures;
            sum.total_ms += one.total_ms;
            sum.first_error =
                sum.first_error.take().or_else(|| one.first_error.clone());
        }
        zombies += r.zombies_before_reaping;
        (pooled.reaped, pooled.joined) =
            (pooled.reaped + r.reaped, pooled.joined + r.joined);
        usage.wall_s += cost.wall_s;
        usage.user_s += cost.user_s;
        usage.sys_s += cost.sys_s;
        usage.max_rss_kib = usage.max_rss_kib.max(cost.max_rss_kib);
        usage.voluntary_switches += cost.voluntary_switches;
        usage.involuntary_switches += cost.involuntary_switches;
    }
    pooled.zombies_before_reaping = (zombies + times.max(1) / 2) / times.max(1);
    for kind in [&mut pooled.fork, &mut pooled.thread] {
        kind.average_ms =
            (kind.successes > 0).then(|| kind.total_ms / kind.successes as f64);
    }
    match (pooled.fork.average_ms, pooled.thread.average_ms) {
        (Some(_), Some(_)) => Ok((pooled, usage)),
        _ => Err(Error::failed(format!("{what}: no fork or no thread was created"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each loop's label and command line, as text.
    fn lines(list: &[Loop]) -> Vec<String> {
        list.iter()
            .map(|l| format!("{}: {}", l.label, shell_words(l.args.iter().cloned())))
            .collect()
    }

    /// The command lines the reference results were measured with.
    #[test]
    fn the_loops_run_the_article_and_the_lecture_words() {
        let bins = ["forkcreat", "pthreadcreat"].map(PathBuf::from);
        let c = CPrograms {
            forkcreat: "forkcreat-c".into(),
            forkcreat_image: "forkcreat-c-rust-image".into(),
            pthreadcreat: "pthreadcreat-c".into(),
            creattime: "creattime-c".into(),
        };
        let article = loops(&bins, Some(&c), 4000, &[Reap::Sigchld, Reap::Wait]);
        assert_eq!(
            lines(&article),
            [
                "forkcreat --reap sigchld: -n 4000 --reap sigchld --json",
                "forkcreat --reap sigchld (C): 4000 sigchld --json",
                "forkcreat --reap sigchld (C, Rust's mappings): 4000 sigchld --json",
                "forkcreat --reap wait: -n 4000 --reap wait --json",
                "forkcreat --reap wait (C): 4000 wait --json",
                "forkcreat --reap wait (C, Rust's mappings): 4000 wait --json",
                "pthreadcreat: -n 4000 --json",
                "pthreadcreat (C): 4000 --json",
            ]
        );
        assert_eq!(article[2].path, c.forkcreat_image);
        let lecture = loops(&bins, None, 2000, &[Reap::Wait]);
        assert_eq!(
            lines(&lecture),
            [
                "forkcreat --reap wait: -n 2000 --reap wait --json",
                "pthreadcreat: -n 2000 --json"
            ]
        );
    }
}
