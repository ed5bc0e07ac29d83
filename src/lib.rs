//! The runner of the process-vs-thread lab: `lab list`, `lab run NAME`,
//! `lab run all`, `lab compare`.
//!
//! Each experiment runs the article programs as whole processes, the way the
//! articles ran `time ./fork`, prints the article-style tables and writes a
//! run folder (JSON with the machine, the tables as Markdown, SVG charts):
//! a reader's own under `runs/`, or, with `--reference`, the committed
//! reference run under `results/` that the book shows ([`runs`]).

pub mod bins;
pub mod book;
pub mod chart;
pub mod checkout;
pub mod claims;
pub mod class;
pub mod compare;
pub mod document;
pub mod edition;
pub mod engine;
pub mod experiments;
pub mod machine;
pub mod plan;
pub mod progress;
pub mod report;
pub mod results;
pub mod runs;
pub mod schedule;
pub mod schema;
pub mod service;
pub mod stats;
pub mod table;

use std::ffi::OsString;
use std::time::Instant;

use clap::{Parser, Subcommand};
use labkit::Error;

/// Run the process-vs-thread experiments on this machine.
/// Exit status: 0 ok, 1 an experiment failed, 2 bad usage, 128+N on signal N
/// (SIGINT, SIGTERM, SIGHUP: every program stopped, temporary files removed).
#[derive(Parser)]
#[command(
    name = "lab",
    version,
    after_help = "Environment:\n  LAB_CHECKOUT=DIR  The lab checkout whose runs/ and results/ are used \
                  [default: the tree this lab binary sits in]"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the experiments
    List,
    /// Run one experiment, `lab run NAME [OPTIONS]` (`lab run NAME --help`
    /// lists its options), or every one, `lab run all`
    #[command(disable_help_flag = true)]
    Run {
        /// The experiment, as `lab list` names it, or `all`
        #[arg(allow_hyphen_values = true)]
        name: String,
        /// Options for the experiment
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Print the then-and-now table (every claim of the articles and its
    /// verdict) for a run [default: the reference run the book shows]
    Verdicts {
        /// A run folder, or its name under runs/ or results/
        run: Option<String>,
        /// Print Markdown, as the book shows it
        #[arg(long)]
        markdown: bool,
    },
    /// Make the committed reference run the book shows: every experiment's
    /// reference runs, with `--reference`, from a clean commit, into
    /// results/<date>-<host>/ (or results/$LAB_RUN_ID/)
    Reference,
    /// Run the lab's test suite (`cargo test --release ARGS`, in the lab's
    /// checkout) and end with how many tests skipped, and why
    #[command(disable_help_flag = true)]
    Test {
        /// Arguments for `cargo test --release`
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Build your own edition of the book: every chapter's figures, tables,
    /// charts and verdicts from your run, each beside the book's; a sentence
    /// your run contradicts is marked. Given a folder of runs (a class's):
    /// per figure the median and range across the runs, per claim how many
    /// gave each verdict. Prints the path of the edition's index.html
    Book {
        /// A run folder, or its name under runs/; or a folder of runs
        /// [default: your latest finished run]
        run: Option<String>,
        /// Build it into DIR, a new or empty folder or an earlier edition
        /// [default: RUN/book/ (a class's: DIR/book/); never into results/]
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Put a run beside another: by default your latest run (runs/) beside
    /// the reference run the book shows (results/). Given three or more
    /// runs, or one folder that holds runs (a class's), put them all side
    /// by side: per claim, how many runs give each verdict, and the
    /// figure's median and range across them
    Compare {
        /// RUN [AGAINST] (two different runs): a run folder, or its name under runs/ or results/
        /// [default: your latest run, against the reference run]; or three or
        /// more runs; or one folder of runs
        runs: Vec<String>,
        /// Write compare.md and compare.json (a class: class.md and
        /// class.json) into DIR [default: into RUN, if it is a finished run
        /// of yours under runs/; a class's into its folder; never into
        /// results/]
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
}

/// One line per experiment: name and summary.
fn list(indent: &str) -> String {
    let line = |e: &experiments::Experiment| {
        format!("{indent}{:<16} {}\n", e.name, e.about)
    };
    experiments::every().map(line).collect()
}

pub fn main(args: Vec<OsString>) -> labkit::Result<()> {
    let command = labkit::cli::parse_outer::<Cli, _, _>(args).command;
    if labkit::cli::parse_only() {
        // Only the flags are checked: an experiment's own, by its parser.
        return match command {
            Command::Run { name, .. } if name == "--help" || name == "-h" => Ok(()),
            Command::Run { name, args } if name == "all" => {
                all_flags(args).map(drop)
            }
            Command::Run { name, args } => {
                plan::Plan::parse(find(&name)?, args).map(drop)
            }
            _ => Ok(()),
        };
    }
    if !matches!(command, Command::List) {
        // Where runs go, found from this binary's place (or LAB_CHECKOUT).
        checkout::check()?;
    }
    match command {
        Command::List => labkit::error::print(&list("")),
        Command::Test { args } => test(args),
        Command::Reference => reference(),
        Command::Compare { runs, out } => compare::main(runs, out),
        Command::Book { run, out } => edition::main(run, out),
        Command::Verdicts { run, markdown } => verdicts(run, markdown),
        Command::Run { name, .. } if name == "--help" || name == "-h" => {
            labkit::error::print(&format!(
                "Run one experiment; `lab run NAME --help` lists its options.\n\n\
                 Usage: lab run NAME [OPTIONS]\n       lab run all [--cpus LIST]\n\n\
                 Experiments:\n{}",
                list("  ")
            ))
        }
        Command::Run { name, args } if name == "all" => run_all(all_flags(args)?),
        Command::Run { name, args } => {
            let plan = plan::Plan::parse(find(&name)?, args)?;
            runs::sweep_and_say();
            run_one(plan)
        }
    }
}

/// `lab reference`: every step of [`schedule::reference_plan`], in order,
/// each as `lab run NAME ... --reference` (more rounds where a claim is too
/// close to call); the first that fails stops it.
fn reference() -> labkit::Result<()> {
    runs::sweep_and_say();
    // A dirty checkout is refused here, before the first step.
    runs::begin_reference()?;
    let steps = schedule::reference_plan();
    let total = steps.len();
    for (i, step) in steps.into_iter().enumerate() {
        eprintln!("lab: [{}/{total}] {}", i + 1, step.command());
        run_one(step.plan)?;
    }
    Ok(())
}

/// `lab test [ARGS]`: `cargo test --release ARGS` with every skip logged,
/// then the count of skipped tests and their reasons, and whether the
/// suite finished: a suite that was cut short (a signal, a failing test
/// binary with cargo's fail-fast) says so last, and never ends on a
/// summary that reads as complete. Exits as cargo did (1 if it failed).
fn test(args: Vec<OsString>) -> labkit::Result<()> {
    // The cargo that started us (`cargo lab test`), else the one on PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let dir = labkit::cleanup::tempdir("lab-test-")
        .map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let log = dir.path().join("skipped.txt");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["test", "--release"]).args(&args).env("LAB_SKIP_LOG", &log);
    cmd.current_dir(checkout::root());
    let status = labkit::cleanup::spawn(&mut cmd)
        .and_then(|mut t| t.wait4())
        .map_err(|e| Error::io("cannot run cargo test", e))?
        .0;
    // Interrupted ourselves: the interrupt ends the process here, with its
    // own line, and no summary follows.
    labkit::cleanup::settle();
    let skips = std::fs::read_to_string(&log).unwrap_or_default();
    let mut lines: Vec<&str> = skips.lines().collect();
    lines.sort_unstable();
    let fail_fast = !args.iter().any(|a| a == "--no-fail-fast");
    labkit::error::print(&test_summary(&lines, status, fail_fast))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::failed(format!("cargo test {}", labkit::children::ended(status))))
    }
}

/// What `lab test` ends with: the skipped tests and their reasons, and,
/// for a suite that did not run to its end, a last line saying so.
fn test_summary(
    skipped: &[&str],
    status: std::process::ExitStatus,
    fail_fast: bool,
) -> String {
    use std::os::unix::process::ExitStatusExt;
    let finished = status.success();
    let among = if finished { "" } else { " among the tests that ran" };
    let mut out = if skipped.is_empty() {
        format!("lab test: no test skipped{among}\n")
    } else {
        let reasons: String = skipped.iter().map(|l| format!("  {l}\n")).collect();
        format!(
            "lab test: {} test{} skipped{among} (did not run here):\n{reasons}",
            skipped.len(),
            if skipped.len() == 1 { "" } else { "s" }
        )
    };
    if let Some(sig) = status.signal() {
        out.push_str(&format!(
            "lab test: the suite did not finish: cargo test was killed by {}, so \
             the tests after that point did not run\n",
            labkit::children::signal_name(sig)
        ));
    } else if !finished && fail_fast {
        out.push_str(&format!(
            "lab test: the suite did not finish: cargo test {} (a test or the build \
             failed), and it stops at the first test binary that fails, so the ones \
             after it did not run (--no-fail-fast runs them all)\n",
            labkit::children::ended(status)
        ));
    } else if !finished {
        out.push_str(&format!(
            "lab test: the suite ran to its end with failures: cargo test {}\n",
            labkit::children::ended(status)
        ));
    }
    out
}

fn verdicts(run: Option<String>, markdown: bool) -> labkit::Result<()> {
    let run = compare::resolve_or(run, runs::reference, || {
        format!("no reference run in {}", runs::results_root().display())
    })?;
    let rows = claims::evaluate_checked(&run)?;
    let name =
        run.file_name().map_or("?".into(), |n| n.to_string_lossy().into_owned());
    // Which rules judged it, once: those stored with it, or today's.
    let rules = claims::Rules::of(&run)?;
    labkit::error::print(&if markdown {
        let md = claims::markdown(&rows, &name, &|_| None);
        format!("{md}\nJudged by {}.\n", rules.describe())
    } else {
        format!("{}\nJudged by {}.\n", claims::text(&rows), rules.describe())
    })?;
    for line in claims::Busy::of(&run)?.lines() {
        eprintln!("lab: note: {line}");
    }
    // Figures from older programs: how much older.
    if let Some(behind) = runs::commits_behind(&run) {
        eprintln!("lab: {behind}");
    }
    Ok(())
}

fn find(name: &str) -> labkit::Result<&'static experiments::Experiment> {
    experiments::find(name).ok_or_else(|| {
        let names: Vec<&str> = experiments::every().map(|e| e.name).collect();
        Error::usage(format!(
            "unknown experiment '{name}'; experiments: {}, or all",
            names.join(", ")
        ))
    })
}

/// `lab run all`'s own flags, checked before anything starts (a bad one
/// is a usage error of one line, with no run folder).
fn all_flags(args: Vec<OsString>) -> labkit::Result<schedule::AllArgs> {
    let argv = std::iter::once(OsString::from("lab run all")).chain(args);
    Ok(labkit::cli::parse_outer::<schedule::AllArgs, _, _>(argv))
}

/// Run one experiment and move its finished results into place: a new run
/// folder, or the reference. A failed run leaves nothing behind. Returns
/// the run folder and the results' folder in it (`NAME`, `NAME/VARIANT`),
/// none with `--out`.
fn run_once(
    plan: &plan::Plan,
    ctx: &report::Context,
) -> labkit::Result<Option<(std::path::PathBuf, String)>> {
    // The heap an earlier run freed (of `run all`, of the reference, or
    // before added rounds), back to the kernel: every program is started by
    // fork (its pre_exec sets the death signal), whose cost grows with the
    // runner's memory. After thread-limits and footprint the runner held
    // 83 MB, and pipe-speed's 3,000 runs took 62 to 71 s inside `run all`
    // against 32 to 42 s alone; trimmed, 46 MB and 41 to 47 s.
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    // `--cpus` confines the runner itself: the next step gets its CPUs back.
    let cpus = labkit::affinity::allowed_cpus().ok();
    let result = (plan.experiment.run)(ctx, plan);
    if let Some(cpus) = cpus {
        labkit::affinity::set_allowed(&cpus)?;
    }
    // Held until the results are committed or discarded: an interrupt
    // meanwhile waits, then finds nothing half done (runs::pending).
    let mut held = runs::pending();
    let Some(pending) = held.take() else { return result.map(|()| None) };
    if pending.owns_run && result.is_ok() {
        // From here on the run folder holds, or is about to hold, finished
        // results: a runner killed now must not have its guard remove them
        // (a folder left half done is the next run's sweep's to judge).
        labkit::cleanup::keep_if_killed(&pending.run);
    }
    if let Err(e) = result.and_then(|()| pending.commit()) {
        pending.discard();
        return Err(e);
    }
    drop(held);
    eprintln!("lab: results written to {}", pending.target.display());
    let folder = pending
        .target
        .strip_prefix(&pending.run)
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Some((pending.run, folder)))
}

/// `lab run NAME`: run it; when a claim on its results is too close to
/// call, again with more rounds ([`schedule::extend`]); then the
/// then-and-now table of its run.
fn run_one(plan: plan::Plan) -> labkit::Result<()> {
    let Some((run, _)) = run_once(&plan, &report::Context::alone())? else {
        return Ok(());
    };
    // Judged by today's rules from here on, whatever it was judged by
    // before (a reference made again): they are stored with it.
    claims::store_rules(&run)?;
    schedule::extend(
        &run,
        &|_| Some(plan.clone()),
        &|_| None,
        None,
        &|plan, ctx| run_once(&plan, ctx).map(drop),
    )?;
    let rows = claims::write(&run)?;
    // Finished only now, with its added rounds and its verdicts: a run cut
    // short before this is never "your latest finished run". The
    // reference ends here too, until the next reference command adds to it.
    runs::finish(&run, &[])?;
    for line in claims::Busy::of(&run)?.lines() {
        eprintln!("lab: note: {line}");
    }
    if rows.iter().any(|r| r.busy.is_some()) {
        eprintln!(
            "lab: note: its verdicts are marked busy (`lab verdicts {}`)",
            run.display()
        );
    }
    Ok(())
}

/// `lab run all [--cpus LIST]`: every experiment into one run folder, with
/// the lighter settings each names for `all`, the one-CPU runs the claims
/// ask for and the controls ([`schedule::plan`]), a progress line per
/// step, more rounds where a claim is too close to call while the budget
/// allows, and the then-and-now table at the end.
fn run_all(all: schedule::AllArgs) -> labkit::Result<()> {
    runs::sweep_and_say();
    let run = runs::new_run()?;
    let ctx = report::Context::within(run.clone());
    let started = Instant::now();
    let steps = schedule::plan(&all);
    if let Some(n) = all.rounds {
        // Each step's own rounds under all, as the plan makes them unasked.
        let own = schedule::plan(&schedule::AllArgs { rounds: None, ..all.clone() });
        let most = own.iter().map(|s| s.plan.common.rounds).max().unwrap_or(0);
        if n > most {
            eprintln!(
                "lab: note: --rounds {n} runs every step {n} rounds, where its own \
                 are {most} at most: this run takes longer than run all's 4 to 5 \
                 minutes"
            );
        }
    }
    let total = steps.len();
    let mut failed = Vec::new();
    let mut took = std::collections::BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let folder = step.folder();
        eprintln!("lab: [{}/{total}] {folder}: {}", i + 1, step.command());
        let t = Instant::now();
        match run_once(&step.plan, &ctx) {
            Ok(_) => {
                took.insert(folder.clone(), t.elapsed());
                eprintln!(
                    "lab: [{}/{total}] {folder}: done in {:.0} s",
                    i + 1,
                    t.elapsed().as_secs_f64()
                )
            }
            Err(err) => {
                eprintln!("lab: [{}/{total}] {folder}: failed: {err}", i + 1);
                failed.push(folder);
            }
        }
    }
    if runs::experiments_in(&run).is_empty() {
        // Nothing finished: no run to keep, nothing to judge.
        let _ = std::fs::remove_dir_all(&run);
        return Err(Error::failed(format!(
            "every experiment failed ({}); no run kept",
            failed.join(", ")
        )));
    }
    let step_of = |folder: &str| {
        steps.iter().find(|s| s.folder() == folder).map(|s| s.plan.clone())
    };
    claims::store_rules(&run)?;
    let extended = schedule::extend(
        &run,
        &step_of,
        &|folder| took.get(folder).copied(),
        Some(started + schedule::BUDGET - schedule::TAIL),
        &|plan, ctx| run_once(&plan, ctx).map(drop),
    );
    if let Err(e) = extended {
        eprintln!("lab: more rounds failed: {e}");
        failed.push("more rounds".into());
    }
    runs::finish(&run, &failed.iter().map(String::as_str).collect::<Vec<_>>())?;
    for line in claims::Busy::of(&run)?.lines() {
        eprintln!("lab: note: {line}");
    }
    let rows = claims::write(&run)?;
    labkit::error::print(&format!("\n{}", claims::text(&rows)))?;
    let lighter: Vec<String> = steps
        .iter()
        .filter(|s| s.plan.common.variant.is_none())
        .filter(|s| {
            s.plan.command() != format!("lab run {}", s.plan.experiment.name)
        })
        .map(|s| s.command().replacen("lab run ", "", 1))
        .collect();
    eprintln!(
        "lab: lighter settings than their own defaults, under all: {}",
        lighter.join("; ")
    );
    eprintln!(
        "lab: all {total} steps in {:.0} s; run written to {}; \
         `lab compare` puts it beside the reference, and `lab book` builds your \
         edition of the book from it",
        started.elapsed().as_secs_f64(),
        run.display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::failed(format!("failed: {}", failed.join(", "))))
    }
}

#[cfg(test)]
mod tests {
    /// An experiment that confines itself, as `--cpus 0` does.
    fn confined(_: &report::Context, _: &plan::Plan) -> labkit::Result<()> {
        labkit::affinity::confine(&[0])
    }

    #[derive(clap::Parser, Clone)]
    struct DemoArgs {
        #[command(flatten)]
        common: report::Common,
    }
    crate::options!(DemoArgs);

    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_suite_cut_short_never_reads_as_complete() {
        let ok = std::process::ExitStatus::from_raw(0);
        let failed = std::process::ExitStatus::from_raw(101 << 8);
        let killed = std::process::ExitStatus::from_raw(libc::SIGINT);
        assert_eq!(test_summary(&[], ok, true), "lab test: no test skipped\n");
        let one = test_summary(&["t: skipped: no perf"], ok, true);
        assert!(
            one.starts_with("lab test: 1 test skipped (did not run here)"),
            "{one}"
        );
        let cut = test_summary(&[], killed, true);
        assert!(
            cut.starts_with("lab test: no test skipped among the tests that ran\n")
        );
        assert!(
            cut.lines()
                .last()
                .unwrap()
                .contains("did not finish: cargo test was killed by SIGINT"),
            "{cut}"
        );
        let stopped = test_summary(&["a", "b"], failed, true);
        assert!(
            stopped.contains("2 tests skipped among the tests that ran"),
            "{stopped}"
        );
        assert!(
            stopped.lines().last().unwrap().contains("did not finish"),
            "{stopped}"
        );
        let all = test_summary(&[], failed, false);
        assert!(
            all.lines().last().unwrap().contains("ran to its end with failures"),
            "{all}"
        );
    }

    #[test]
    fn a_confined_step_gives_the_runner_its_cpus_back() {
        let before = labkit::affinity::allowed_cpus().unwrap();
        static E: experiments::Experiment = experiments::Experiment::new::<DemoArgs>(
            "demo",
            "confines itself",
            confined,
        );
        let plan = plan::Plan::parse(&E, Vec::new()).unwrap();
        assert!(run_once(&plan, &report::Context::alone()).unwrap().is_none());
        assert_eq!(labkit::affinity::allowed_cpus().unwrap(), before);
    }
}
