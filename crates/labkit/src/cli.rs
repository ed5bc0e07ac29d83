//! Command-line pieces that several programs share.

use std::fs::File;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, Result};

/// The work each fork/thread worker does: print `count` lines to stdout and
/// to a shared log, as the articles' `fork.c` and `thread.c` do.
#[derive(Args, Clone, Debug)]
pub struct Workload {
    /// Lines each worker prints (the articles' COUNT)
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub count: u64,

    /// Log file every worker appends its lines to (created if missing)
    #[arg(long, default_value = "logFile.log")]
    pub log: PathBuf,

    /// Print a string of this many bytes instead of "hello linux"
    /// (the article's third test uses 256)
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1..=4000))]
    pub line: Option<u64>,

    /// Print a JSON summary instead of the final "Okay"
    #[arg(long)]
    pub json: bool,
}

impl Workload {
    /// The text each line carries.
    pub fn text(&self) -> Vec<u8> {
        crate::lines::payload(self.line.map(|n| n as usize))
    }
}

/// Open the shared log for appending, as `fopen(path, "a+")` does: every
/// write goes to the end, whoever else is writing.
pub fn open_log(path: &Path) -> Result<File> {
    File::options().append(true).create(true).open(path).map_err(|e| {
        Error::failed(format!(
            "cannot open log {}: {}; no worker was started",
            path.display(),
            crate::error::describe_io(&e)
        ))
    })
}

/// What one fork/thread run did.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub workers: u32,
    pub count: u64,
    pub lines: u64,
    pub elapsed_s: f64,
}

/// Print a program's report: one JSON object with `--json`, else `text`.
pub fn emit<T: serde::Serialize>(
    json: bool,
    report: &T,
    text: impl FnOnce(&T) -> String,
) -> Result<()> {
    let out = if json {
        let encoded = serde_json::to_string(report)
            .map_err(|e| Error::failed(format!("cannot encode report: {e}")))?;
        encoded + "\n"
    } else {
        text(report)
    };
    crate::error::print(&out)
}

/// End a run as the C programs do, with `Okay` (or the report as JSON).
pub fn finish(result: Result<Report>, work: &Workload) -> Result<()> {
    emit(work.json, &result?, |_| "Okay\n".to_string())
}
