//! A plan: what to run, as a value. `lab run NAME ARGS`, `lab run all`
//! and `lab reference` each build plans; the schedule edits them (more
//! rounds, one CPU, a variant, the reference) by their typed fields, never
//! by rewriting a command line; the experiment runs one.
//!
//! A plan holds the flags every experiment shares ([`Common`]: rounds,
//! `--full`, CPUs, variant, reference, output) and the experiment's own
//! options: its clap `Args`, parsed and checked when the plan is made, and
//! the words they were given in, so that the plan can say itself as the
//! command a reader would type ([`Plan::command`]).

use std::any::Any;
use std::ffi::OsString;
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::{ArgAction, Args};
use labkit::{Error, Result};

use crate::experiments::Experiment;
use crate::report::{Common, CpuList};

/// An experiment's own options: a clap `Args` that flattens [`Common`].
/// `options!(Args)` implements it.
pub trait Options: clap::Parser + Clone + Send + Sync + 'static {
    fn common_mut(&mut self) -> &mut Common;
}

/// `impl Options for $args` through its `common` field.
#[macro_export]
macro_rules! options {
    ($args:ty) => {
        impl $crate::plan::Options for $args {
            fn common_mut(&mut self) -> &mut $crate::report::Common {
                &mut self.common
            }
        }
    };
}

/// One run of one experiment, as a value.
#[derive(Clone)]
pub struct Plan {
    pub experiment: &'static Experiment,
    /// The shared flags, which the schedule edits.
    pub common: Common,
    /// The experiment's own options as parsed (their `common` is stale
    /// once the plan is edited: [`Plan::args`] puts [`Plan::common`] in).
    own: Arc<dyn Any + Send + Sync>,
    /// Those options as words, in clap's order: `--threads 10,100`.
    own_words: Vec<String>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.command())
    }
}

/// Parse `argv` (the first word names the command in messages) into the
/// parts of a plan: the shared flags, the options, their words. A bad
/// command line is a usage error of one line.
pub(crate) fn parse<A: Options>(
    argv: Vec<OsString>,
) -> Result<(Common, Arc<dyn Any + Send + Sync>, Vec<String>)> {
    let cmd = A::command();
    let matches = labkit::cli::matches_from(cmd.clone(), argv);
    let mut args = A::from_arg_matches(&matches)
        .map_err(|e| Error::usage(e.to_string().trim().to_string()))?;
    let common = args.common_mut().clone();
    let words = own_words(&cmd, &matches);
    Ok((common, Arc::new(args), words))
}

/// The options given on the command line, other than the shared ones, as
/// words: each as its long flag with its values (joined by the flag's
/// delimiter), in the command's order of arguments.
fn own_words(cmd: &clap::Command, m: &clap::ArgMatches) -> Vec<String> {
    let shared = Common::augment_args(clap::Command::new("common"));
    let is_shared = |id: &clap::Id| shared.get_arguments().any(|a| a.get_id() == id);
    let mut words = Vec::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id();
        if is_shared(id)
            || m.value_source(id.as_str()) != Some(ValueSource::CommandLine)
        {
            continue;
        }
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => Some(format!("--{long}")),
            (None, Some(short)) => Some(format!("-{short}")),
            (None, None) => None,
        };
        match arg.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => words.extend(flag),
            ArgAction::Count => {
                let n = m.get_count(id.as_str());
                words.extend((0..n).filter_map(|_| flag.clone()));
            }
            _ => {
                let delimiter = arg.get_value_delimiter().unwrap_or(',').to_string();
                let Ok(Some(occurrences)) = m.try_get_raw_occurrences(id.as_str())
                else {
                    continue;
                };
                for values in occurrences {
                    let values: Vec<String> =
                        values.map(|v| v.to_string_lossy().into_owned()).collect();
                    words.extend(flag.clone());
                    words.push(values.join(&delimiter));
                }
            }
        }
    }
    words
}

impl Plan {
    /// The plan `lab run NAME ARGS` makes: `args` parsed by the
    /// experiment's own parser.
    pub fn parse(
        experiment: &'static Experiment,
        args: impl IntoIterator<Item = OsString>,
    ) -> Result<Plan> {
        let argv = std::iter::once(format!("lab run {}", experiment.name).into())
            .chain(args)
            .collect();
        let (common, own, own_words) = (experiment.parse)(argv)?;
        Ok(Plan { experiment, common, own, own_words })
    }

    /// A plan from options written as a reader would type them, in an
    /// experiment's declaration ([`Experiment::under_all`]). They are the
    /// lab's own: one that does not parse is a bug, which a unit test of
    /// every declaration catches.
    pub fn declared(experiment: &'static Experiment, words: &[&str]) -> Plan {
        Plan::parse(experiment, words.iter().map(OsString::from)).unwrap_or_else(
            |e| {
                panic!(
                    "{}: its declared options {words:?} do not parse: {e}",
                    experiment.name
                )
            },
        )
    }

    /// The experiment's options, with the plan's shared flags in them.
    pub fn args<A: Options>(&self) -> A {
        let mut args = self
            .own
            .downcast_ref::<A>()
            .unwrap_or_else(|| {
                panic!(
                    "{}: a plan read with another experiment's options",
                    self.experiment.name
                )
            })
            .clone();
        *args.common_mut() = self.common.clone();
        args
    }

    /// The command a reader would type to make this run.
    pub fn command(&self) -> String {
        let mut words =
            vec!["lab run".to_string(), self.experiment.name.to_string()];
        words.extend(self.own_words.iter().cloned());
        words.extend(self.common.words());
        words.join(" ")
    }

    /// The results' folder in a run: `NAME`, or `NAME/VARIANT`.
    pub fn folder(&self) -> String {
        match &self.common.variant {
            Some(v) => format!("{}/{v}", self.experiment.name),
            None => self.experiment.name.to_string(),
        }
    }

    /// Start it: confine it to its CPUs, make the folder its results go
    /// to ([`Common::start`]).
    pub fn start(
        &self,
        ctx: &crate::report::Context,
    ) -> Result<crate::report::Started> {
        self.common.start(ctx, self.experiment.name, self.command())
    }

    pub fn with_rounds(mut self, rounds: u32) -> Plan {
        self.common.rounds = rounds;
        self
    }

    /// Confined to `cpus`, as the sub-run `variant`.
    pub fn confined(mut self, cpus: &[usize], variant: &str) -> Plan {
        let text = labkit::affinity::format_list(cpus);
        self.common.cpus = Some(CpuList { text, cpus: cpus.to_vec() });
        self.common.variant = Some(variant.to_string());
        self
    }

    pub fn as_reference(mut self) -> Plan {
        self.common.reference = true;
        self
    }
}

impl Common {
    /// These flags as words, only those that differ from their defaults.
    pub fn words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.rounds != crate::stats::DEFAULT_ROUNDS {
            w.extend(["--rounds".to_string(), self.rounds.to_string()]);
        }
        if self.full {
            w.push("--full".into());
        }
        if let Some(v) = &self.variant {
            w.extend(["--variant".to_string(), v.clone()]);
        }
        if let Some(c) = &self.cpus {
            w.extend(["--cpus".to_string(), c.text.clone()]);
        }
        if self.reference {
            w.push("--reference".into());
        }
        if let Some(out) = &self.out {
            w.extend(["--out".to_string(), out.display().to_string()]);
        }
        if self.json {
            w.push("--json".into());
        }
        w
    }
}
