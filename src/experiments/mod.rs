//! The experiments `lab run` knows. Each module reproduces one article's
//! experiment: its own flags (clap), the programs it spawns, its tables and
//! charts.

pub use crate::plan::{DataType, Declared, Experiment};

// The modules, `ALL` and `EXTRA`, derived by build.rs: a module for every
// file or folder in src/experiments/; `ALL` holds the experiments whose
// chapter SUMMARY.md lists at its top level, in the book's order, and
// `EXTRA` the others (the controls).
include!(concat!(env!("OUT_DIR"), "/experiments.rs"));

/// Every runnable experiment: [`ALL`], then [`EXTRA`].
pub fn every() -> impl Iterator<Item = &'static Experiment> {
    ALL.iter().chain(EXTRA)
}

pub fn find(name: &str) -> Option<&'static Experiment> {
    every().find(|e| e.name == name)
}
