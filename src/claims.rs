//! The then-and-now table: every claim of the articles (`claims.toml`),
//! judged on a run's results.
//!
//! A claim's rule reads one headline figure of one experiment (see
//! [`crate::report::Figure`]) and puts its 95% interval in a range:
//! *holds*, *depends on* (what), or *no longer holds*, each only when the
//! whole interval lies in that range; an interval across a boundary is
//! *too close to call*. Claims the lab cannot re-run say why.
//!
//! A run is judged by the rules it was made under: [`write`] stores a copy
//! of `claims.toml` in the run folder beside its verdicts and records its
//! SHA-256 in the run's manifest ([`store_rules`]), and every later
//! judgement of that run reads them back ([`Rules::of`]); a run with none
//! stored is judged by today's `claims.toml`.

use std::fmt;
use std::path::Path;

use labkit::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::report::Published;

/// The claims, as `claims.toml` lists them.
#[derive(Debug, Deserialize)]
struct File {
    claim: Vec<Claim>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub id: String,
    /// The article: its anchor on the book's References page.
    pub source: String,
    pub claim: String,
    pub then: String,
    pub setting: String,
    /// Why the lab cannot re-run it.
    pub cannot: Option<String>,
    /// `EXPERIMENT/KEY`.
    pub figure: Option<String>,
    #[serde(default)]
    pub one_cpu: bool,
    pub holds: Option<[f64; 2]>,
    /// Why `holds` ends where it does, each end citing the article's
    /// words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<[String; 2]>,
    pub depends: Option<[f64; 2]>,
    pub depends_on: Option<String>,
    /// Why `depends` ends where it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_why: Option<[String; 2]>,
    /// `KEY`: another headline figure of the same results, shown beside
    /// the verdict and not judged (the Rust pair beside the article's C
    /// programs, the other placement beside the article's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<String>,
}

/// The fewest rounds a verdict rests on: with fewer, the interval of a
/// median says nothing about the spread.
pub const MIN_ROUNDS: usize = 3;

/// The setting a results folder records when it was made again with more
/// rounds, its second look ([`crate::schedule::extend`]).
pub const EXTENDED: &str = "rounds extended";

/// The look a results folder's figures were judged at: 2 when its rounds
/// were extended, else 1 ([`crate::stats::LOOKS`]).
pub fn look_of(settings: &crate::results::Settings) -> usize {
    if settings.used.contains_key(EXTENDED) { 2 } else { 1 }
}

/// Today's `claims.toml`, as this lab was built with it.
const TODAY: &str = include_str!("../claims.toml");

/// The file in a run folder that holds the rules its verdicts were judged
/// by: a copy of the `claims.toml` of the lab that judged it.
pub const RULES_FILE: &str = "claims.toml";

/// Every claim of today's `claims.toml`, in the file's order.
pub fn all() -> Vec<Claim> {
    parse(TODAY).expect("claims.toml parses")
}

/// The claims of a `claims.toml`.
fn parse(text: &str) -> std::result::Result<Vec<Claim>, String> {
    toml::from_str::<File>(text).map(|f| f.claim).map_err(|e| {
        // toml's message spans lines: the first says what is wrong.
        e.message().lines().next().unwrap_or("does not parse").to_string()
    })
}

/// The SHA-256 of `text`, in hex.
pub fn sha256(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The rules a run is judged by: those stored with it when it has them
/// (`RUN/claims.toml`, [`store_rules`]), else today's `claims.toml`.
#[derive(Clone, Debug)]
pub struct Rules {
    pub claims: Vec<Claim>,
    /// The SHA-256 of their `claims.toml`, in hex.
    pub sha256: String,
    /// Stored with the run; `false`: today's, the run has none stored.
    pub stored: bool,
}

impl Rules {
    /// Today's `claims.toml`.
    pub fn today() -> Rules {
        Rules { claims: all(), sha256: sha256(TODAY), stored: false }
    }

    /// The rules stored with run `run`, or today's when it has none. A
    /// stored file that does not parse, that the manifest records and is
    /// gone, or whose SHA-256 is not the one the manifest records (edited
    /// by hand) is refused, in one line.
    pub fn of(run: &Path) -> Result<Rules> {
        let path = run.join(RULES_FILE);
        let recorded = crate::runs::Manifest::read(run)?.and_then(|m| m.rules);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(r) = recorded {
                    return Err(Error::failed(format!(
                        "{}: missing, though {} records the rules the run was judged \
                         by (SHA-256 {})",
                        path.display(),
                        crate::runs::MANIFEST,
                        r.sha256
                    )));
                }
                return Ok(Rules::today());
            }
            Err(e) => return Err(Error::io(path.display(), e)),
        };
        let hash = sha256(&text);
        if let Some(r) = recorded.filter(|r| r.sha256 != hash) {
            return Err(Error::failed(format!(
                "{}: its SHA-256 is {hash}, not the {} that {} records: the rules \
                 were edited after the run was judged",
                path.display(),
                r.sha256,
                crate::runs::MANIFEST
            )));
        }
        let claims = parse(&text)
            .map_err(|e| Error::failed(format!("{}: {e}", path.display())))?;
        Ok(Rules { claims, sha256: hash, stored: true })
    }

    /// The first digits of the hash, as a line shows it.
    pub fn short(&self) -> &str {
        &self.sha256[..12.min(self.sha256.len())]
    }

    /// Which rules they are, in words: "the rules stored with the run
    /// (claims.toml, SHA-256 0123456789ab)", "today's claims.toml (SHA-256
    /// 0123456789ab): the run has no rules stored with it".
    pub fn describe(&self) -> String {
        if self.stored {
            format!(
                "the rules stored with the run ({RULES_FILE}, SHA-256 {})",
                self.short()
            )
        } else {
            format!(
                "today's claims.toml (SHA-256 {}): the run has no rules stored with it",
                self.short()
            )
        }
    }

    /// How these rules differ from `other`'s: the claims only these have
    /// (added), only `other` has (removed), and those whose rule differs,
    /// with the fields that do.
    pub fn diff(&self, other: &Rules) -> RulesDiff {
        let find =
            |list: &[Claim], id: &str| list.iter().find(|c| c.id == id).cloned();
        let mut diff = RulesDiff::default();
        for c in &self.claims {
            match find(&other.claims, &c.id) {
                None => diff.added.push(c.id.clone()),
                Some(o) => {
                    let (a, b) = (serde_json::to_value(c), serde_json::to_value(&o));
                    let (Ok(a), Ok(b)) = (a, b) else { continue };
                    let fields: Vec<String> = a
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(k, v)| b.get(k.as_str()) != Some(*v))
                        .map(|(k, _)| k.clone())
                        .collect();
                    if !fields.is_empty() {
                        diff.changed.push(Changed { id: c.id.clone(), fields });
                    }
                }
            }
        }
        for o in &other.claims {
            if find(&self.claims, &o.id).is_none() {
                diff.removed.push(o.id.clone());
            }
        }
        diff
    }
}

/// How one set of rules differs from another ([`Rules::diff`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RulesDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<Changed>,
}

/// A claim whose rule differs, and the fields that do.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Changed {
    pub id: String,
    pub fields: Vec<String>,
}

impl RulesDiff {
    /// In words: "added: a; removed: b; changed: c (holds)", or that no
    /// claim differs (the two files differ in comments or layout only).
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!("added: {}", self.added.join(", ")));
        }
        if !self.removed.is_empty() {
            parts.push(format!("removed: {}", self.removed.join(", ")));
        }
        if !self.changed.is_empty() {
            let changed: Vec<String> = self
                .changed
                .iter()
                .map(|c| format!("{} ({})", c.id, c.fields.join(", ")))
                .collect();
            parts.push(format!("changed: {}", changed.join(", ")));
        }
        if parts.is_empty() {
            "no claim's rule differs (the files differ in comments or layout)".into()
        } else {
            parts.join("; ")
        }
    }
}

/// Store today's rules with run `run` (`RUN/claims.toml`) and record their
/// SHA-256 in its manifest: the rules its verdicts are judged by, now and
/// whenever they are read again, whatever `claims.toml` says by then.
pub fn store_rules(run: &Path) -> Result<Rules> {
    crate::results::write_file(&run.join(RULES_FILE), TODAY)?;
    let rules = Rules { stored: true, ..Rules::today() };
    crate::runs::record_rules(
        run,
        crate::runs::Rules { file: RULES_FILE.into(), sha256: rules.sha256.clone() },
    )?;
    Ok(rules)
}

/// What a rule says of today's figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", content = "why", rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    NoLongerHolds,
    DependsOn(String),
    /// The interval crosses a boundary of the rule: which, and where.
    TooCloseToCall(String),
    NotMeasured(String),
    CannotRerun(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Holds => f.write_str("holds"),
            Verdict::NoLongerHolds => f.write_str("no longer holds"),
            Verdict::DependsOn(what) => write!(f, "depends on {what}"),
            Verdict::TooCloseToCall(why) => write!(f, "too close to call: {why}"),
            Verdict::NotMeasured(why) => write!(f, "not yet measured: {why}"),
            Verdict::CannotRerun(why) => write!(f, "cannot be re-run: {why}"),
        }
    }
}

impl Claim {
    /// The experiment and key of its figure.
    pub fn figure_ref(&self) -> Option<(&str, &str)> {
        self.figure.as_deref()?.split_once('/')
    }

    /// Which range `value` falls in: 0 holds, 1 depends, 2 no longer holds.
    fn region(&self, value: f64) -> u8 {
        let within = |r: Option<[f64; 2]>| {
            r.is_some_and(|[lo, hi]| lo <= value && value <= hi)
        };
        if within(self.holds) {
            0
        } else if within(self.depends) {
            1
        } else {
            2
        }
    }

    /// The rule's boundaries: the finite ends of its ranges, in order.
    pub fn boundaries(&self) -> Vec<f64> {
        let mut edges: Vec<f64> = [self.holds, self.depends]
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.is_finite())
            .collect();
        edges.sort_by(f64::total_cmp);
        edges.dedup();
        edges
    }

    /// The verdict on `figure`, read from results folder `folder` at look
    /// `look`: on the interval that look is decided on
    /// ([`crate::report::Figure::decision`], [`Claim::judge`]), or none when
    /// it has too few rounds for an interval to mean anything.
    pub fn verdict_on(
        &self,
        figure: &crate::report::Figure,
        folder: &str,
        look: usize,
    ) -> Verdict {
        let n = figure.rounds.len();
        if figure.method != crate::report::Method::Exact && n < MIN_ROUNDS {
            return Verdict::NotMeasured(format!(
                "{n} round{} in {folder}: an interval needs at least {MIN_ROUNDS}",
                if n == 1 { "" } else { "s" }
            ));
        }
        self.judge(figure.decision(look).0, &figure.unit)
    }

    /// The verdict on today's figure, from its interval `[lo, hi]`: a
    /// range's verdict only when the whole interval lies in it, else too
    /// close to call, naming the boundary crossed.
    pub fn judge(&self, [lo, hi]: [f64; 2], unit: &str) -> Verdict {
        let inside: Vec<f64> =
            self.boundaries().into_iter().filter(|e| lo < *e && *e < hi).collect();
        let (a, b) = (self.region(lo), self.region(hi));
        if a == b && inside.is_empty() {
            return match a {
                0 => Verdict::Holds,
                1 => Verdict::DependsOn(self.depends_on.clone().unwrap_or_default()),
                _ => Verdict::NoLongerHolds,
            };
        }
        // The boundary crossed: one strictly inside, else the end it touches.
        let edge = inside
            .first()
            .copied()
            .or_else(|| self.boundaries().into_iter().find(|e| lo <= *e && *e <= hi))
            .unwrap_or(lo);
        Verdict::TooCloseToCall(format!(
            "the interval {} to {} straddles the boundary {}",
            show(lo, unit),
            show(hi, unit),
            show(edge, unit)
        ))
    }
}

impl Row {
    /// A row with no figure: `verdict` says why.
    pub fn unjudged(claim: Claim, verdict: Verdict, judged_on: &str) -> Row {
        Row {
            claim,
            today: None,
            interval: None,
            coverage: None,
            look: 0,
            rounds: 0,
            method: String::new(),
            unit: String::new(),
            label: String::new(),
            verdict,
            judged_on: judged_on.into(),
            results: String::new(),
            busy: None,
            beside: None,
        }
    }
}

/// One row of the then-and-now table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub claim: Claim,
    /// Today's figure, the interval its verdict was decided on, that
    /// interval's exact coverage (none for a figure of schema 1, whose
    /// interval was a bootstrap's "95%"), the look it was decided at, its
    /// rounds and how it was made, its unit and what it is.
    pub today: Option<f64>,
    pub interval: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
    #[serde(default)]
    pub look: usize,
    pub rounds: usize,
    pub method: String,
    pub unit: String,
    pub label: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// "1 CPU", "2 CPUs": what the figure was measured on.
    pub judged_on: String,
    /// The folder of the results it was read from, inside the run.
    pub results: String,
    /// Set when the verdict was made on a busy run: its results measured
    /// while other processes took CPU, or a run whose controls were noisy
    /// or that was busy elsewhere ([`Busy::mark`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<String>,
    /// The figure the claim shows beside its verdict ([`Claim::beside`]),
    /// in words, from the same results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<String>,
}

/// What made a run busy: the results folders measured while other
/// processes used the CPU (with how much), and the controls' line when
/// they found the run noisy.
#[derive(Clone, Debug, Default)]
pub struct Busy {
    pub folders: Vec<(String, String)>,
    pub noisy: Option<String>,
}

impl Busy {
    /// What made run `run` busy, read from its results and controls.
    pub fn of(run: &Path) -> Result<Busy> {
        let mut folders = Vec::new();
        for folder in crate::runs::experiments_in(run) {
            let experiment = folder.split('/').next().unwrap_or(&folder);
            let load = Published::read(&run.join(&folder), experiment)?
                .and_then(|p| p.header.load)
                .filter(|l| l.busy);
            if let Some(load) = load {
                folders.push((folder.clone(), load.describe()));
            }
        }
        let noisy = crate::experiments::controls::noisy_line(run)?;
        Ok(Busy { folders, noisy })
    }

    pub fn is_busy(&self) -> bool {
        !self.folders.is_empty() || self.noisy.is_some()
    }

    /// The mark beside a verdict read from results folder `folder`.
    pub fn mark(&self, folder: &str) -> Option<String> {
        if let Some((_, how)) = self.folders.iter().find(|(f, _)| f == folder) {
            return Some(format!("measured while the machine was busy: {how}"));
        }
        if self.noisy.is_some() {
            return Some(
                "on a noisy run (its controls did not contain 1.00)".into(),
            );
        }
        if !self.folders.is_empty() {
            let names: Vec<&str> =
                self.folders.iter().map(|(f, _)| f.as_str()).collect();
            return Some(format!(
                "on a busy run (busy during {})",
                names.join(", ")
            ));
        }
        None
    }

    /// One line per cause, for a run's own output.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .folders
            .iter()
            .map(|(folder, how)| {
                format!(
                    "the machine was busy during {folder} ({how}): its figures may \
                     not come back on a quiet machine"
                )
            })
            .collect();
        lines.extend(self.noisy.clone());
        lines
    }
}

/// The results of `experiment` in run folder `run`: the plain run and
/// its sub-runs (`NAME/cpu0`, ...), with the folder each came from.
fn candidates(run: &Path, experiment: &str) -> Result<Vec<(String, Published)>> {
    let dir = run.join(experiment);
    let mut found = Vec::new();
    if let Some(p) = Published::read(&dir, experiment)? {
        found.push((experiment.to_string(), p));
    }
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(found) };
    let mut subs: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    subs.sort();
    for sub in subs {
        if let Some(p) = Published::read(&dir.join(&sub), experiment)? {
            found.push((format!("{experiment}/{sub}"), p));
        }
    }
    Ok(found)
}

/// Judge every claim on the results in run folder `run`, by the rules
/// stored with it, or today's when it has none ([`Rules::of`]).
pub fn evaluate(run: &Path) -> Result<Vec<Row>> {
    evaluate_by(run, &Rules::of(run)?)
}

/// Judge every claim of `rules` on the results in run folder `run`.
pub fn evaluate_by(run: &Path, rules: &Rules) -> Result<Vec<Row>> {
    // Each experiment's results are read once, however many claims judge
    // them.
    let mut read: std::collections::HashMap<String, Vec<(String, Published)>> =
        std::collections::HashMap::new();
    let mut rows: Vec<Row> = rules
        .claims
        .clone()
        .into_iter()
        .map(|c| evaluate_one(c, run, &mut read))
        .collect::<Result<_>>()?;
    let busy = Busy::of(run)?;
    for row in rows.iter_mut().filter(|r| r.today.is_some()) {
        row.busy = busy.mark(&row.results);
    }
    Ok(rows)
}

fn evaluate_one(
    claim: Claim,
    run: &Path,
    read: &mut std::collections::HashMap<String, Vec<(String, Published)>>,
) -> Result<Row> {
    let row = Row::unjudged;
    if let Some(why) = &claim.cannot {
        let why = why.clone();
        return Ok(row(claim, Verdict::CannotRerun(why), "-"));
    }
    let Some((experiment, key)) = claim.figure_ref() else {
        return Err(Error::failed(format!(
            "claim {}: no figure and no reason",
            claim.id
        )));
    };
    if !read.contains_key(experiment) {
        read.insert(experiment.to_string(), candidates(run, experiment)?);
    }
    let found = &read[experiment];
    let cpus = |p: &Published| p.header.settings.cpu_count;
    // A one-CPU claim prefers a one-CPU run; any other claim the plain run.
    let pick = if claim.one_cpu {
        found.iter().find(|(_, p)| cpus(p) == 1).or(found.first())
    } else {
        found.first()
    };
    let Some((folder, published)) = pick else {
        let why = format!("no {experiment} results in this run");
        return Ok(row(claim, Verdict::NotMeasured(why), "-"));
    };
    let file = crate::document::file_of(run, folder);
    let figure = published
        .figure(key)
        .map_err(|e| Error::failed(format!("{}: {e}", file.display())))?;
    let Some(figure) = figure else {
        let why = format!("{folder} has no figure {key}");
        return Ok(row(claim, Verdict::NotMeasured(why), "-"));
    };
    let n = cpus(published);
    let judged_on = match n {
        0 => "unrecorded".to_string(),
        1 => "1 CPU".to_string(),
        n if claim.one_cpu => format!("{n} CPUs (no one-CPU run)"),
        n => format!("{n} CPUs"),
    };
    let look = look_of(&published.header.settings);
    let verdict = claim.verdict_on(&figure, folder, look);
    let (interval, coverage) = figure.decision(look);
    let beside = match &claim.beside {
        Some(key) => published
            .figure(key)
            .map_err(|e| Error::failed(format!("{}: {e}", file.display())))?
            .map(|f| {
                let [lo, hi] = f.interval;
                format!(
                    "{}: {} (interval {} to {}, {})",
                    f.label,
                    show(f.value, &f.unit),
                    show(lo, &f.unit),
                    show(hi, &f.unit),
                    f.basis()
                )
            }),
        None => None,
    };
    Ok(Row {
        beside,
        verdict,
        today: Some(figure.value),
        interval: Some(interval),
        coverage,
        look,
        rounds: figure.rounds.len(),
        method: figure.method.describe().into(),
        unit: figure.unit,
        label: figure.label,
        judged_on,
        results: folder.clone(),
        busy: None,
        claim,
    })
}

/// A coverage as a percentage, to the tenth where it has one: "96.9%",
/// "75%".
pub fn percent(coverage: f64) -> String {
    let p = (coverage * 1000.0).round() / 10.0;
    if p.fract() == 0.0 { format!("{p:.0}%") } else { format!("{p:.1}%") }
}

/// A figure with its unit, to three significant digits.
pub fn show(value: f64, unit: &str) -> String {
    let number = crate::table::sig(value);
    match unit {
        "" => number,
        "x" => format!("{number}x"),
        "%" => format!("{number}%"),
        unit => format!("{number} {unit}"),
    }
}

/// A range as words: "from 5x up", "from 0.8x to 1.25x", "4096 bytes".
fn range_text([lo, hi]: [f64; 2], unit: &str) -> String {
    if lo == hi {
        show(lo, unit)
    } else if hi.is_infinite() {
        format!("from {} up", show(lo, unit))
    } else if lo <= 0.0 {
        format!("up to {}", show(hi, unit))
    } else {
        format!("from {} to {}", show(lo, unit), show(hi, unit))
    }
}

impl Claim {
    /// The rule in words: "holds from 5x up; depends from 2x to 5x;
    /// otherwise no longer holds".
    pub fn rule(&self, unit: &str) -> String {
        let mut parts = Vec::new();
        if let Some(h) = self.holds {
            parts.push(format!("holds {}", range_text(h, unit)));
        }
        if let Some(d) = self.depends {
            parts.push(format!("depends {}", range_text(d, unit)));
        }
        parts.push("otherwise no longer holds".into());
        parts.join("; ")
    }

    /// Why each end of the rule's ranges is where it is, in the article's
    /// words: "5x: '5 to 10 times'; 10x: ...". Empty for a claim without
    /// reasons (a run's stored rules from before they had them).
    pub fn bounds(&self, unit: &str) -> String {
        let mut parts = Vec::new();
        for (range, why) in
            [(self.holds, &self.why), (self.depends, &self.depends_why)]
        {
            let (Some(range), Some(why)) = (range, why) else { continue };
            for (end, why) in range.iter().zip(why) {
                let end = if end.is_infinite() {
                    "no upper end".into()
                } else {
                    show(*end, unit)
                };
                parts.push(format!("{end}: {why}"));
            }
        }
        parts.join("; ")
    }
}

impl Row {
    /// Today's figure in words: "6.26x (96.9% interval 5.91x to 6.52x,
    /// look 1 of 2, 6 rounds, median of the rounds' paired ratios)"; one of
    /// schema 1 has its bootstrap's "95% interval". An interval short of
    /// the coverage its look asks says so.
    pub fn today_text(&self) -> Option<String> {
        let v = self.today?;
        let [lo, hi] = self.interval?;
        let level = match self.coverage {
            None => "95% interval".to_string(),
            Some(c) if c >= 1.0 => "exact".to_string(),
            Some(c) => format!("{} interval", percent(c)),
        };
        let short = match self.coverage {
            Some(c) if c < crate::stats::look_level(self.look) => format!(
                ", short of the {} a verdict asks, which needs {} rounds",
                percent(crate::stats::look_level(self.look)),
                crate::stats::rounds_for(crate::stats::look_level(self.look))
            ),
            _ => String::new(),
        };
        let look = match (self.coverage, self.look) {
            (Some(c), look) if c < 1.0 && look > 0 => {
                format!(", look {look} of {}", crate::stats::LOOKS)
            }
            _ => String::new(),
        };
        Some(format!(
            "{} ({level} {} to {}{short}{look}, {} round{}, {})",
            show(v, &self.unit),
            show(lo, &self.unit),
            show(hi, &self.unit),
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.method
        ))
    }
}

/// The table as Markdown, citations linked to the References page: a
/// short table of verdicts (two columns, so that the verdict stays in
/// view on a narrow screen), then one section per claim with its rule,
/// today's figure with its interval and rounds, and the settings.
/// `chapter` gives the page (and anchor) where the book discusses a claim.
pub fn markdown(
    rows: &[Row],
    run: &str,
    chapter: &dyn Fn(&Claim) -> Option<String>,
) -> String {
    let mut md = String::new();
    let busy = rows.iter().filter(|r| r.busy.is_some()).count();
    if busy > 0 {
        md.push_str(&format!(
            "**Busy run:** {busy} verdict{} below rest on a busy run (marked \
             *busy*): they may not come back on a quiet machine.\n\n",
            if busy == 1 { "" } else { "s" }
        ));
    }
    md.push_str("| claim | verdict |\n|---|---|\n");
    for r in rows {
        md.push_str(&format!(
            "| [{}](#{}) | **{}**{} |\n",
            cell(&r.claim.claim),
            r.claim.id,
            cell(r.verdict.word()),
            if r.busy.is_some() { " (*busy*)" } else { "" }
        ));
    }
    for r in rows {
        md.push_str(&format!("\n### {}\n\n", r.claim.id));
        md.push_str(&format!(
            "{} ([{}](references.md#{})).\n\n",
            r.claim.claim, r.claim.source, r.claim.source
        ));
        md.push_str(&format!("- **Verdict: {}**\n", r.verdict));
        if let Some(busy) = &r.busy {
            md.push_str(&format!("- *Busy:* {busy}\n"));
        }
        md.push_str(&format!("- Then: {} ({})\n", r.claim.then, r.claim.setting));
        if r.claim.cannot.is_none() {
            md.push_str(&format!("- Rule: {}\n", r.claim.rule(&r.unit)));
            let bounds = r.claim.bounds(&r.unit);
            if !bounds.is_empty() {
                md.push_str(&format!("- Its ends: {bounds}\n"));
            }
        }
        if let Some(today) = r.today_text() {
            md.push_str(&format!("- Today: {today}: {}\n", r.label));
            md.push_str(&format!(
                "- Settings: {}, from `{}`\n",
                r.judged_on, r.results
            ));
            if let Some(beside) = &r.beside {
                md.push_str(&format!("- Beside it, not judged: {beside}\n"));
            }
        }
        if let Some(link) = chapter(&r.claim) {
            md.push_str(&format!("- In the book: {link}\n"));
        }
    }
    let schema1 = rows.iter().all(|r| r.coverage.is_none());
    md.push_str(&if schema1 {
        format!(
            "\nJudged by the rules in `claims.toml` on the run `{run}`: a verdict \
             only when the whole 95% interval lies in one range. \"1 CPU\": the \
             figure comes from a run confined with `--cpus`, as the articles ran.\n"
        )
    } else {
        format!(
        "\nJudged by the rules in `claims.toml` on the run `{run}`: a verdict only \
         when the whole interval lies in one range. Each look at a claim is judged \
         at {} (a second look, with more rounds, at {}), so that the two together \
         are wrong at most 5% of the time. \"1 CPU\": the figure comes from a run \
         confined with `--cpus`, as the articles ran.\n",
        percent(crate::stats::look_level(1)),
        percent(crate::stats::look_level(2))
        )
    });
    md
}

impl Verdict {
    /// The verdict as a word or two, without its reason.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::NoLongerHolds => "no longer holds",
            Verdict::DependsOn(_) => "depends",
            Verdict::TooCloseToCall(_) => "too close to call",
            Verdict::NotMeasured(_) => "not yet measured",
            Verdict::CannotRerun(_) => "cannot be re-run",
        }
    }
}

/// The id mdBook gives the heading `### ID` (as its `normalize_id`
/// does): lower case, spaces as dashes, and every character but letters,
/// digits, `-` and `_` dropped, so `creattime-9.5` is `#creattime-95`.
pub fn heading_id(id: &str) -> String {
    id.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

pub fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The table as plain text for the terminal.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::from("Then and now: the articles' claims on this run\n\n");
    let busy = rows.iter().filter(|r| r.busy.is_some()).count();
    if busy > 0 {
        out.push_str(&format!(
            "Busy run: {busy} verdict{} rest on a busy run, marked [busy]; they may \
             not come back on a quiet machine.\n\n",
            if busy == 1 { "" } else { "s" }
        ));
    }
    for r in rows {
        let mark = if r.busy.is_some() { "  [busy]" } else { "" };
        out.push_str(&format!("{:<24} {}{mark}\n", r.claim.id, r.verdict));
        if let Some(busy) = &r.busy {
            out.push_str(&format!("    busy:  {busy}\n"));
        }
        out.push_str(&format!(
            "    claim: {} [{}]\n",
            r.claim.claim, r.claim.source
        ));
        out.push_str(&format!("    then:  {}\n", r.claim.then));
        if let Some(today) = r.today_text() {
            out.push_str(&format!("    today: {today}; {}\n", r.judged_on));
            out.push_str(&format!("    rule:  {}\n", r.claim.rule(&r.unit)));
        }
    }
    out
}

/// [`evaluate`], and check the run's own `then-and-now.json`, if it has
/// one, against it: a verdict or a figure there that the results do not
/// give (a hand edit, or results changed since) is an error naming the
/// file and the field.
pub fn evaluate_checked(run: &Path) -> Result<Vec<Row>> {
    let rows = evaluate(run)?;
    let path = run.join("then-and-now.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(rows),
        Err(e) => return Err(Error::io(path.display(), e)),
    };
    let stored: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| Error::failed(format!("{}: {e}", path.display())))?;
    for (k, row) in rows.iter().enumerate() {
        let at = |field: &str| {
            format!("{}: [{k}].{field} ({})", path.display(), row.claim.id)
        };
        let Some(old) = stored.iter().find(|s| s["id"] == row.claim.id.as_str())
        else {
            return Err(Error::failed(format!(
                "{}: claim {} is missing",
                path.display(),
                row.claim.id
            )));
        };
        let now = serde_json::to_value(row).expect("a row encodes");
        for field in ["verdict", "why", "today", "interval"] {
            if old.get(field) != now.get(field) {
                return Err(Error::failed(format!(
                    "{}: says {} where the results give {}",
                    at(field),
                    old.get(field).map_or("nothing".into(), |v| v.to_string()),
                    now.get(field).map_or("nothing".into(), |v| v.to_string())
                )));
            }
        }
    }
    Ok(rows)
}

/// Write `then-and-now.md` and `.json` into run folder `run`, judged by
/// today's rules, which are stored with it ([`store_rules`]).
pub fn write(run: &Path) -> Result<Vec<Row>> {
    let rules = store_rules(run)?;
    let rows = evaluate_by(run, &rules)?;
    let name =
        run.file_name().map_or("?".into(), |n| n.to_string_lossy().into_owned());
    crate::results::write_file(
        &run.join("then-and-now.md"),
        &markdown(&rows, &name, &|_| None),
    )?;
    crate::results::write_json(&run.join("then-and-now.json"), &rows)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_to_a_claim_use_the_id_mdbook_gives_its_heading() {
        assert_eq!(heading_id("creattime-9.5"), "creattime-95");
        assert_eq!(heading_id("mq-10-beats-100"), "mq-10-beats-100");
        // No two claims' headings may get one id.
        let mut ids: Vec<String> = all().iter().map(|c| heading_id(&c.id)).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }

    #[test]
    fn every_claim_has_a_rule_or_a_reason() {
        let claims = all();
        assert!(claims.len() >= 20, "{}", claims.len());
        let mut ids: Vec<&str> = claims.iter().map(|c| c.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), claims.len(), "ids are unique");
        for c in &claims {
            match (&c.cannot, c.figure_ref(), c.holds) {
                (Some(_), None, None) => {}
                (None, Some((e, k)), Some([lo, hi])) => {
                    assert!(!e.is_empty() && !k.is_empty(), "{}", c.id);
                    assert!(lo <= hi, "{}", c.id);
                    assert!(
                        crate::experiments::find(e).is_some(),
                        "{}: no experiment {e}",
                        c.id
                    );
                }
                _ => panic!("{}: a claim has a figure and holds, or a reason", c.id),
            }
        }
    }

    /// A figure made from `rounds` the way an experiment makes one, judged.
    fn verdict_on(c: &Claim, rounds: Vec<f64>) -> Verdict {
        let f = crate::report::Figure::new(
            "synthetic",
            "x",
            crate::report::Method::Median,
            rounds,
        )
        .expect("finite rounds");
        c.verdict_on(&f, "synthetic", 1)
    }

    #[test]
    fn the_second_look_is_decided_on_a_wider_interval_and_schema_1_on_its_own() {
        let c = all().into_iter().find(|c| c.id == "create-ratio").unwrap();
        // 18 rounds, four below 5x: the first look's 96.9% interval runs
        // from the 5th smallest (5.2x), so it holds, but the second look's
        // 98.1% from the 4th (4.9x), across the boundary.
        let mut rounds = vec![4.0, 4.5, 4.8, 4.9];
        rounds.extend((0..14).map(|k| 5.2 + 0.1 * f64::from(k)));
        let f = crate::report::Figure::new(
            "r",
            "x",
            crate::report::Method::Median,
            rounds,
        )
        .unwrap();
        assert_eq!(f.decision(1).0[0], 5.2, "{:?}", f.decision(1));
        assert_eq!(c.verdict_on(&f, "s", 1), Verdict::Holds);
        assert_eq!(f.decision(2).0[0], 4.9, "{:?}", f.decision(2));
        assert!(matches!(c.verdict_on(&f, "s", 2), Verdict::TooCloseToCall(_)));
        // A figure of schema 1 is judged on the interval it recorded.
        let old = crate::report::Figure {
            coverage: None,
            resamples: Some(crate::stats::RESAMPLES),
            seed: Some(crate::stats::SEED),
            interval: [5.5, 6.0],
            ..f
        };
        assert_eq!(old.decision(2), ([5.5, 6.0], None));
        assert_eq!(c.verdict_on(&old, "s", 2), Verdict::Holds);
    }

    /// Ten rounds tight around `v`, so that the interval lies near it.
    fn tight(v: f64) -> Vec<f64> {
        (0..10).map(|k| v * (1.0 + 1e-4 * (k as f64 - 4.5))).collect()
    }

    /// A value inside range `[lo, hi]`, away from its ends.
    fn inside([lo, hi]: [f64; 2]) -> f64 {
        if lo == hi {
            lo
        } else if hi.is_finite() {
            (lo + hi) / 2.0
        } else {
            lo * 2.0 + 1.0
        }
    }

    /// Every rule gives each of its verdicts on synthetic rounds: holds,
    /// depends (where it has that range), no longer holds, and too close to
    /// call when the rounds spread across a boundary.
    #[test]
    fn every_rule_can_give_each_of_its_verdicts() {
        for c in all().iter().filter(|c| c.cannot.is_none()) {
            let holds = c.holds.unwrap();
            let at = inside(holds);
            let rounds = if holds[0] == holds[1] { vec![at; 10] } else { tight(at) };
            assert_eq!(verdict_on(c, rounds), Verdict::Holds, "{} at {at}", c.id);
            if let Some(d) = c.depends {
                let at = inside(d);
                assert!(
                    matches!(verdict_on(c, tight(at)), Verdict::DependsOn(_)),
                    "{} at {at}",
                    c.id
                );
            }
            // Just past each boundary, and the ends of the scale: one of
            // them must lie outside both ranges.
            let mut probes = vec![0.0, 1e12];
            for e in c.boundaries() {
                let step = (e.abs() * 0.05).max(1e-2);
                probes.extend([e - step, e + step]);
            }
            let outside = probes
                .into_iter()
                .filter(|v| *v >= 0.0)
                .find(|v| c.region(*v) == 2)
                .unwrap_or_else(|| panic!("{} can never say no longer holds", c.id));
            assert_eq!(
                verdict_on(c, vec![outside; 10]),
                Verdict::NoLongerHolds,
                "{} at {outside}",
                c.id
            );
            // Rounds 10% either side of a boundary (0 has no side below).
            let b =
                c.boundaries().into_iter().find(|b| *b > 0.0).expect("a boundary");
            let spread: Vec<f64> =
                (0..10).map(|k| b * (0.9 + 0.2 * k as f64 / 9.0)).collect();
            assert!(
                matches!(verdict_on(c, spread), Verdict::TooCloseToCall(_)),
                "{} around {b}",
                c.id
            );
        }
    }

    /// Every finite outer end of a rule (the lowest above zero, the
    /// highest) has "no longer holds" just past it, and every end of a
    /// range has its reason in the article's words: a claim of a
    /// magnitude is judged at both ends.
    #[test]
    fn every_rule_has_both_ends_where_it_states_a_magnitude_and_says_why() {
        for c in all().iter().filter(|c| c.cannot.is_none()) {
            let ranges = [c.holds, c.depends];
            let ends: Vec<f64> =
                ranges.iter().flatten().flatten().copied().collect();
            let low = ends.iter().copied().fold(f64::INFINITY, f64::min);
            let high = ends.iter().copied().fold(0.0, f64::max);
            // Past each outer end: 5% below the lowest, 5% above the highest.
            let outside = [(low > 0.0).then_some(low * 0.95), {
                (high.is_finite() && high > 0.0).then_some(high * 1.05)
            }];
            for x in outside.into_iter().flatten() {
                assert_eq!(
                    c.judge([x, x], ""),
                    Verdict::NoLongerHolds,
                    "{}: {x}",
                    c.id
                );
            }
            for (range, why, name) in [
                (c.holds, &c.why, "why"),
                (c.depends, &c.depends_why, "depends_why"),
            ] {
                if range.is_some() {
                    let why = why
                        .as_ref()
                        .unwrap_or_else(|| panic!("{}: no {name}", c.id));
                    assert!(
                        why.iter().all(|w| !w.trim().is_empty()),
                        "{}: {name}",
                        c.id
                    );
                }
            }
            assert!(!c.bounds("").is_empty(), "{}", c.id);
        }
        // The ends the article's words give: "about 0.18 ms", "5 to 10
        // times", "tens of times", "ten or a hundred times".
        let rule = |id: &str| all().into_iter().find(|c| c.id == id).unwrap().holds;
        assert_eq!(rule("process-cost"), Some([120.0, 270.0]));
        assert_eq!(rule("create-ratio"), Some([5.0, 10.0]));
        assert_eq!(rule("lecture-ratio"), Some([20.0, 100.0]));
        assert_eq!(rule("ten-or-a-hundred"), Some([10.0, 100.0]));
        assert_eq!(rule("pipe-peak-700"), Some([350.0, 1400.0]));
    }

    #[test]
    fn an_interval_touching_a_boundary_from_outside_is_too_close() {
        let c = all().into_iter().find(|c| c.id == "create-ratio").unwrap();
        // holds from 5x, depends 2x to 5x: 4.9 to 5.0 has one end in each.
        let v = c.judge([4.9, 5.0], "x");
        assert_eq!(
            v,
            Verdict::TooCloseToCall(
                "the interval 4.90x to 5.00x straddles the boundary 5.00x".into()
            )
        );
        assert_eq!(c.judge([5.0, 7.0], "x"), Verdict::Holds);
        // Past its high end, "5 to 10 times" no longer holds.
        assert_eq!(c.judge([11.0, 12.0], "x"), Verdict::NoLongerHolds);
        assert!(matches!(c.judge([2.5, 4.0], "x"), Verdict::DependsOn(_)));
        assert_eq!(c.judge([1.0, 1.5], "x"), Verdict::NoLongerHolds);
        // A wide interval over a whole range is no verdict either.
        assert!(matches!(c.judge([1.0, 9.0], "x"), Verdict::TooCloseToCall(_)));
    }

    /// `claims.toml` with claim `id`'s `holds` range replaced by `range`.
    fn with_range(id: &str, range: &str) -> String {
        let at = TODAY.find(&format!("id = \"{id}\"")).unwrap();
        let from = at + TODAY[at..].find("holds = ").unwrap();
        let to = from + TODAY[from..].find('\n').unwrap();
        format!("{}holds = {range}{}", &TODAY[..from], &TODAY[to..])
    }

    #[test]
    fn a_run_is_judged_by_the_rules_stored_with_it_and_a_hand_edit_is_refused() {
        let root = labtest::tempdir();
        let run = root.path().join("2026-01-01-000000-a");
        std::fs::create_dir(&run).unwrap();
        // None stored: today's.
        let today = Rules::of(&run).unwrap();
        assert!(!today.stored && today.sha256 == sha256(TODAY));
        assert_eq!(today.sha256.len(), 64);
        assert!(today.describe().contains("has no rules stored with it"));
        // A run with a manifest: the rules and their hash are stored.
        let manifest = serde_json::json!({
            "lab_run": 1, "kind": "run", "command": "lab run all",
            "lab_version": "0", "started": "2026-01-01T00:00:00Z", "ended": null,
        });
        std::fs::write(run.join("run.json"), manifest.to_string()).unwrap();
        let stored = store_rules(&run).unwrap();
        assert_eq!(std::fs::read_to_string(run.join(RULES_FILE)).unwrap(), TODAY);
        let m = crate::runs::Manifest::read(&run).unwrap().unwrap();
        assert_eq!(m.rules.unwrap().sha256, stored.sha256);
        let back = Rules::of(&run).unwrap();
        assert!(back.stored && back.sha256 == today.sha256);
        assert!(back.describe().starts_with("the rules stored with the run"));
        // Edited after the run was judged: refused, in one line.
        std::fs::write(
            run.join(RULES_FILE),
            with_range("create-ratio", "[1.0, inf]"),
        )
        .unwrap();
        let err = Rules::of(&run).unwrap_err().message;
        assert!(
            err.contains("claims.toml: its SHA-256 is ") && !err.contains('\n'),
            "{err}"
        );
        assert!(err.contains("edited after the run was judged"), "{err}");
        // Recorded and gone: refused too.
        std::fs::remove_file(run.join(RULES_FILE)).unwrap();
        let err = Rules::of(&run).unwrap_err().message;
        assert!(err.contains("missing, though run.json records"), "{err}");
        // Stored where nothing records a hash (an --out folder): as they are.
        let bare = root.path().join("out");
        std::fs::create_dir(&bare).unwrap();
        std::fs::write(
            bare.join(RULES_FILE),
            with_range("create-ratio", "[1.0, inf]"),
        )
        .unwrap();
        let rules = Rules::of(&bare).unwrap();
        assert!(rules.stored && rules.sha256 != today.sha256);
        let c = rules.claims.iter().find(|c| c.id == "create-ratio").unwrap();
        assert_eq!(c.holds, Some([1.0, f64::INFINITY]));
        // Rules that do not parse name the file.
        std::fs::write(bare.join(RULES_FILE), "[[claim]]\nid = 3\n").unwrap();
        let err = Rules::of(&bare).unwrap_err().message;
        assert!(
            err.starts_with(&format!("{}: ", bare.join(RULES_FILE).display())),
            "{err}"
        );
    }

    #[test]
    fn two_sets_of_rules_differ_by_the_claims_added_removed_and_changed() {
        let today = Rules::today();
        assert_eq!(today.diff(&today), RulesDiff::default());
        let text = with_range("create-ratio", "[4.0, inf]");
        let mut other = Rules {
            claims: parse(&text).unwrap(),
            sha256: sha256(&text),
            stored: true,
        };
        other.claims.retain(|c| c.id != "java-337");
        let mut extra = other.claims[0].clone();
        extra.id = "new-claim".into();
        other.claims.push(extra);
        let diff = other.diff(&today);
        assert_eq!(diff.added, ["new-claim"]);
        assert_eq!(diff.removed, ["java-337"]);
        assert_eq!(
            diff.changed,
            [Changed { id: "create-ratio".into(), fields: vec!["holds".into()] }]
        );
        assert_eq!(
            diff.words(),
            "added: new-claim; removed: java-337; changed: create-ratio (holds)"
        );
        // Files that differ in a comment only: no claim differs.
        let comment = format!("# a note\n{TODAY}");
        let same = Rules {
            claims: parse(&comment).unwrap(),
            sha256: sha256(&comment),
            stored: true,
        };
        assert_ne!(same.sha256, today.sha256);
        assert!(same.diff(&today).words().starts_with("no claim's rule differs"));
    }

    #[test]
    fn figures_show_three_digits_and_their_unit() {
        assert_eq!(show(1.8642, "x"), "1.86x");
        assert_eq!(show(148.08, "µs"), "148 µs");
        assert_eq!(show(65536.0, "bytes"), "65536 bytes");
        assert_eq!(show(0.0421, ""), "0.042");
        assert_eq!(show(7.23, "%"), "7.23%");
    }
}
