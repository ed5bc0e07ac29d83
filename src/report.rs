//! What every experiment shares: the common flags, where its results go
//! ([`crate::runs`]) and the way they are published (tables on stdout; JSON,
//! Markdown and SVG in the run folder).

use std::path::{Path, PathBuf};

use crate::chart::Chart;
use crate::results::{Header, Settings, check_writable};
use crate::table::Table;
use clap::Args;
use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::runs;

/// Flags every experiment takes.
#[derive(Args, Clone, Debug, Default)]
pub struct Common {
    /// Rounds per setting (the articles ran five)
    #[arg(long, default_value_t = 5,
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
}

impl Context {
    /// An experiment run alone (`lab run NAME`): a new run folder.
    pub fn alone() -> Context {
        Context::default()
    }

    /// One experiment of `lab run all`: into `run`.
    pub fn within(run: PathBuf) -> Context {
        Context { shared_run: Some(run) }
    }
}

/// A started experiment: the folder its results go to, the run folder it
/// belongs to (none with `--out`), and the machine's load when it started.
pub struct Started {
    pub dir: PathBuf,
    pub run: Option<PathBuf>,
    load: crate::machine::LoadMark,
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
    pub fn start(&self, ctx: &Context, experiment: &str) -> Result<Started> {
        let (dir, run) = self.folder(ctx, experiment)?;
        Ok(Started { dir, run, load: crate::machine::LoadMark::now() })
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
            check_writable(dir)?;
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
/// side, what the claims are judged on, and what the book quotes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub label: String,
    pub value: f64,
    pub unit: String,
}

/// An experiment's headline figures, by key, in the order it gives them.
pub type Headline = serde_json::Map<String, serde_json::Value>;

/// Build a [`Headline`]: `headline().add("fork_us", "fork, µs", 110.0, "µs")`.
#[derive(Default)]
pub struct HeadlineBuilder(Headline);

/// A headline key made of free text: `fork + _exit` -> `fork_exit`.
pub fn slug(text: &str) -> String {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.join("_")
}

pub fn headline() -> HeadlineBuilder {
    HeadlineBuilder::default()
}

impl HeadlineBuilder {
    /// Add a figure; a missing or non-finite value is left out.
    pub fn add(
        mut self,
        key: &str,
        label: &str,
        value: impl Into<Option<f64>>,
        unit: &str,
    ) -> Self {
        if let Some(value) = value.into().filter(|v| v.is_finite()) {
            let figure = Figure { label: label.into(), value, unit: unit.into() };
            let json = serde_json::to_value(figure).expect("a figure encodes");
            self.0.insert(key.into(), json);
        }
        self
    }

    /// Add a summary's median as `key`, and its lowest and highest as
    /// `key_min` and `key_max` ("the same, lowest `over`").
    pub fn add_range(
        self,
        key: &str,
        label: &str,
        over: &str,
        summary: Option<crate::stats::Summary>,
        unit: &str,
    ) -> Self {
        let (lowest, highest) = (
            format!("the same, lowest {over}"),
            format!("the same, highest {over}"),
        );
        self.add(key, label, summary.map(|s| s.median), unit)
            .add(&format!("{key}_min"), &lowest, summary.map(|s| s.min), unit)
            .add(&format!("{key}_max"), &highest, summary.map(|s| s.max), unit)
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
    pub data: T,
}

#[derive(Serialize)]
struct Document<'a, T> {
    #[serde(flatten)]
    header: &'a Header,
    headline: &'a Headline,
    #[serde(flatten)]
    data: &'a T,
}

/// What the runner reads back of any experiment's results file: the header
/// and the headline (the rest is the experiment's own).
#[derive(Clone, Debug, Deserialize)]
pub struct Published {
    #[serde(flatten)]
    pub header: Header,
    #[serde(default)]
    pub headline: Headline,
}

impl Published {
    /// Read `DIR/NAME.json`; `None` when there is none (a missing
    /// experiment), an error when it is there but unreadable.
    pub fn read(dir: &Path, experiment: &str) -> Result<Option<Published>> {
        let path = dir.join(format!("{experiment}.json"));
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path.display(), e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::failed(format!("{}: {e}", path.display())))
    }

    /// The headline figure `key`.
    pub fn figure(&self, key: &str) -> Option<Figure> {
        serde_json::from_value(self.headline.get(key)?.clone()).ok()
    }

    /// Every headline figure, in order.
    pub fn figures(&self) -> Vec<(String, Figure)> {
        self.headline
            .iter()
            .filter_map(|(k, v)| {
                Some((k.clone(), serde_json::from_value(v.clone()).ok()?))
            })
            .collect()
    }
}

impl<T: Serialize> Report<T> {
    /// Print the tables (or the JSON) and write `<out>/<experiment>.json`,
    /// `<out>/tables.md`, one SVG per chart and every further file.
    pub fn publish(&self, common: &Common, out: &Started) -> Result<()> {
        let mut header = self.header.clone();
        header.settings = common.settings().ran(&self.header.settings);
        // Recorded with the results; `run all` and `compare` name a busy one.
        header.load = Some(out.load.until_now());
        let out: &Path = out;
        let name = &header.experiment;
        let doc =
            Document { header: &header, headline: &self.headline, data: &self.data };
        let encode = |e| Error::failed(format!("cannot encode results: {e}"));
        let mut json = serde_json::to_string_pretty(&doc).map_err(encode)?;
        json.push('\n');
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
