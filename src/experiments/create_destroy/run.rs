//! The programs of create-destroy and one run of each, read through the
//! program crates' own report types, and what a run yields to the engine.
//! The C programs print the same JSON under the same `--json`, so a Rust
//! program and its C twin are read by the same code.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bins::run_json;
use crate::engine::Observed;
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
#[derive(Clone, Copy, Debug, PartialEq)]
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
    path: PathBuf,
    args: Vec<String>,
    kind: Kind,
}

impl Loop {
    pub(super) fn new(
        label: impl Into<String>,
        kind: Kind,
        path: &Path,
        args: &[&str],
    ) -> Loop {
        let args = args.iter().chain(&["--json"]).map(|a| a.to_string()).collect();
        Loop { label: label.into(), path: path.into(), args, kind }
    }
}

/// The C programs, built by [`c_programs`].
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
    modes: &[&str],
) -> Vec<Loop> {
    let n = n.to_string();
    let mut list = Vec::new();
    for mode in modes {
        let label = format!("forkcreat --reap {mode}");
        list.push(Loop::new(
            &label,
            Kind::Fork,
            &bins[0],
            &["-n", &n, "--reap", mode],
        ));
        if let Some(c) = c {
            let (args, mappings) =
                ([n.as_str(), mode], format!("{label} (C, Rust's mappings)"));
            list.push(Loop::new(
                format!("{label} (C)"),
                Kind::Fork,
                &c.forkcreat,
                &args,
            ));
            list.push(Loop::new(mappings, Kind::Fork, &c.forkcreat_image, &args));
        }
    }
    list.push(Loop::new("pthreadcreat", Kind::Thread, &bins[1], &["-n", &n]));
    if let Some(c) = c {
        list.push(Loop::new(
            "pthreadcreat (C)",
            Kind::Thread,
            &c.pthreadcreat,
            &[&n],
        ));
    }
    list
}

// ANCHOR: run_loop
/// One run of a create+destroy loop (Rust or C; both print the same
/// report): check that every creation succeeded and take the program's own
/// microseconds per create+destroy, and what the process cost.
pub(super) fn run_loop(l: &Loop) -> Result<(LoopEnd, Usage)> {
    let mut cmd = Command::new(&l.path);
    cmd.args(&l.args);
    let what = format!("{} {}", l.label, l.args.join(" "));
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
// ANCHOR_END: run_loop

/// One run of creattime (or creattime.c) at `samples`.
pub(super) fn run_creattime(
    path: &Path,
    samples: u64,
) -> Result<(creattime::Report, Usage)> {
    let mut cmd = Command::new(path);
    cmd.args([samples.to_string(), "--json".into()]);
    let what = format!("{} {samples}", path.display());
    let (r, cost): (creattime::Report, _) = run_json(cmd, &what)?;
    match (r.fork.average_ms, r.thread.average_ms) {
        (Some(_), Some(_)) => Ok((r, cost)),
        _ => Err(Error::failed(format!("{what}: no fork or no thread was created"))),
    }
}
