//! The runner of the process-vs-thread lab: `lab list`, `lab run NAME`.
//!
//! Each experiment runs the article programs as whole processes, the way the
//! articles ran `time ./fork`, prints the article-style tables and writes a
//! results directory (JSON with the machine, the tables as Markdown, SVG
//! charts) that the book includes.

pub mod experiments;
pub mod report;

use std::ffi::OsString;

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
    /// Run one experiment: `lab run NAME [OPTIONS]`; `lab run NAME --help`
    /// lists its options
    #[command(disable_help_flag = true)]
    Run {
        /// The experiment, as `lab list` names it
        #[arg(allow_hyphen_values = true)]
        name: String,
        /// Options for the experiment
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
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
        Command::Run { name, .. } if name == "--help" || name == "-h" => {
            labkit::error::print(&format!(
                "Run one experiment; `lab run NAME --help` lists its options.\n\n\
                 Usage: lab run NAME [OPTIONS]\n\nExperiments:\n{}",
                list("  ")
            ))
        }
        Command::Run { name, args } => {
            let Some(experiment) = experiments::find(&name) else {
                let names: Vec<&str> =
                    experiments::ALL.iter().map(|e| e.name).collect();
                return Err(Error::usage(format!(
                    "unknown experiment '{name}'; experiments: {}",
                    names.join(", ")
                )));
            };
            let argv = std::iter::once(OsString::from(format!(
                "lab run {}",
                experiment.name
            )))
            .chain(args)
            .collect();
            (experiment.run)(argv)
        }
    }
}
