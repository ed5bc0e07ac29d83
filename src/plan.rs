//! An experiment's declaration ([`Experiment`]: its name, its options'
//! type, how it runs in the reference and under `lab run all`, its
//! headline keys and data type) and a plan: what to run, as a value. `lab run NAME ARGS`, `lab run all`
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

use crate::report::{Common, Context, CpuList};

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
    // `--procs -1` is a bad value of --procs, not an unknown flag `-1`.
    let cmd = A::command().allow_negative_numbers(true);
    let name = argv.first().map(|a| a.to_string_lossy().into_owned());
    let matches = labkit::cli::matches_from(cmd.clone(), argv);
    if let Some(twice) = named_twice(&cmd, &matches) {
        let name = name.unwrap_or_default();
        return Err(Error::usage(format!("{twice}; see '{name} --help'")));
    }
    let mut args = A::from_arg_matches(&matches)
        .map_err(|e| Error::usage(e.to_string().trim().to_string()))?;
    let common = args.common_mut().clone();
    let words = own_words(&cmd, &matches);
    Ok((common, Arc::new(args), words))
}

/// A list option given a value twice (`--procs 2,2`, or `--procs 2
/// --procs 2`), which would run a setting twice as often as the others or
/// be dropped unsaid: what it says of the first such option. Values are
/// compared as written (`64k` and `65536` are not caught).
fn named_twice(cmd: &clap::Command, m: &clap::ArgMatches) -> Option<String> {
    for arg in cmd.get_arguments().filter(|a| a.get_value_delimiter().is_some()) {
        let id = arg.get_id().as_str();
        let Ok(Some(values)) = m.try_get_raw(id) else { continue };
        let mut seen = std::collections::BTreeSet::new();
        let flag =
            arg.get_long().map_or_else(|| id.to_string(), |l| format!("--{l}"));
        for v in values {
            if !seen.insert(v) {
                return Some(format!("{flag} names {} twice", v.to_string_lossy()));
            }
        }
    }
    None
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

/// One runnable experiment.
pub struct Experiment {
    /// The `lab run` name, also the book chapter's file name.
    pub name: &'static str,
    pub about: &'static str,
    /// Parse its command line into the parts of a [`Plan`].
    pub(crate) parse: fn(Vec<OsString>) -> labkit::Result<Parsed>,
    /// Run a plan of it, its results going where the context says.
    pub run: fn(&Context, &Plan) -> labkit::Result<()>,
    /// How it runs under `lab run all`: lighter settings where its own
    /// defaults would not fit all of them in a few minutes on 2 cores.
    pub under_all: Declared,
    /// Its one-CPU run under `lab run all`, when that is not `under_all`:
    /// what its one-CPU claims need, at the rounds their verdicts need.
    pub one_cpu_under_all: Option<Declared>,
    /// Its one-CPU run in the reference, and under `lab run all` unless
    /// `one_cpu_under_all` says otherwise: added where a claim asks for one.
    pub one_cpu: Declared,
    /// Its runs in the reference (`lab reference`): the first makes `NAME`,
    /// any other a sub-run (its variant). A one-CPU run is added by itself
    /// where a claim asks for one.
    pub reference: &'static [Declared],
    /// Its headline keys ([`Experiment::headline`]): publishing a key not
    /// declared here fails, and the book's and the claims' keys are checked
    /// against them ([`crate::schema`]).
    pub headline: &'static [&'static str],
    /// The type of its results' data ([`Experiment::data`]), whose JSON
    /// Schema `schemas/NAME.json` holds.
    pub data: Option<DataType>,
}

/// The type of an experiment's results data, as [`crate::schema`] needs it.
#[derive(Clone, Copy)]
pub struct DataType {
    /// The type's JSON Schema, its own types under `$defs`.
    pub schema: fn() -> schemars::Schema,
    /// Its Rust name, which [`crate::report::Report::publish`] checks.
    pub name: fn() -> &'static str,
}

fn schema_of<T: schemars::JsonSchema>() -> schemars::Schema {
    crate::schema::generator().into_root_schema_for::<T>()
}

/// What [`Experiment::parse`] gives: the shared flags, the options, and
/// the words they were given in.
pub(crate) type Parsed =
    (Common, std::sync::Arc<dyn std::any::Any + Send + Sync>, Vec<String>);

/// A run of an experiment as its declaration names it: its own options
/// as a reader would type them, and the shared settings, typed.
#[derive(Clone, Copy, Debug)]
pub struct Declared {
    pub own: &'static [&'static str],
    pub rounds: Option<u32>,
    pub full: bool,
    pub variant: Option<&'static str>,
}

impl Declared {
    /// With these options of its own, and the shared defaults.
    pub const fn own(own: &'static [&'static str]) -> Declared {
        Declared { own, rounds: None, full: false, variant: None }
    }

    /// Its defaults.
    pub const DEFAULT: Declared = Declared::own(&[]);

    pub const fn rounds(self, rounds: u32) -> Declared {
        Declared { rounds: Some(rounds), ..self }
    }

    pub const fn full(self) -> Declared {
        Declared { full: true, ..self }
    }

    /// A sub-run, `NAME/VARIANT`.
    pub const fn variant(self, variant: &'static str) -> Declared {
        Declared { variant: Some(variant), ..self }
    }

    /// The plan it declares, of `experiment`.
    pub fn plan(&self, experiment: &'static Experiment) -> Plan {
        let mut plan = Plan::declared(experiment, self.own);
        if let Some(rounds) = self.rounds {
            plan.common.rounds = rounds;
        }
        plan.common.full |= self.full;
        if let Some(v) = self.variant {
            plan.common.variant = Some(v.to_string());
        }
        plan
    }
}

impl Experiment {
    /// An experiment whose options are `A`, that runs under `lab run all`
    /// and in the reference with its defaults.
    pub const fn new<A: Options>(
        name: &'static str,
        about: &'static str,
        run: fn(&Context, &Plan) -> labkit::Result<()>,
    ) -> Self {
        Experiment {
            name,
            about,
            parse: crate::plan::parse::<A>,
            run,
            under_all: Declared::DEFAULT,
            one_cpu_under_all: None,
            one_cpu: Declared::DEFAULT,
            reference: &[Declared::DEFAULT],
            headline: &[],
            data: None,
        }
    }

    /// How it runs under `lab run all`.
    pub const fn under_all(self, under_all: Declared) -> Self {
        Experiment { under_all, ..self }
    }

    /// Its one-CPU run, in the reference and under `lab run all`, when a
    /// claim asks for one and it is not the experiment's defaults.
    pub const fn one_cpu(self, declared: Declared) -> Self {
        Experiment { one_cpu: declared, ..self }
    }

    /// Its one-CPU run under `lab run all`, when it is lighter than
    /// [`Experiment::one_cpu`].
    pub const fn one_cpu_under_all(self, declared: Declared) -> Self {
        Experiment { one_cpu_under_all: Some(declared), ..self }
    }

    /// Its runs in the reference, when they are not one run with its own
    /// defaults.
    pub const fn for_reference(self, reference: &'static [Declared]) -> Self {
        Experiment { reference, ..self }
    }

    /// Its headline keys, every one it may publish: `"fork_us"`, or a
    /// family `"creattime_ratio_{samples}"`, where `{samples}` stands for
    /// one or more of `a-z`, `0-9` and `_`.
    pub const fn headline(self, headline: &'static [&'static str]) -> Self {
        Experiment { headline, ..self }
    }

    /// The type of its results' data, `T` of the [`crate::report::Report`]
    /// it publishes.
    pub const fn data<T: schemars::JsonSchema>(self) -> Self {
        let data =
            DataType { schema: schema_of::<T>, name: std::any::type_name::<T> };
        Experiment { data: Some(data), ..self }
    }
}
