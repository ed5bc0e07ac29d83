//! What `lab run all` runs, and the rounds an experiment adds when a claim
//! is too close to call.
//!
//! The plan is derived, not listed: every experiment with its lighter
//! settings for `all`; a one-CPU run (`NAME/cpu0`, `--cpus 0`) of every
//! experiment that a `one_cpu` claim in `claims.toml` judges, so that the
//! reader's verdicts rest on the settings the reference's do; then the
//! controls.
//!
//! When a claim's interval straddles a boundary, the results it was judged
//! on are made again with three times the rounds ([`ROUND_CAP`]), once: a
//! second look, on fresh rounds, decided at a higher level so that the two
//! looks together are wrong at most 5% of the time
//! ([`crate::stats::LOOK_ERROR`]). The results record it (`rounds
//! extended`, with the first look's figures). Under `lab run all` only
//! while the whole run stays within [`BUDGET`].

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use labkit::Result;

use crate::claims::{self, Verdict};
use crate::experiments::{self, Experiment};
use crate::report::{Context, Published};

/// How many times its rounds an experiment may run, at most.
pub const ROUND_CAP: u32 = 3;

/// The wall time `lab run all` keeps to on 2 cores, extensions included.
pub const BUDGET: Duration = Duration::from_secs(300);

/// What an extension must leave of the budget: an estimate is only an
/// estimate, and the then-and-now table comes after.
pub const MARGIN: Duration = Duration::from_secs(20);

/// One step of `lab run all`: an experiment, its arguments, and the folder
/// of the run its results go to (`NAME` or `NAME/VARIANT`).
pub struct Step {
    pub experiment: &'static Experiment,
    pub args: Vec<OsString>,
    pub folder: String,
}

impl Step {
    /// The step as the command a reader would type: `lab run NAME ARGS`.
    pub fn command(&self) -> String {
        let mut words =
            vec!["lab run".to_string(), self.experiment.name.to_string()];
        words.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        words.join(" ")
    }
}

/// An experiment's own arguments under `all`, `own`, with `--rounds` given
/// to `all` in place of its own, then `extra` (`all`'s flags).
fn args_under_all(own: &[&str], extra: &[OsString]) -> Vec<OsString> {
    let rounds_given = extra.iter().any(|a| a == "--rounds");
    let mut args: Vec<OsString> = Vec::new();
    let mut own = own.iter();
    while let Some(a) = own.next() {
        if rounds_given && *a == "--rounds" {
            own.next();
            continue;
        }
        args.push(a.into());
    }
    args.extend(extra.iter().cloned());
    args
}

/// Does a claim ask for a one-CPU run of `experiment`?
fn wants_one_cpu(experiment: &str) -> bool {
    claims::all()
        .iter()
        .any(|c| c.one_cpu && c.figure_ref().is_some_and(|(e, _)| e == experiment))
}

/// The steps of `lab run all` with `all`'s flags `extra`. A run confined
/// with `--cpus` makes no one-CPU runs of its own: it is one already, or
/// was asked not to be.
pub fn plan(extra: &[OsString]) -> Vec<Step> {
    let confined = extra.iter().any(|a| a == "--cpus");
    let mut steps = Vec::new();
    for e in experiments::every() {
        let args = args_under_all(e.all_args, extra);
        if !confined && wants_one_cpu(e.name) {
            let mut one =
                args_under_all(e.one_cpu_args.unwrap_or(e.all_args), extra);
            one.extend(["--variant", "cpu0", "--cpus", "0"].map(OsString::from));
            steps.push(Step {
                experiment: e,
                args: args.clone(),
                folder: e.name.into(),
            });
            steps.push(Step {
                experiment: e,
                args: one,
                folder: format!("{}/cpu0", e.name),
            });
        } else {
            steps.push(Step { experiment: e, args, folder: e.name.into() });
        }
    }
    steps
}

/// The steps of `lab reference`: every experiment's reference runs
/// ([`Experiment::reference`]), each with `--reference`, and right after
/// its first a one-CPU run (`NAME/cpu0`) where a claim asks for one.
pub fn reference_plan() -> Vec<Step> {
    let mut steps = Vec::new();
    for e in experiments::every() {
        for (k, own) in e.reference.iter().enumerate() {
            let mut args: Vec<OsString> = own.iter().map(OsString::from).collect();
            args.push("--reference".into());
            let variant = own
                .iter()
                .position(|a| *a == "--variant")
                .and_then(|i| own.get(i + 1));
            let folder = match variant {
                Some(v) => format!("{}/{v}", e.name),
                None => e.name.to_string(),
            };
            steps.push(Step { experiment: e, args, folder });
            if k == 0 && wants_one_cpu(e.name) {
                let args = ["--reference", "--variant", "cpu0", "--cpus", "0"]
                    .map(OsString::from);
                steps.push(Step {
                    experiment: e,
                    args: args.to_vec(),
                    folder: format!("{}/cpu0", e.name),
                });
            }
        }
    }
    steps
}

/// `args` with `--rounds n` in place of any rounds they gave.
fn with_rounds(args: &[OsString], n: u32) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let text = a.to_string_lossy();
        if text == "--rounds" {
            it.next();
        } else if !text.starts_with("--rounds=") {
            out.push(a.clone());
        }
    }
    out.extend(["--rounds".into(), n.to_string().into()]);
    out
}

/// A folder whose results a claim found too close to call: the claims, and
/// the rounds the results ran.
struct Close {
    folder: String,
    ids: Vec<String>,
    /// Each claim's first look, in words: its figure and interval.
    looks: Vec<String>,
    rounds: u32,
}

/// The folders of run `run` on which some claim is too close to call and
/// whose rounds were not extended yet.
fn close_folders(run: &Path) -> Result<Vec<Close>> {
    let mut out: Vec<Close> = Vec::new();
    for row in claims::evaluate(run)? {
        if !matches!(row.verdict, Verdict::TooCloseToCall(_)) {
            continue;
        }
        // A one-CPU claim judged, for want of a one-CPU run, on another:
        // its own run is still to come (or was not asked for).
        if row.claim.one_cpu && row.judged_on != "1 CPU" {
            continue;
        }
        let look = format!(
            "{} at look 1: {}",
            row.claim.id,
            row.today_text().unwrap_or_default()
        );
        if let Some(c) = out.iter_mut().find(|c| c.folder == row.results) {
            c.ids.push(row.claim.id.clone());
            c.looks.push(look);
            continue;
        }
        let experiment = row.results.split('/').next().unwrap_or(&row.results);
        let Some(p) = Published::read(&run.join(&row.results), experiment)? else {
            continue;
        };
        if p.header.settings.used.contains_key(EXTENDED) {
            continue; // at its cap already
        }
        out.push(Close {
            folder: row.results.clone(),
            ids: vec![row.claim.id.clone()],
            looks: vec![look],
            rounds: p.header.settings.rounds,
        });
    }
    Ok(out)
}

/// What made a results folder: the experiment and its arguments.
pub type StepOf<'a> =
    dyn Fn(&str) -> Option<(&'static Experiment, Vec<OsString>)> + 'a;

/// How a folder's results are made again: as the first time, with these
/// arguments, into this context.
pub type Again<'a> =
    dyn Fn(&'static Experiment, Vec<OsString>, &Context) -> Result<()> + 'a;

pub use crate::claims::EXTENDED;

/// Make again, with [`ROUND_CAP`] times the rounds, the results of run
/// `run` that a claim found too close to call. `step(folder)` gives the
/// experiment and arguments that made a folder; `took(folder)` how long
/// that took; with a `deadline`, a folder whose estimated time would pass
/// it is left as it is, and said so. `run` makes the results again, as the
/// first time.
pub fn extend(
    run: &Path,
    step: &StepOf,
    took: &dyn Fn(&str) -> Option<Duration>,
    deadline: Option<Instant>,
    again: &Again,
) -> Result<()> {
    for close in close_folders(run)? {
        let Some((experiment, args)) = step(&close.folder) else { continue };
        let more = (close.rounds * ROUND_CAP).min(1000);
        if more <= close.rounds {
            continue;
        }
        let ids = close.ids.join(", ");
        if let (Some(deadline), Some(took)) = (deadline, took(&close.folder)) {
            let estimate = took.mul_f64(f64::from(more) / f64::from(close.rounds));
            if Instant::now() + estimate > deadline {
                eprintln!(
                    "lab: {ids} too close to call at {} rounds in {}; not extended: \
                     {more} rounds (about {:.0} s) would not fit in run all's {} s",
                    close.rounds,
                    close.folder,
                    estimate.as_secs_f64(),
                    BUDGET.as_secs()
                );
                continue;
            }
        }
        eprintln!(
            "lab: {ids} too close to call at {} rounds; making {} again with {more} \
             rounds (the cap, {ROUND_CAP}x)",
            close.rounds, close.folder
        );
        let ctx = Context::within(run.to_path_buf()).recording(
            EXTENDED,
            format!(
                "{} to {more} (cap {ROUND_CAP}x), look 2 of {}: {}",
                close.rounds,
                crate::stats::LOOKS,
                close.looks.join("; ")
            ),
        );
        again(experiment, with_rounds(&args, more), &ctx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(steps: &[Step]) -> Vec<&str> {
        steps.iter().map(|s| s.folder.as_str()).collect()
    }

    #[test]
    fn the_plan_adds_a_one_cpu_run_where_a_claim_asks_and_the_controls() {
        let steps = plan(&[]);
        let folders = names(&steps);
        for one in ["fork-vs-thread/cpu0", "create-destroy/cpu0", "mq-sweep/cpu0"] {
            assert!(folders.contains(&one), "{folders:?}");
        }
        assert!(!folders.contains(&"pipe-speed/cpu0"), "{folders:?}");
        assert_eq!(folders.last(), Some(&"controls"));
        let cpu0 = steps.iter().find(|s| s.folder == "mq-sweep/cpu0").unwrap();
        let args: Vec<_> = cpu0.args.iter().map(|a| a.to_string_lossy()).collect();
        let servers = ["--redis-io-threads", "1", "--nats-gomaxprocs", "2"];
        let pipelined = ["--pipeline", "1,16", "--pipelined-threads", "10"];
        // Its one-CPU claims' points only, at the rounds a verdict needs.
        assert_eq!(
            args,
            [
                &["--rounds", "6", "--threads", "10,100"][..],
                &servers,
                &["--pipeline", "1"],
                &["--variant", "cpu0", "--cpus", "0"]
            ]
            .concat()
        );
        // Confined by --cpus: no one-CPU runs of its own.
        let confined = plan(&["--cpus".into(), "0".into()]);
        assert!(!names(&confined).iter().any(|f| f.ends_with("/cpu0")));
        // --rounds given to all replaces an experiment's own.
        let given = plan(&["--rounds".into(), "7".into()]);
        let mq = given.iter().find(|s| s.folder == "mq-sweep").unwrap();
        let args: Vec<_> = mq.args.iter().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, [&servers[..], &pipelined, &["--rounds", "7"]].concat());
    }

    #[test]
    fn the_reference_plan_has_every_experiment_and_its_one_cpu_runs() {
        let steps = reference_plan();
        let folders = names(&steps);
        for e in experiments::every() {
            assert!(folders.contains(&e.name), "{folders:?}");
        }
        // fork-vs-thread's own settings first, then its one-CPU run.
        let at = folders.iter().position(|f| *f == "fork-vs-thread").unwrap();
        assert_eq!(folders[at + 1], "fork-vs-thread/cpu0");
        for s in &steps {
            assert!(s.args.iter().any(|a| a == "--reference"), "{}", s.folder);
        }
        assert!(folders.contains(&"ctx-switch/cross-long"), "{folders:?}");
    }

    #[test]
    fn rounds_are_replaced_not_added() {
        let args: Vec<OsString> = ["--rounds", "3", "--cpus", "0", "--rounds=4"]
            .map(OsString::from)
            .to_vec();
        let out: Vec<_> = with_rounds(&args, 9)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(out, ["--cpus", "0", "--rounds", "9"]);
    }
}
