//! The runner of the process-vs-thread lab: `lab list`, `lab run NAME`,
//! `lab run all`, `lab compare`.
//!
//! Each experiment runs the article programs as whole processes, the way the
//! articles ran `time ./fork`, prints the article-style tables and writes a
//! run folder (JSON with the machine, the tables as Markdown, SVG charts):
//! a reader's own under `runs/`, or, with `--reference`, the committed
//! reference run under `results/` that the book shows ([`runs`]).

pub mod bars;
pub mod bins;
pub mod book;
pub mod chart;
pub mod claims;
pub mod compare;
pub mod experiments;
pub mod machine;
pub mod progress;
pub mod report;
pub mod results;
pub mod runs;
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
#[command(name = "lab", version)]
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
    /// Put a run beside another: by default your latest run (runs/) beside
    /// the reference run the book shows (results/)
    Compare {
        /// A run folder, or its name under runs/ or results/ [default: your
        /// latest run]
        run: Option<String>,
        /// The run to compare with [default: the reference run]
        against: Option<String>,
    },
}

/// One line per experiment: name and summary.
fn list(indent: &str) -> String {
    let line = |e: &experiments::Experiment| {
        format!("{indent}{:<16} {}\n", e.name, e.about)
    };
    experiments::ALL.iter().map(line).collect()
}

pub fn main(args: Vec<OsString>) -> labkit::Result<()> {
    match labkit::cli::parse_from::<Cli, _, _>(args).command {
        Command::List => labkit::error::print(&list("")),
        Command::Compare { run, against } => compare::main(run, against),
        Command::Verdicts { run, markdown } => verdicts(run, markdown),
        Command::Run { name, .. } if name == "--help" || name == "-h" => {
            labkit::error::print(&format!(
                "Run one experiment; `lab run NAME --help` lists its options.\n\n\
                 Usage: lab run NAME [OPTIONS]\n       lab run all [--cpus LIST]\n\n\
                 Experiments:\n{}",
                list("  ")
            ))
        }
        Command::Run { name, args } if name == "all" => run_all(args),
        Command::Run { name, args } => {
            let experiment = find(&name)?;
            run_one(experiment, args)
        }
    }
}

fn verdicts(run: Option<String>, markdown: bool) -> labkit::Result<()> {
    let run = compare::resolve_or(run, runs::reference, || {
        format!("no reference run in {}", runs::results_root().display())
    })?;
    let rows = claims::evaluate(&run)?;
    let name =
        run.file_name().map_or("?".into(), |n| n.to_string_lossy().into_owned());
    labkit::error::print(&if markdown {
        claims::markdown(&rows, &name)
    } else {
        claims::text(&rows)
    })
}

fn find(name: &str) -> labkit::Result<&'static experiments::Experiment> {
    experiments::find(name).ok_or_else(|| {
        let names: Vec<&str> = experiments::ALL.iter().map(|e| e.name).collect();
        Error::usage(format!(
            "unknown experiment '{name}'; experiments: {}, or all",
            names.join(", ")
        ))
    })
}

/// Run one experiment and move its finished results into place: a new run
/// folder, or the reference. A failed run leaves nothing behind.
fn run_one(
    experiment: &experiments::Experiment,
    args: Vec<OsString>,
) -> labkit::Result<()> {
    let argv =
        std::iter::once(OsString::from(format!("lab run {}", experiment.name)))
            .chain(args)
            .collect();
    let result = (experiment.run)(argv);
    // Held until the results are committed or discarded: an interrupt
    // meanwhile waits, then finds nothing half done (runs::pending).
    let mut held = runs::pending();
    let Some(pending) = held.take() else { return result };
    if let Err(e) = result.and_then(|()| pending.commit()) {
        pending.discard();
        return Err(e);
    }
    drop(held);
    eprintln!("lab: results written to {}", pending.target.display());
    claims::write(&pending.run)?;
    Ok(())
}

/// `lab run all [--cpus LIST]`: every experiment into one run folder, with
/// the lighter settings each names for `all`, a progress line per step, and
/// the then-and-now table at the end.
fn run_all(args: Vec<OsString>) -> labkit::Result<()> {
    let mut extra: Vec<OsString> = Vec::new();
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--cpus") => {
                let list = rest.next().ok_or_else(|| {
                    Error::usage("--cpus needs a CPU list, e.g. --cpus 0")
                })?;
                extra.extend([arg, list]);
            }
            Some(a) if a.starts_with("--cpus=") => extra.push(arg),
            Some("--help" | "-h") => {
                return labkit::error::print(
                    "Run every experiment, each with its lighter settings for `all`, \
                     into one run folder under runs/.\n\n\
                     Usage: lab run all [--cpus LIST]\n\n\
                     Options:\n  --cpus LIST  Confine the whole run to these CPUs, e.g. 0\n",
                );
            }
            _ => {
                return Err(Error::usage(format!(
                    "lab run all takes only --cpus LIST, not {}",
                    arg.to_string_lossy()
                )));
            }
        }
    }
    let run = runs::new_run()?;
    report::share_run(Some(run.clone()));
    let started = Instant::now();
    let total = experiments::ALL.len();
    let mut failed = Vec::new();
    for (i, e) in experiments::ALL.iter().enumerate() {
        let mut args: Vec<OsString> =
            e.all_args.iter().map(OsString::from).collect();
        args.extend(extra.iter().cloned());
        let shown: Vec<String> =
            args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        eprintln!(
            "lab: [{}/{total}] {}: lab run {} {}",
            i + 1,
            e.name,
            e.name,
            shown.join(" ")
        );
        let t = Instant::now();
        match run_one(e, args) {
            Ok(()) => eprintln!(
                "lab: [{}/{total}] {}: done in {:.0} s",
                i + 1,
                e.name,
                t.elapsed().as_secs_f64()
            ),
            Err(err) => {
                eprintln!("lab: [{}/{total}] {}: failed: {err}", i + 1, e.name);
                failed.push(e.name);
            }
        }
    }
    report::share_run(None);
    let rows = claims::write(&run)?;
    labkit::error::print(&format!("\n{}", claims::text(&rows)))?;
    let lighter: Vec<String> = experiments::ALL
        .iter()
        .filter(|e| !e.all_args.is_empty())
        .map(|e| format!("{} {}", e.name, e.all_args.join(" ")))
        .collect();
    eprintln!(
        "lab: lighter settings than their own defaults, under all: {}",
        lighter.join("; ")
    );
    eprintln!(
        "lab: all {total} experiments in {:.0} s; run written to {}; \
         `lab compare` puts it beside the reference",
        started.elapsed().as_secs_f64(),
        run.display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::failed(format!("failed: {}", failed.join(", "))))
    }
}
