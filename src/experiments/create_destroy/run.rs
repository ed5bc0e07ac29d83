//! The programs of create-destroy and one run of each, read through the
//! program crates' own report types. The C programs print the same JSON
//! under the same `--json`, so a Rust program and its C twin are read by
//! the same code.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bins::run_json;
use labkit::{Error, Result};

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
    pub label: String,
    pub path: PathBuf,
    pub args: Vec<String>,
    pub kind: Kind,
    /// For a C twin: the position of its Rust program in the same list.
    pub twin_of: Option<usize>,
    /// A Rust program and its C twins share a group and run back to back.
    pub group: usize,
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
    let mut list = Vec::new();
    let mut push = |label: String,
                    kind: Kind,
                    path: &PathBuf,
                    args: Vec<String>,
                    twins: Vec<(&str, &PathBuf)>,
                    c_args: Vec<String>| {
        let (rust, group) =
            (list.len(), list.last().map_or(0, |l: &Loop| l.group + 1));
        let json = |mut args: Vec<String>| {
            args.push("--json".into());
            args
        };
        list.push(Loop {
            label: label.clone(),
            path: path.clone(),
            args: json(args),
            kind,
            twin_of: None,
            group,
        });
        for (suffix, c_path) in twins {
            list.push(Loop {
                label: format!("{label} ({suffix})"),
                path: c_path.clone(),
                args: json(c_args.clone()),
                kind,
                twin_of: Some(rust),
                group,
            });
        }
    };
    for mode in modes {
        let twins = c.map_or(Vec::new(), |c| {
            vec![("C", &c.forkcreat), ("C, Rust's mappings", &c.forkcreat_image)]
        });
        push(
            format!("forkcreat --reap {mode}"),
            Kind::Fork,
            &bins[0],
            vec!["-n".into(), n.to_string(), "--reap".into(), mode.to_string()],
            twins,
            vec![n.to_string(), mode.to_string()],
        );
    }
    push(
        "pthreadcreat".into(),
        Kind::Thread,
        &bins[1],
        vec!["-n".into(), n.to_string()],
        c.map_or(Vec::new(), |c| vec![("C", &c.pthreadcreat)]),
        vec![n.to_string()],
    );
    list
}

/// The order of `list` in round `round`, by the lab's one schedule
/// ([`crate::stats::round_order`]) applied twice: the groups rotate, so
/// drift does not favour one program, and within a group a Rust program
/// and its C twins run back to back, each in turn first.
pub(super) fn order(list: &[Loop], round: usize) -> Vec<usize> {
    let groups = list.last().map_or(0, |l| l.group + 1);
    let mut order = Vec::with_capacity(list.len());
    for g in crate::stats::round_order(groups, round) {
        let members: Vec<usize> =
            (0..list.len()).filter(|&i| list[i].group == g).collect();
        let turn = crate::stats::round_order(members.len(), round);
        order.extend(turn.into_iter().map(|k| members[k]));
    }
    order
}

// ANCHOR: run_loop
/// One run of a create+destroy loop (Rust or C; both print the same
/// report): check that every creation succeeded and take the program's own
/// microseconds per create+destroy, and the wall seconds of the process.
pub(super) fn run_loop(l: &Loop) -> Result<(f64, f64)> {
    let mut cmd = Command::new(&l.path);
    cmd.args(&l.args);
    let what = format!("{} {}", l.label, l.args.join(" "));
    let (wall, (failed, us)) = match l.kind {
        Kind::Fork => {
            run_json(cmd, &what).map(|(r, cost): (forkcreat::Report, _)| {
                (cost.wall_s, (r.failed, r.end.us_per_create))
            })?
        }
        Kind::Thread => {
            run_json(cmd, &what).map(|(r, cost): (pthreadcreat::Report, _)| {
                (cost.wall_s, (r.failed, r.end.us_per_create))
            })?
        }
    };
    match us {
        Some(us) if failed == 0 => Ok((us, wall)),
        _ => Err(Error::failed(format!("{what}: {failed} creations failed"))),
    }
}
// ANCHOR_END: run_loop

/// One creattime run's figures.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Ct {
    pub fork_ms: f64,
    pub thread_ms: f64,
    pub zombies: f64,
}

/// One run of creattime (or creattime.c) at `samples`.
pub(super) fn run_creattime(path: &Path, samples: u64) -> Result<Ct> {
    let mut cmd = Command::new(path);
    cmd.args([samples.to_string(), "--json".into()]);
    let what = format!("{} {samples}", path.display());
    let (r, _): (creattime::Report, _) = run_json(cmd, &what)?;
    match (r.fork.average_ms, r.thread.average_ms) {
        (Some(fork_ms), Some(thread_ms)) => {
            Ok(Ct { fork_ms, thread_ms, zombies: r.zombies_before_reaping as f64 })
        }
        _ => Err(Error::failed(format!("{what}: no fork or no thread was created"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(groups: &[usize]) -> Vec<Loop> {
        groups
            .iter()
            .map(|&group| Loop {
                label: String::new(),
                path: PathBuf::new(),
                args: Vec::new(),
                kind: Kind::Fork,
                twin_of: None,
                group,
            })
            .collect()
    }

    #[test]
    fn groups_rotate_and_twins_take_turns_first() {
        // forkcreat and its two C twins, then pthreadcreat and its twin.
        let l = list(&[0, 0, 0, 1, 1]);
        assert_eq!(order(&l, 0), [0, 1, 2, 3, 4]);
        assert_eq!(order(&l, 1), [4, 3, 1, 2, 0]);
        assert_eq!(order(&l, 2), [2, 0, 1, 3, 4]);
        // Without C twins: the programs alternate, as round_order does.
        let l = list(&[0, 1]);
        assert_eq!(order(&l, 0), [0, 1]);
        assert_eq!(order(&l, 1), [1, 0]);
        assert!(order(&[], 3).is_empty());
    }
}
