//! The experiments `lab run` knows. Each module reproduces one article's
//! experiment: its own flags (clap), the programs it spawns, its tables and
//! charts.

use std::ffi::OsString;

pub mod create_destroy;
pub mod ctx_switch;
pub mod footprint;
pub mod fork_vs_thread;
pub mod mq_sweep;
pub mod pipe_speed;
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
    /// and run it.
    pub run: fn(Vec<OsString>) -> labkit::Result<()>,
}

/// Every experiment, in the book's order.
pub const ALL: &[Experiment] = &[
    fork_vs_thread::EXPERIMENT,
    create_destroy::EXPERIMENT,
    pipe_speed::EXPERIMENT,
    ctx_switch::EXPERIMENT,
    mq_sweep::EXPERIMENT,
    spawn_methods::EXPERIMENT,
    thread_limits::EXPERIMENT,
    footprint::EXPERIMENT,
];

pub fn find(name: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.name == name)
}
