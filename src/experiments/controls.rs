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

use std::path::{Path, PathBuf};

use crate::engine::{Engine, setting};
use crate::plan::Plan;
use crate::report::{Common, Context, Figure, Published, Report};
use crate::results::Header;
use crate::table::{Table, col};
use clap::Parser;
use labkit::{Error, Result};
use serde::Serialize;

use super::{Declared, Experiment};

pub const EXPERIMENT: Experiment = Experiment::new::<Args>(
    "controls",
    "A-against-A controls: a create loop, a pipe and a printing run, each against itself",
    main,
)
.under_all(Declared::DEFAULT.rounds(10))
.for_reference(&[Declared::DEFAULT.rounds(10)])
.headline(&["create_loop", "pipe", "printing"])
.data::<Data>();

/// One program against itself, for each kind of ratio the claims judge.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    common: Common,
}
crate::options!(Args);

/// The three controls: key, what runs, and one run of it.
struct Control {
    key: &'static str,
    what: String,
    run: Box<dyn Fn() -> Result<f64>>,
}

/// What each control ran; its rounds are the observations (condition
/// `first` and `second` at setting `control = KEY`).
#[derive(Serialize, schemars::JsonSchema)]
struct Row {
    key: &'static str,
    what: String,
}

#[derive(Serialize, schemars::JsonSchema)]
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

fn main(ctx: &Context, plan: &Plan) -> Result<()> {
    let args: Args = plan.args();
    let out = plan.start(ctx)?;
    let bins = crate::bins::programs(&["forkcreat", "pipespeed2t", "fork"])?;
    let list = controls(&bins);
    let copies = ["first", "second"];
    let mut engine = Engine::new(args.common.rounds);
    engine.progress(list.len() * engine.runs_for(2), EXPERIMENT.name);
    let mut headline = crate::report::headline();
    for c in &list {
        let at = setting([("control", c.key.into())]);
        engine.measure(&at, &copies, |_| (c.run)())?;
        let obs = engine.observations();
        headline = headline.paired(
            c.key,
            &format!("{}: first copy over second, in the same round", c.what),
            obs.rounds(&at, "first", "value"),
            obs.rounds(&at, "second", "value"),
        );
    }
    let headline = headline.build();
    let figures = Published::figures_of(&headline).map_err(Error::failed)?;
    let t = Table::of(
        "Controls: each program against itself (the ratio must come out at 1)",
        &figures,
        &[
            col("control", |(key, _): &(String, Figure)| key.clone()),
            col("ratio", |(_, f): &(String, Figure)| format!("{:.3}", f.value)),
            col("95% interval", |(_, f): &(String, Figure)| {
                format!("{:.3} to {:.3}", f.interval[0], f.interval[1])
            }),
            col("contains 1.00", |(_, f): &(String, Figure)| {
                let [lo, hi] = f.interval;
                if lo <= 1.0 && 1.0 <= hi {
                    "yes".into()
                } else {
                    "no: noisy".into()
                }
            }),
        ],
    )
    .noted(format!(
        "{} rounds; both copies run back to back in each round, each in turn first, \
         after a warm-up run of each. A control whose interval does not contain \
         1.00 marks the run noisy.",
        args.common.rounds
    ));
    let controls = list.iter().map(|c| Row { key: c.key, what: c.what.clone() });
    let report = Report {
        header: Header::new(EXPERIMENT.name),
        headline,
        tables: vec![t],
        charts: Vec::new(),
        files: Vec::new(),
        observations: engine.finish(),
        data: Data { rounds: args.common.rounds, controls: controls.collect() },
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
