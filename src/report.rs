//! What every experiment shares: the common flags, where its results go
//! ([`crate::runs`]) and the way they are published (tables on stdout; JSON,
//! Markdown and SVG in the run folder).

use std::path::{Path, PathBuf};

use crate::chart::Chart;
use crate::document::{Document, Written};
use crate::results::{Header, Settings, check_writable};
use crate::table::Table;
use clap::Args;
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::runs;

/// Flags every experiment takes.
#[derive(Args, Clone, Debug, Default)]
pub struct Common {
    /// Rounds per setting (the articles ran five; six are the fewest whose
    /// interval of a median covers 95%, and an even count lets two
    /// conditions go first equally often)
    #[arg(long, default_value_t = crate::stats::DEFAULT_ROUNDS,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,

    /// Run the articles' complete grid instead of the quick one
    #[arg(long)]
    pub full: bool,

    /// Confine the whole run (runner, programs and their children) to these
    /// CPUs, e.g. 0 (the articles' one CPU) or 0-1,3 [default: all allowed]
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,

    /// Write the committed reference run (results/<date>-<host>/NAME), not a
    /// run of your own; refuses a checkout with uncommitted changes
    #[arg(long, conflicts_with = "out")]
    pub reference: bool,

    /// Name this run a sub-run of the experiment (NAME/VARIANT in the run
    /// folder), e.g. vs-c or cpu0
    #[arg(long, value_name = "VARIANT", value_parser = parse_variant)]
    pub variant: Option<String>,

    /// Write the results into DIR itself [default: a new run folder
    /// runs/<date>-<time>-<host>/NAME in the lab's checkout]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Print the results JSON on stdout instead of the tables
    #[arg(long)]
    pub json: bool,
}

/// A `--cpus` list: its text and the CPUs it names.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList {
    pub text: String,
    pub cpus: Vec<usize>,
}

fn parse_cpus(text: &str) -> std::result::Result<CpuList, String> {
    let cpus = labkit::affinity::parse_list(text)?;
    Ok(CpuList { text: text.to_string(), cpus })
}

/// A `--cpus` list of CPUs this process may use: `lab run all` checks it
/// before anything starts.
pub fn parse_allowed_cpus(text: &str) -> std::result::Result<CpuList, String> {
    let list = parse_cpus(text)?;
    labkit::affinity::check_allowed(&list.cpus).map_err(|e| e.message)?;
    Ok(list)
}

fn parse_variant(text: &str) -> std::result::Result<String, String> {
    let ok = !text.is_empty()
        && !text.starts_with('.')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(text.to_string())
    } else {
        Err("a variant is one word of letters, digits, '-', '_' or '.'".into())
    }
}

/// Where an experiment's results go, handed to it by the runner: a run
/// folder of its own, or the one that `lab run all` shares between its
/// experiments.
#[derive(Clone, Debug, Default)]
pub struct Context {
    shared_run: Option<PathBuf>,
    /// Settings the runner chose for this run, recorded with its results
    /// (`rounds extended`, when a claim was too close to call).
    used: Vec<(String, String)>,
}

impl Context {
    /// An experiment run alone (`lab run NAME`): a new run folder.
    pub fn alone() -> Context {
        Context::default()
    }

    /// One experiment of `lab run all`: into `run`.
    pub fn within(run: PathBuf) -> Context {
        Context { shared_run: Some(run), used: Vec::new() }
    }

    /// The same, with a setting the runner chose, to be recorded.
    pub fn recording(mut self, name: &str, value: String) -> Context {
        self.used.push((name.into(), value));
        self
    }
}

/// A started experiment: the folder its results go to, the run folder it
/// belongs to (none with `--out`), and the machine's load when it started.
pub struct Started {
    pub dir: PathBuf,
    pub run: Option<PathBuf>,
    load: crate::machine::LoadMark,
    used: Vec<(String, String)>,
    /// The command that makes this run again ([`crate::plan::Plan::command`]).
    pub command: String,
}

impl std::ops::Deref for Started {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.dir
    }
}

impl Common {
    /// Start the experiment: confine it to `--cpus`, and make (and check
    /// writable) the folder its results go to, before any work, so that a
    /// bad `--out` or a dirty reference checkout fails at once; and note
    /// the machine's load.
    pub fn start(
        &self,
        ctx: &Context,
        experiment: &str,
        command: String,
    ) -> Result<Started> {
        let (dir, run) = self.folder(ctx, experiment)?;
        Ok(Started {
            dir,
            run,
            load: crate::machine::LoadMark::now(),
            used: ctx.used.clone(),
            command,
        })
    }

    /// The folder the results go to, and the run folder it is in.
    fn folder(
        &self,
        ctx: &Context,
        experiment: &str,
    ) -> Result<(PathBuf, Option<PathBuf>)> {
        if let Some(list) = &self.cpus {
            labkit::affinity::confine(&list.cpus).map_err(|e| {
                Error::usage(format!("--cpus {}: {}", list.text, e.message))
            })?;
        }
        if let Some(dir) = &self.out {
            check_writable(dir, "--out")?;
            return Ok((dir.clone(), None));
        }
        let (run, owns_run) = match ctx.shared_run.clone() {
            _ if self.reference => (runs::reference_run()?, false),
            Some(run) => (run, false),
            None => (runs::new_run()?, true),
        };
        if owns_run {
            // Killed outright before it is finished, this run leaves nothing.
            labkit::cleanup::remove_if_killed(&run);
        }
        let target = runs::target(&run, experiment, self.variant.as_deref());
        Ok((runs::stage(&run, &target, owns_run)?, Some(run)))
    }

    /// What the results header records of these flags (an experiment adds
    /// what it chose itself: [`Settings::ran`]).
    pub fn settings(&self) -> Settings {
        let allowed = labkit::affinity::allowed_cpus().unwrap_or_default();
        Settings {
            rounds: self.rounds,
            full: self.full,
            cpus: self.cpus.as_ref().map(|c| c.text.clone()),
            cpus_allowed: labkit::affinity::format_list(&allowed),
            cpu_count: allowed.len(),
            variant: self.variant.clone(),
            reference: self.reference,
            used: Default::default(),
        }
    }
}

/// One headline figure of an experiment: what `lab compare` puts side by
/// side, what the claims are judged on, and what the book quotes. It keeps
/// its rounds, so that its value and its interval (and any verdict on them)
/// can be recomputed from the file: [`Figure::check`].
///
/// Two versions are read. Today's has `coverage`: its interval comes from
/// order statistics ([`crate::stats::median_interval`]). Schema 1 had
/// `resamples` and `seed` instead: a percentile bootstrap, checked and
/// judged as it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub label: String,
    /// The median of `rounds` (or, `exact`, the one count).
    pub value: f64,
    pub unit: String,
    /// The interval of the median at [`crate::stats::LEVEL`], or the widest
    /// the rounds allow when they are too few for it (`coverage` says).
    pub interval: [f64; 2],
    /// The interval's exact coverage: 0.96875 for six rounds' range; below
    /// 0.95 when the rounds are too few. 1 for an exact figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
    /// One value per round: the quantity itself, or with `paired-ratio`
    /// each round's ratio of two conditions measured in that round.
    pub rounds: Vec<f64>,
    pub method: Method,
    /// Schema 1: the bootstrap's resamples and seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resamples: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// The fields of a figure, today's ([`Figure`] with `coverage`) and schema
/// 1's (with `resamples` and `seed`): a file with another set is of a
/// version this lab does not read.
pub const FIGURE_FIELDS: [&[&str]; 2] = [
    &["label", "value", "unit", "interval", "coverage", "rounds", "method"],
    &["label", "value", "unit", "interval", "rounds", "method", "resamples", "seed"],
];

/// How a figure was made from its rounds.
#[derive(
    Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The median of one value per round.
    Median,
    /// The median of per-round ratios a / b, both measured in the round.
    PairedRatio,
    /// A count or a setting, the same in every round: no spread.
    Exact,
}

impl Method {
    pub fn describe(self) -> &'static str {
        match self {
            Method::Median => "median of the rounds",
            Method::PairedRatio => "median of the rounds' paired ratios",
            Method::Exact => "exact (a count or setting)",
        }
    }
}

impl Figure {
    /// A figure from its rounds, or `None` when there is no round or one is
    /// not finite (it is then left out of the headline).
    pub fn new(
        label: &str,
        unit: &str,
        method: Method,
        rounds: Vec<f64>,
    ) -> Option<Figure> {
        let ([lo, hi], coverage) = Figure::interval_of(method, &rounds)?;
        Some(Figure {
            label: label.into(),
            value: crate::stats::median(&rounds),
            unit: unit.into(),
            interval: [lo, hi],
            coverage: Some(coverage),
            rounds,
            method,
            resamples: None,
            seed: None,
        })
    }

    /// The interval and coverage of `rounds` made by `method`: an exact
    /// figure is its one value, certain; a median has its order-statistic
    /// interval at [`crate::stats::LEVEL`].
    fn interval_of(method: Method, rounds: &[f64]) -> Option<([f64; 2], f64)> {
        if method == Method::Exact {
            let v = *rounds.first()?;
            if !v.is_finite() || rounds.iter().any(|r| *r != v) {
                return None;
            }
            return Some(([v, v], 1.0));
        }
        let i = crate::stats::median_interval(rounds, crate::stats::LEVEL)?;
        Some(([i.lo, i.hi], i.coverage))
    }

    /// The interval a verdict at look `look` (1 or 2) is decided on, and
    /// its coverage: the order-statistic interval at that look's level
    /// ([`crate::stats::look_level`]). A figure of schema 1 is judged on
    /// the interval it recorded, at the one look it had.
    pub fn decision(&self, look: usize) -> ([f64; 2], Option<f64>) {
        if self.coverage.is_none() || self.method == Method::Exact {
            return (self.interval, self.coverage);
        }
        match crate::stats::median_interval(
            &self.rounds,
            crate::stats::look_level(look),
        ) {
            Some(i) => ([i.lo, i.hi], Some(i.coverage)),
            None => (self.interval, self.coverage),
        }
    }

    /// Does the figure follow from its rounds? The error names the field
    /// that does not: a missing round list, a NaN, a hand-edited value or
    /// interval.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.rounds.is_empty() {
            return Err("rounds: empty, so nothing to judge".into());
        }
        if let Some(k) = self.rounds.iter().position(|v| !v.is_finite()) {
            return Err(format!("rounds[{k}]: not a finite number"));
        }
        if !self.value.is_finite() {
            return Err("value: not a finite number".into());
        }
        let close = |a: f64, b: f64| {
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
        };
        if !close(self.value, crate::stats::median(&self.rounds)) {
            return Err(format!(
                "value: {} is not the median of its rounds ({})",
                self.value,
                crate::stats::median(&self.rounds)
            ));
        }
        let (again, how) = match (self.coverage, self.resamples, self.seed) {
            (Some(coverage), None, None) => {
                let Some((again, c)) =
                    Figure::interval_of(self.method, &self.rounds)
                else {
                    return Err("rounds: an exact figure's rounds differ".into());
                };
                if !close(c, coverage) {
                    return Err(format!(
                        "coverage: {coverage} is not the interval's ({c})"
                    ));
                }
                (again, "by order statistics".to_string())
            }
            (None, Some(resamples), Some(seed)) => {
                if resamples < crate::stats::RESAMPLES {
                    return Err(format!(
                        "resamples: {resamples} (at least {} are needed)",
                        crate::stats::RESAMPLES
                    ));
                }
                let again =
                    crate::stats::bootstrap_median(&self.rounds, resamples, seed)
                        .expect("finite rounds");
                (again, format!("with seed {seed}"))
            }
            _ => {
                return Err("coverage: neither today's (coverage) nor schema 1's \
                     (resamples and seed)"
                    .into());
            }
        };
        if !(close(again[0], self.interval[0]) && close(again[1], self.interval[1]))
        {
            return Err(format!(
                "interval: [{}, {}] does not follow from its rounds ([{}, {}] {how})",
                self.interval[0], self.interval[1], again[0], again[1]
            ));
        }
        Ok(())
    }

    /// Rounds and method, as a table's note gives them: "10 rounds, median
    /// of the rounds' paired ratios".
    pub fn basis(&self) -> String {
        let n = self.rounds.len();
        format!(
            "{n} round{}, {}",
            if n == 1 { "" } else { "s" },
            self.method.describe()
        )
    }
}

/// An experiment's headline figures, by key, in the order it gives them.
pub type Headline = serde_json::Map<String, serde_json::Value>;

/// Build a [`Headline`]: `headline().rounds("fork_us", "fork, µs", rounds, "µs")`.
#[derive(Default)]
pub struct HeadlineBuilder(Headline);

/// A headline key made of free text: `fork + _exit` -> `fork_exit` (the
/// words a pointer compares, [`crate::document::select`]).
pub use crate::document::slug;

pub fn headline() -> HeadlineBuilder {
    HeadlineBuilder::default()
}

impl HeadlineBuilder {
    /// Add a figure; a missing one (no rounds, or a round not finite) is
    /// left out.
    pub fn figure(mut self, key: &str, figure: Option<Figure>) -> Self {
        if let Some(figure) = figure {
            let json = serde_json::to_value(figure).expect("a figure encodes");
            self.0.insert(key.into(), json);
        }
        self
    }

    /// The median of one value per round, with its interval.
    pub fn rounds(
        self,
        key: &str,
        label: &str,
        rounds: impl Into<Option<Vec<f64>>>,
        unit: &str,
    ) -> Self {
        let f =
            rounds.into().and_then(|r| Figure::new(label, unit, Method::Median, r));
        self.figure(key, f)
    }

    /// The median of the rounds' ratios `a[k] / b[k]`, with its interval:
    /// the two conditions of round k ran back to back.
    pub fn paired(
        self,
        key: &str,
        label: &str,
        a: Option<Vec<f64>>,
        b: Option<Vec<f64>>,
    ) -> Self {
        let ratios = a.zip(b).and_then(|(a, b)| crate::stats::paired_ratios(&a, &b));
        let f = ratios.and_then(|r| Figure::new(label, "x", Method::PairedRatio, r));
        self.figure(key, f)
    }

    /// A count or a setting: no spread to speak of.
    pub fn exact(
        self,
        key: &str,
        label: &str,
        value: impl Into<Option<f64>>,
        unit: &str,
    ) -> Self {
        let f = value
            .into()
            .and_then(|v| Figure::new(label, unit, Method::Exact, vec![v]));
        self.figure(key, f)
    }

    pub fn build(self) -> Headline {
        self.0
    }
}

/// Tables as Markdown under the line that says where and how they were
/// measured: `tables.md`, and the side files an experiment adds to
/// [`Report::files`] (with `header.settings` filled, [`Common::settings`]).
pub fn markdown(header: &Header, tables: &[Table]) -> String {
    let mut md = format!(
        "Measured with `{}` on {} ({}), commit {}{}.\n",
        header.command,
        header.machine.summary(),
        header.machine.date,
        header.machine.commit,
        match &header.settings.cpus {
            Some(list) => format!(", confined to CPUs {list}"),
            None => String::new(),
        }
    );
    for table in tables {
        md.push('\n');
        md.push_str(&table.render());
    }
    md
}

/// A finished experiment, ready to be shown and saved.
pub struct Report<T> {
    pub header: Header,
    pub tables: Vec<Table>,
    /// File stem and chart.
    pub charts: Vec<(String, Chart)>,
    /// Further artefacts, file name and contents: bar charts (SVG), the
    /// tables of a comparison that the book shows apart (Markdown).
    pub files: Vec<(String, String)>,
    /// The figures that sum the run up (see [`Figure`]).
    pub headline: Headline,
    /// The long table: one row per run of a condition (written as the
    /// file's `observations`, empty until the experiment gives them).
    pub observations: Vec<crate::engine::Observation>,
    /// The experiment's own results (the file's `data`).
    pub data: T,
}

/// What the runner reads back of any experiment's results file, of any
/// version ([`Document`]): the header and the headline (the rest is the
/// experiment's own).
#[derive(Clone, Debug)]
pub struct Published {
    pub header: Header,
    pub headline: Headline,
    /// The file as read, which a figure is found in
    /// ([`crate::document::resolve`]).
    doc: Document,
}

impl Published {
    /// Read `DIR/NAME.json`; `None` when there is none (a missing
    /// experiment), an error when it is there but unreadable.
    pub fn read(dir: &Path, experiment: &str) -> Result<Option<Published>> {
        let path = dir.join(format!("{experiment}.json"));
        Document::read(&path)?.map(|doc| Published::of(&doc)).transpose()
    }

    /// The header and headline of a results file read: an error naming the
    /// file when its header does not read.
    pub fn of(doc: &Document) -> Result<Published> {
        Ok(Published {
            header: doc.header()?,
            headline: doc.headline().clone(),
            doc: doc.clone(),
        })
    }

    /// The headline figure `key` (at `/headline/KEY`): `None` when there
    /// is none, an error naming the field when it is there but does not
    /// read or does not follow from its rounds ([`Figure::check`]).
    pub fn figure(&self, key: &str) -> std::result::Result<Option<Figure>, String> {
        let escaped = key.replace('~', "~0").replace('/', "~1");
        let Ok(json) = self.doc.at(&format!("/headline/{escaped}")) else {
            return Ok(None);
        };
        checked(json, key).map(Some)
    }

    /// Every headline figure, in order, each checked as [`Published::figure`].
    pub fn figures(&self) -> std::result::Result<Vec<(String, Figure)>, String> {
        Published::figures_of(&self.headline)
    }

    /// Every figure of `headline`, in order, each checked.
    pub fn figures_of(
        headline: &Headline,
    ) -> std::result::Result<Vec<(String, Figure)>, String> {
        let mut out = Vec::new();
        for key in headline.keys() {
            out.extend(figure_of(headline, key)?.map(|f| (key.clone(), f)));
        }
        Ok(out)
    }
}

fn figure_of(
    headline: &Headline,
    key: &str,
) -> std::result::Result<Option<Figure>, String> {
    headline.get(key).map(|json| checked(json, key)).transpose()
}

/// Headline figure `key`, read from `json` and checked.
fn checked(
    json: &serde_json::Value,
    key: &str,
) -> std::result::Result<Figure, String> {
    let figure: Figure = serde_json::from_value(json.clone())
        .map_err(|e| format!("headline.{key}: {e}"))?;
    figure.check().map_err(|e| format!("headline.{key}.{e}"))?;
    Ok(figure)
}

impl<T> Report<T> {
    /// The header the results are written with: the experiment's own, its
    /// settings completed by the common flags and by what the run's
    /// context fixed. A side file's tables (`Report::files`) are headed by
    /// it too, so that they say what `tables.md` says.
    pub fn header_for(&self, common: &Common, out: &Started) -> Header {
        let mut header = self.header.clone();
        header.command = out.command.clone();
        header.settings = common.settings().ran(&self.header.settings);
        for (name, value) in &out.used {
            header.settings.used(name, value);
        }
        header
    }
}

impl<T> Report<T> {
    /// Add the side file `name` holding `tables` as Markdown, headed as
    /// `tables.md` is ([`Report::header_for`]), and return its text: the
    /// tables of a comparison that the book shows apart.
    pub fn side_tables(
        &mut self,
        common: &Common,
        out: &Started,
        name: &str,
        tables: &[Table],
    ) -> String {
        let md = markdown(&self.header_for(common, out), tables);
        self.files.push((name.to_string(), md.clone()));
        md
    }
}

impl<T: Serialize> Report<T> {
    /// Print the tables (or the JSON) and write `<out>/<experiment>.json`,
    /// `<out>/tables.md`, one SVG per chart and every further file.
    pub fn publish(&self, common: &Common, out: &Started) -> Result<()> {
        // Only what its EXPERIMENT declares: the committed schema says it.
        let data_type = std::any::type_name::<T>();
        crate::schema::check_report(
            &self.header.experiment,
            &self.headline,
            data_type,
        )
        .map_err(Error::failed)?;
        let mut header = self.header_for(common, out);
        // Recorded with the results; `run all` and `compare` name a busy one.
        header.load = Some(out.load.until_now());
        let out: &Path = out;
        let name = &header.experiment;
        let json =
            Written::new(&header, &self.headline, &self.observations, &self.data)
                .to_text()?;
        let md = markdown(&header, &self.tables);
        // Shown first: a folder that cannot take the files (a full disk)
        // still leaves the reader the tables.
        labkit::error::print(if common.json { &json } else { &md })?;
        let mut files =
            vec![(format!("{name}.json"), json), ("tables.md".into(), md)];
        for (stem, chart) in &self.charts {
            files.push((
                format!("{stem}.svg"),
                chart.to_svg().map_err(Error::failed)?,
            ));
        }
        files.extend(self.files.iter().cloned());
        crate::results::write_all(out, &files)?;
        // A staged run says where it went once it is renamed into place.
        if common.out.is_some() {
            eprintln!("lab: results written to {}", out.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_markdown_file_says_commit_and_cpus() {
        let mut header = crate::results::Header::new("demo");
        header.settings.cpus = Some("0".into());
        let mut t = crate::table::Table::new("1. Demo", &["a"]);
        t.row(vec!["1".into()]);
        let md = super::markdown(&header, &[t]);
        let first = md.lines().next().unwrap();
        assert!(
            first.contains(&format!("commit {}", header.machine.commit)),
            "{md}"
        );
        assert!(first.ends_with(", confined to CPUs 0."), "{md}");
        assert!(md.contains("1. Demo"), "{md}");
    }
}
