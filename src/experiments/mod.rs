//! The experiments `lab run` knows. Each module reproduces one article's
//! experiment: its own flags (clap), the programs it spawns, its tables and
//! charts.

use std::ffi::OsString;

use crate::report::Context;

pub mod controls;
pub mod create_destroy;
pub mod ctx_switch;
pub mod footprint;
pub mod fork_vs_thread;
pub mod mq_sweep;
pub mod pipe_speed;
pub mod server_designs;
pub mod spawn_methods;
pub mod thread_limits;

/// One runnable experiment.
pub struct Experiment {
    /// The `lab run` name, also the book chapter's file name.
    pub name: &'static str,
    pub about: &'static str,
    /// Its options under `lab run all`: lighter settings where its own
    /// default would not fit all of them in a few minutes on 2 cores.
    pub all_args: &'static [&'static str],
    /// Parse the experiment's own arguments (the first is the command name)
    /// and run it, its results going where the context says.
    pub run: fn(&Context, Vec<OsString>) -> labkit::Result<()>,
}

impl Experiment {
    /// An experiment that runs under `lab run all` as it runs alone.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        run: fn(&Context, Vec<OsString>) -> labkit::Result<()>,
    ) -> Self {
        Experiment { name, about, all_args: &[], run }
    }

    /// The lighter options it takes under `lab run all`.
    pub const fn under_all(self, all_args: &'static [&'static str]) -> Self {
        Experiment { all_args, ..self }
    }
}

/// Every experiment, in the book's order.
pub const ALL: &[Experiment] = &[
    fork_vs_thread::EXPERIMENT,
    create_destroy::EXPERIMENT,
    pipe_speed::EXPERIMENT,
    ctx_switch::EXPERIMENT,
    mq_sweep::EXPERIMENT,
    server_designs::EXPERIMENT,
    spawn_methods::EXPERIMENT,
    thread_limits::EXPERIMENT,
    footprint::EXPERIMENT,
];

/// What `lab run` runs besides the articles' experiments: the controls,
/// which have no chapter of their own (the methodology page shows them).
pub const EXTRA: &[Experiment] = &[controls::EXPERIMENT];

/// Every runnable experiment: [`ALL`], then [`EXTRA`].
pub fn every() -> impl Iterator<Item = &'static Experiment> {
    ALL.iter().chain(EXTRA)
}

pub fn find(name: &str) -> Option<&'static Experiment> {
    every().find(|e| e.name == name)
}
