//! The experiments `lab run` knows. Each module reproduces one article's
//! experiment: its own flags (clap), the programs it spawns, its tables and
//! charts.

use std::ffi::OsString;

use crate::plan::{Options, Plan};
use crate::report::{Common, Context};

// The modules, `ALL` and `EXTRA`, derived by build.rs: a module for every
// file or folder in src/experiments/; `ALL` holds the experiments whose
// chapter SUMMARY.md lists at its top level, in the book's order, and
// `EXTRA` the others (the controls).
include!(concat!(env!("OUT_DIR"), "/experiments.rs"));

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

/// Every runnable experiment: [`ALL`], then [`EXTRA`].
pub fn every() -> impl Iterator<Item = &'static Experiment> {
    ALL.iter().chain(EXTRA)
}

pub fn find(name: &str) -> Option<&'static Experiment> {
    every().find(|e| e.name == name)
}
