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

use std::path::Path;
use std::time::{Duration, Instant};

use labkit::Result;

use crate::claims::{self, Verdict};
use crate::experiments;
use crate::plan::Plan;
use crate::report::{Context, CpuList, Published};

/// How many times its rounds an experiment may run, at most.
pub const ROUND_CAP: u32 = 3;

/// The wall time `lab run all` keeps to on 2 cores, extensions included.
pub const BUDGET: Duration = Duration::from_secs(300);

/// What `lab run all` keeps of its budget after its last look: the
/// verdicts and the then-and-now table, a second or two.
pub const TAIL: Duration = Duration::from_secs(5);

/// A second look is allowed this many times its [`estimate`]: the host's
/// slow spells stretch a run (create-destroy/cpu0's 18 rounds took 57 s
/// in the reference, where three times its 6 rounds in a `lab run all`
/// gave 47 s).
pub const ALLOW: f64 = 1.25;

/// How long a second look at `more` rounds should take, when its first
/// look at `rounds` took `took`: that time scaled to the rounds.
fn estimate(took: Duration, rounds: u32, more: u32) -> Duration {
    took.mul_f64(f64::from(more) / f64::from(rounds))
}

/// `lab run all`'s own flags, which every step takes.
#[derive(clap::Parser, Clone, Debug, Default)]
#[command(
    name = "lab run all",
    about = "Run every experiment, each with its lighter settings for `all`, a \
             one-CPU run of each that a one-CPU claim judges, and the controls, \
             into one run folder under runs/"
)]
pub struct AllArgs {
    /// Confine the whole run to these CPUs, e.g. 0 (then no separate
    /// one-CPU runs; on one CPU, what a one-CPU claim judges runs as its
    /// one-CPU run would)
    #[arg(long, value_name = "LIST", value_parser = crate::report::parse_allowed_cpus)]
    pub cpus: Option<CpuList>,

    /// Rounds per setting in every experiment [default: each experiment's
    /// own under all]
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: Option<u32>,
}

/// One step of `lab run all` or `lab reference`: a plan, whose folder in
/// the run is `NAME` or `NAME/VARIANT`.
#[derive(Clone, Debug)]
pub struct Step {
    pub plan: Plan,
}

impl Step {
    pub fn folder(&self) -> String {
        self.plan.folder()
    }

    /// The step as the command a reader would type.
    pub fn command(&self) -> String {
        self.plan.command()
    }
}

/// Does a claim ask for a one-CPU run of `experiment`?
fn wants_one_cpu(experiment: &str) -> bool {
    claims::all()
        .iter()
        .any(|c| c.one_cpu && c.figure_ref().is_some_and(|(e, _)| e == experiment))
}

/// The steps of `lab run all` with its flags `all`. A run confined with
/// `--cpus` makes no one-CPU runs of its own: it is one already, or was
/// asked not to be. Confined to one CPU, an experiment that a one-CPU
/// claim judges runs as its one-CPU run would (`--vs-c` for
/// fork-vs-thread's C programs, six rounds where `all` has two), in its
/// own folder: that run is the one the claims are judged on.
pub fn plan(all: &AllArgs) -> Vec<Step> {
    let with_all = |mut plan: Plan| {
        if let Some(n) = all.rounds {
            plan.common.rounds = n;
        }
        if let Some(cpus) = &all.cpus {
            plan.common.cpus = Some(cpus.clone());
        }
        Step { plan }
    };
    let one_cpu_run = all.cpus.as_ref().is_some_and(|c| c.cpus.len() == 1);
    let mut steps = Vec::new();
    for e in experiments::every() {
        let one = e.one_cpu_under_all.unwrap_or(e.one_cpu);
        if one_cpu_run && wants_one_cpu(e.name) {
            steps.push(with_all(one.plan(e)));
            continue;
        }
        steps.push(with_all(e.under_all.plan(e)));
        if all.cpus.is_none() && wants_one_cpu(e.name) {
            steps.push(with_all(one.plan(e).confined(&[0], "cpu0")));
        }
    }
    steps
}

/// The steps of `lab reference`: every experiment's reference runs
/// ([`experiments::Experiment::reference`]), each as the reference, and
/// right after its first a one-CPU run (`NAME/cpu0`) where a claim asks
/// for one.
pub fn reference_plan() -> Vec<Step> {
    let mut steps = Vec::new();
    for e in experiments::every() {
        for (k, declared) in e.reference.iter().enumerate() {
            steps.push(Step { plan: declared.plan(e).as_reference() });
            if k == 0 && wants_one_cpu(e.name) {
                let plan = e.one_cpu.plan(e).confined(&[0], "cpu0");
                steps.push(Step { plan: plan.as_reference() });
            }
        }
    }
    steps
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

/// How a folder's results are made again: this plan, into this context.
pub type Again<'a> = dyn Fn(Plan, &Context) -> Result<()> + 'a;

pub use crate::claims::EXTENDED;

/// Make again, with [`ROUND_CAP`] times the rounds, the results of run
/// `run` that a claim found too close to call. `step(folder)` gives the
/// plan that made a folder; `took(folder)` how long that took; with a
/// `deadline`, the cheapest go first, and a folder whose allowed time
/// ([`ALLOW`]) would pass the deadline is left as it is, and said so.
/// `again` makes the results again from the plan, with its rounds raised.
pub fn extend(
    run: &Path,
    step: &dyn Fn(&str) -> Option<Plan>,
    took: &dyn Fn(&str) -> Option<Duration>,
    deadline: Option<Instant>,
    again: &Again,
) -> Result<()> {
    let raised = |c: &Close| (c.rounds * ROUND_CAP).min(1000);
    let cost = |c: &Close| {
        let took = took(&c.folder).filter(|_| c.rounds > 0)?;
        Some(estimate(took, c.rounds, raised(c)))
    };
    let mut closes = close_folders(run)?;
    // Where time is short, it decides the most claims spent on the cheapest.
    closes.sort_by_key(|c| cost(c).unwrap_or(Duration::MAX));
    for close in closes {
        let Some(plan) = step(&close.folder) else { continue };
        let more = raised(&close);
        if more <= close.rounds {
            continue;
        }
        let ids = close.ids.join(", ");
        if let Some(deadline) = deadline {
            let Some(estimate) = cost(&close) else {
                eprintln!(
                    "lab: {ids} too close to call in {}; not extended: how long \
                     its first look took is not known",
                    close.folder
                );
                continue;
            };
            let allowed = estimate.mul_f64(ALLOW);
            if Instant::now() + allowed > deadline {
                eprintln!(
                    "lab: {ids} too close to call at {} rounds in {}; not extended: \
                     {more} rounds (about {:.0} s, allowed {:.0}) would not fit in \
                     run all's {} s",
                    close.rounds,
                    close.folder,
                    estimate.as_secs_f64(),
                    allowed.as_secs_f64(),
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
        again(plan.with_rounds(more), &ctx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(steps: &[Step]) -> Vec<String> {
        steps.iter().map(Step::folder).collect()
    }

    fn step<'a>(steps: &'a [Step], folder: &str) -> &'a Plan {
        &steps.iter().find(|s| s.folder() == folder).unwrap().plan
    }

    #[test]
    fn the_plan_adds_a_one_cpu_run_where_a_claim_asks_and_the_controls() {
        let steps = plan(&AllArgs::default());
        let folders = names(&steps);
        for one in ["fork-vs-thread/cpu0", "create-destroy/cpu0", "mq-sweep/cpu0"] {
            assert!(folders.iter().any(|f| f == one), "{folders:?}");
        }
        assert!(!folders.iter().any(|f| f == "pipe-speed/cpu0"), "{folders:?}");
        assert_eq!(folders.last().map(String::as_str), Some("controls"));
        // Its one-CPU claims' points only, at the rounds a verdict needs.
        assert_eq!(
            step(&steps, "mq-sweep/cpu0").command(),
            "lab run mq-sweep --threads 10,100 --no-event-loop --pipeline 1 \
             --no-open-loop --brokers lab --variant cpu0 --cpus 0"
        );
        let mq = step(&steps, "mq-sweep");
        assert_eq!((mq.common.rounds, mq.common.cpus.is_none()), (2, true));
        // Confined by --cpus: no one-CPU runs of its own.
        let cpus = crate::report::parse_allowed_cpus("0").unwrap();
        let confined = plan(&AllArgs { cpus: Some(cpus), rounds: None });
        assert!(!names(&confined).iter().any(|f| f.ends_with("/cpu0")));
        assert!(confined.iter().all(|s| s.plan.common.cpus.is_some()));
        // Confined to one CPU, what a one-CPU claim judges runs as its
        // one-CPU run would; confined to two, as under all.
        assert_eq!(
            step(&confined, "fork-vs-thread").command(),
            "lab run fork-vs-thread --vs-c --cpus 0"
        );
        assert_eq!(step(&confined, "mq-sweep").common.rounds, 6);
        let two = CpuList { text: "0,1".into(), cpus: vec![0, 1] };
        let two = plan(&AllArgs { cpus: Some(two), rounds: None });
        assert_eq!(
            step(&two, "fork-vs-thread").command(),
            "lab run fork-vs-thread --rounds 2 --cpus 0,1"
        );
        // --rounds given to all replaces an experiment's own.
        let given = plan(&AllArgs { cpus: None, rounds: Some(7) });
        assert!(given.iter().all(|s| s.plan.common.rounds == 7));
        assert_eq!(
            step(&given, "mq-sweep").command(),
            "lab run mq-sweep --duration 0.5 --pipeline 1,16 --pipelined-threads 10 \
             --redis-io-threads 1 --nats-gomaxprocs 2 --rounds 7"
        );
    }

    #[test]
    fn a_second_look_is_allowed_a_quarter_more_than_its_estimate() {
        // create-destroy/cpu0 in a `lab run all`: 6 rounds in 15.7 s, so
        // 18 rounds in about 47 s, allowed 59 s.
        let estimate = estimate(Duration::from_secs_f64(15.7), 6, 18);
        let allowed = estimate.mul_f64(ALLOW);
        assert!((allowed.as_secs_f64() - 58.875).abs() < 1e-6, "{allowed:?}");
        // It fits after 235 s of a 300-s budget, not after 263 s.
        let deadline = BUDGET - TAIL;
        assert!(Duration::from_secs(235) + allowed <= deadline);
        assert!(Duration::from_secs(263) + allowed > deadline);
    }

    #[test]
    fn every_declared_run_parses() {
        // A declaration's options are parsed when a plan is made of them:
        // one that does not parse panics here, not in a reader's run.
        let steps = [plan(&AllArgs::default()), reference_plan()].concat();
        assert!(steps.len() > 2 * experiments::every().count());
    }

    #[test]
    fn the_reference_plan_has_every_experiment_and_its_one_cpu_runs() {
        let steps = reference_plan();
        let folders = names(&steps);
        for e in experiments::every() {
            assert!(folders.iter().any(|f| f == e.name), "{folders:?}");
        }
        // fork-vs-thread's own settings first, then its one-CPU run.
        let at = folders.iter().position(|f| f == "fork-vs-thread").unwrap();
        assert_eq!(folders[at + 1], "fork-vs-thread/cpu0");
        assert!(steps.iter().all(|s| s.plan.common.reference));
        assert_eq!(
            step(&steps, "ctx-switch/cross-long").command(),
            "lab run ctx-switch --iterations 100000 --pins cross --rounds 16 \
             --variant cross-long --reference"
        );
        assert_eq!(
            step(&steps, "fork-vs-thread/cpu0").command(),
            "lab run fork-vs-thread --vs-c --variant cpu0 --cpus 0 --reference"
        );
    }

    #[test]
    fn a_plan_edited_says_itself_as_a_command_and_runs_with_its_edits() {
        let e = experiments::find("fork-vs-thread").unwrap();
        let words = ["--procs", "2,3", "--counts=5", "--rounds", "4", "--vs-c"];
        let plan = Plan::parse(e, words.map(std::ffi::OsString::from)).unwrap();
        assert_eq!(
            plan.command(),
            "lab run fork-vs-thread --procs 2,3 --counts 5 --vs-c --rounds 4"
        );
        let plan = plan.with_rounds(12).confined(&[0], "cpu0");
        assert_eq!(
            plan.command(),
            "lab run fork-vs-thread --procs 2,3 --counts 5 --vs-c --rounds 12 \
             --variant cpu0 --cpus 0"
        );
        // The same command parses back to the same plan.
        let words: Vec<std::ffi::OsString> =
            plan.command().split(' ').skip(3).map(Into::into).collect();
        assert_eq!(Plan::parse(e, words).unwrap().command(), plan.command());
    }
}
