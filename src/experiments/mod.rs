//! The experiments `lab run` knows. Each module reproduces one article's
//! experiment: its own flags (clap), the programs it spawns, its tables and
//! charts.

use std::ffi::OsString;

use crate::report::Context;

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
    /// Its options under `lab run all`: lighter settings where its own
    /// default would not fit all of them in a few minutes on 2 cores.
    pub all_args: &'static [&'static str],
    /// Its options for the one-CPU run under `lab run all`, when they are
    /// not `all_args`: what its one-CPU claims need, at the rounds their
    /// verdicts need.
    pub one_cpu_args: Option<&'static [&'static str]>,
    /// Parse the experiment's own arguments (the first is the command name)
    /// and run it, its results going where the context says.
    pub run: fn(&Context, Vec<OsString>) -> labkit::Result<()>,
    /// Its runs in the reference (`lab reference`), each one's options:
    /// the first makes `NAME`, any other a sub-run (`--variant V`). A
    /// one-CPU run is added by itself where a claim asks for one.
    pub reference: &'static [&'static [&'static str]],
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

impl Experiment {
    /// An experiment that runs under `lab run all` as it runs alone.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        run: fn(&Context, Vec<OsString>) -> labkit::Result<()>,
    ) -> Self {
        Experiment {
            name,
            about,
            all_args: &[],
            one_cpu_args: None,
            run,
            reference: &[&[]],
            headline: &[],
            data: None,
        }
    }

    /// The lighter options it takes under `lab run all`.
    pub const fn under_all(self, all_args: &'static [&'static str]) -> Self {
        Experiment { all_args, ..self }
    }

    /// The options of its one-CPU run under `lab run all`.
    pub const fn one_cpu_under_all(self, args: &'static [&'static str]) -> Self {
        Experiment { one_cpu_args: Some(args), ..self }
    }

    /// Its runs in the reference, when they are not one run with its own
    /// defaults.
    pub const fn for_reference(
        self,
        reference: &'static [&'static [&'static str]],
    ) -> Self {
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
