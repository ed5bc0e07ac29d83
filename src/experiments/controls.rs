//! `lab run controls`: one program against itself, for each kind of ratio
//! the claims judge: a create loop (forkcreat), a pipe (pipespeed2t) and a
//! printing run (fork). Both copies run back to back in each round, each in
//! turn first, exactly as two different programs would; the paired ratio
//! of the copies must come out at 1, and its 95% interval must contain
//! 1.00. A control whose interval does not marks the run as noisy: its
//! ratios moved by more than the method allows for, with nothing to move
//! them but the machine (`lab verdicts` and `lab compare` say so).
//!
//! It is no article's experiment, so it has no chapter of its own: the
//! methodology page shows the reference's controls. `lab run all` runs it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::report::{Common, Context, Published, Report};
use crate::results::Header;
use crate::stats::round_order;
use crate::table::Table;
use clap::Parser;
use labkit::{Error, Result};
use serde::Serialize;

use super::Experiment;

pub const EXPERIMENT: Experiment = Experiment::new(
    "controls",
    "A-against-A controls: a create loop, a pipe and a printing run, each against itself",
    main,
)
.under_all(&["--rounds", "10"])
.for_reference(&[&["--rounds", "10"]]);

/// One program against itself, for each kind of ratio the claims judge.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

/// The three controls: key, what runs, and one run of it.
struct Control {
    key: &'static str,
    what: String,
    run: Box<dyn Fn() -> Result<f64>>,
}

#[derive(Serialize)]
struct Row {
    key: &'static str,
    what: String,
    /// Each round's figure of the copy listed first, and of the second.
    first: Vec<f64>,
    second: Vec<f64>,
}

#[derive(Serialize)]
struct Data {
    rounds: u32,
    controls: Vec<Row>,
}

fn controls(bins: &[PathBuf]) -> Vec<Control> {
    let [forkcreat, pipespeed2t, fork] =
        [&bins[0], &bins[1], &bins[2]].map(|p| p.clone());
    vec![
        Control {
            key: "create_loop",
            what: "forkcreat -n 2000 --reap sigchld: µs per create, against itself"
                .into(),
            run: Box::new(move || {
                super::create_destroy::control_once(&forkcreat, 2000)
            }),
        },
        Control {
            key: "pipe",
            what: "pipespeed2t at 64 KiB blocks: MB/s, against itself".into(),
            run: Box::new(move || {
                super::pipe_speed::control_once(&pipespeed2t, 65536)
            }),
        },
        Control {
            key: "printing",
            what: "fork, 255 workers of 200 lines: wall seconds, against itself"
                .into(),
            run: Box::new(move || {
                super::fork_vs_thread::control_once(&fork, 255, 200)
            }),
        },
    ]
}

fn main(ctx: &Context, argv: Vec<OsString>) -> Result<()> {
    let args = labkit::cli::parse_from::<Args, _, _>(argv);
    let out = args.common.start(ctx, EXPERIMENT.name)?;
    let bins = crate::bins::programs(&["forkcreat", "pipespeed2t", "fork"])?;
    let list = controls(&bins);
    let rounds = args.common.rounds as usize;
    let bar =
        crate::progress::bar((list.len() * rounds * 2) as u64, EXPERIMENT.name);
    let mut rows = Vec::new();
    for c in &list {
        let mut copies = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            for k in round_order(2, round) {
                copies[k].push((c.run)()?);
                bar.inc(1);
            }
        }
        let [first, second] = copies;
        rows.push(Row { key: c.key, what: c.what.clone(), first, second });
    }
    bar.finish_and_clear();
    let data = Data { rounds: args.common.rounds, controls: rows };
    let mut headline = crate::report::headline();
    for r in &data.controls {
        headline = headline.paired(
            r.key,
            &format!("{}: first copy over second, in the same round", r.what),
            Some(r.first.clone()),
            Some(r.second.clone()),
        );
    }
    let headline = headline.build();
    let mut t = Table::new(
        "Controls: each program against itself (the ratio must come out at 1)",
        &["control", "ratio", "95% interval", "contains 1.00"],
    );
    for (key, figure) in Published::figures_of(&headline).map_err(Error::failed)? {
        let [lo, hi] = figure.interval;
        t.row(vec![
            key,
            format!("{:.3}", figure.value),
            format!("{lo:.3} to {hi:.3}"),
            if lo <= 1.0 && 1.0 <= hi { "yes".into() } else { "no: noisy".into() },
        ]);
    }
    t.note(format!(
        "{} rounds; both copies run back to back in each round, each in turn first. \
         A control whose interval does not contain 1.00 marks the run noisy.",
        data.rounds
    ));
    let report = Report {
        observations: Vec::new(),
        header: Header::new(EXPERIMENT.name),
        headline,
        tables: vec![t],
        charts: Vec::new(),
        files: Vec::new(),
        data,
    };
    report.publish(&args.common, &out)
}

/// The controls of run folder `run` whose interval does not contain 1.00,
/// each as "pipe: 0.91 to 0.97"; empty when they all do or the run has no
/// controls. An error names a controls file that does not read.
pub fn noisy(run: &Path) -> Result<Vec<String>> {
    let dir = run.join(EXPERIMENT.name);
    let Some(published) = Published::read(&dir, EXPERIMENT.name)? else {
        return Ok(Vec::new());
    };
    let file = dir.join(format!("{}.json", EXPERIMENT.name));
    let figures = published
        .figures()
        .map_err(|e| Error::failed(format!("{}: {e}", file.display())))?;
    Ok(figures
        .into_iter()
        .filter(|(_, f)| !(f.interval[0] <= 1.0 && 1.0 <= f.interval[1]))
        .map(|(key, f)| {
            format!("{key}: {:.3} to {:.3}", f.interval[0], f.interval[1])
        })
        .collect())
}

/// One line for a run with noisy controls, `None` for a quiet one.
pub fn noisy_line(run: &Path) -> Result<Option<String>> {
    let noisy = noisy(run)?;
    Ok((!noisy.is_empty()).then(|| {
        format!(
            "the run is noisy: {} control{} of one program against itself did not \
             contain 1.00 ({}); its verdicts may not come back on a quieter machine",
            noisy.len(),
            if noisy.len() == 1 { "" } else { "s" },
            noisy.join("; ")
        )
    }))
}
