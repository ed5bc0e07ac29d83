//! `lab compare [RUN] [AGAINST]`: a run beside another, by default your
//! latest run beside the reference the book shows. For each experiment the
//! headline figures side by side with their ratio, and every setting that
//! differs; then the then-and-now table of RUN.

use std::path::{Path, PathBuf};

use crate::results::Settings;
use labkit::{Error, Result};
use serde::Serialize;

use crate::claims;
use crate::report::Published;
use crate::runs;

/// Your latest finished run that reads whole ([`runs::latest_where`]):
/// every headline figure of it read and checked as a comparison reads it,
/// so that a newer run with a figure that does not read is passed over by
/// name, not taken and then refused.
pub fn latest() -> Option<PathBuf> {
    runs::latest_where(&|doc| {
        Published::of(doc).map_err(|e| e.to_string())?.figures().map(drop)
    })
}

/// Find a run: a folder path, or the name of a folder under `runs/` or
/// `results/`. A folder that is not a lab run (no manifest, no results) is
/// a usage error: nothing is judged or written there.
pub fn resolve(name: &str) -> Result<PathBuf> {
    let as_path = PathBuf::from(name);
    for dir in
        [as_path, runs::runs_root().join(name), runs::results_root().join(name)]
    {
        if dir.is_dir() {
            if !runs::is_run(&dir)? {
                return Err(Error::usage(format!(
                    "{} is not a lab run (no {} manifest and no results): give a \
                     run folder under {} or {}",
                    dir.display(),
                    runs::MANIFEST,
                    runs::runs_root().display(),
                    runs::results_root().display()
                )));
            }
            for gone in runs::missing_results(&dir) {
                eprintln!(
                    "lab: {}: its manifest lists {gone}, which is missing: read as \
                     not measured",
                    dir.display()
                );
            }
            return Ok(dir);
        }
    }
    Err(Error::usage(format!(
        "no run '{name}': give a run folder, or a name under {} or {}",
        runs::runs_root().display(),
        runs::results_root().display()
    )))
}

/// The run `name` names ([`resolve`]), or without a name the `default`
/// one; a usage error (`none`) when there is no default run.
pub(crate) fn resolve_or(
    name: Option<String>,
    default: fn() -> Option<PathBuf>,
    none: impl FnOnce() -> String,
) -> Result<PathBuf> {
    match name {
        Some(name) => resolve(&name),
        None => default().ok_or_else(|| Error::usage(none())),
    }
}

/// One experiment (or sub-run) in the comparison.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// `NAME` or `NAME/VARIANT`.
    pub results: String,
    /// Set when one side lacks it.
    pub missing: Option<String>,
    /// (setting, run, against) for each setting that differs.
    pub differences: Vec<(String, String, String)>,
    /// Which side was measured on a busy machine, and how busy.
    pub busy: Vec<String>,
    pub figures: Vec<FigureRow>,
}

#[derive(Debug, Serialize)]
pub struct FigureRow {
    pub key: String,
    pub label: String,
    pub unit: String,
    pub run: Option<f64>,
    pub against: Option<f64>,
    /// run / against.
    pub ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub run: String,
    pub against: String,
    pub entries: Vec<Entry>,
    /// The then-and-now table of this run, and of the run compared against.
    pub claims: Vec<claims::Row>,
    pub against_claims: Vec<claims::Row>,
    /// Each side's line when its controls found it noisy.
    pub noisy: Vec<String>,
    /// The rules each side was judged by, and how they differ.
    pub rules: RulesNote,
}

/// The rules the two runs were judged by ([`claims::Rules::of`]): each
/// side's SHA-256 and whether they were stored with it (else today's
/// `claims.toml`), and how this run's differ from the other's.
#[derive(Debug, Serialize)]
pub struct RulesNote {
    pub run_sha256: String,
    pub run_stored: bool,
    pub against_sha256: String,
    pub against_stored: bool,
    /// The two hashes differ.
    pub differ: bool,
    /// The claims this run's rules have and the other's lack (added), the
    /// other's have and this run's lack (removed), and those whose rule
    /// differs, with the fields that do.
    pub diff: claims::RulesDiff,
}

impl RulesNote {
    fn of(run: &claims::Rules, against: &claims::Rules) -> RulesNote {
        RulesNote {
            run_sha256: run.sha256.clone(),
            run_stored: run.stored,
            against_sha256: against.sha256.clone(),
            against_stored: against.stored,
            differ: run.sha256 != against.sha256,
            diff: run.diff(against),
        }
    }

    /// One line per thing to say: a side judged by today's claims.toml
    /// (it has none stored), and whether the two sides' rules differ.
    pub fn lines(&self) -> Vec<String> {
        let short = |h: &str| h[..12.min(h.len())].to_string();
        let mut lines = Vec::new();
        for (side, stored) in
            [("this run", self.run_stored), ("the run against", self.against_stored)]
        {
            if !stored {
                lines.push(format!(
                    "{side} is judged by today's claims.toml: it has no rules stored \
                     with it"
                ));
            }
        }
        if self.differ {
            lines.push(format!(
                "the two runs were judged by different rules (this run's SHA-256 {}, \
                 the other's {}); this run's, beside the other's: {}",
                short(&self.run_sha256),
                short(&self.against_sha256),
                self.diff.words()
            ));
        }
        lines
    }
}

fn read(run: &Path, folder: &str) -> Result<Option<Published>> {
    let experiment = folder.split('/').next().unwrap_or(folder);
    Published::read(&run.join(folder), experiment)
}

/// The settings that differ between two results, named.
pub fn differences(a: &Published, b: &Published) -> Vec<(String, String, String)> {
    let (ma, mb) = (&a.header.machine, &b.header.machine);
    let (sa, sb): (&Settings, &Settings) = (&a.header.settings, &b.header.settings);
    let cpus = |s: &Settings| s.cpus.clone().unwrap_or_else(|| "(all)".into());
    let pairs = [
        ("CPU", ma.cpu_model.clone(), mb.cpu_model.clone()),
        ("logical CPUs", ma.logical_cpus.to_string(), mb.logical_cpus.to_string()),
        ("memory MiB", ma.memory_mib.to_string(), mb.memory_mib.to_string()),
        ("kernel", ma.kernel.clone(), mb.kernel.clone()),
        ("virtualisation", ma.virtualization.clone(), mb.virtualization.clone()),
        ("rustc", ma.rustc.clone(), mb.rustc.clone()),
        ("rounds", sa.rounds.to_string(), sb.rounds.to_string()),
        ("--full", sa.full.to_string(), sb.full.to_string()),
        ("--cpus", cpus(sa), cpus(sb)),
        ("CPUs allowed", sa.cpus_allowed.clone(), sb.cpus_allowed.clone()),
        ("command", a.header.command.clone(), b.header.command.clone()),
    ];
    let mut named: Vec<(String, String, String)> =
        pairs.into_iter().map(|(what, x, y)| (what.to_string(), x, y)).collect();
    // The machine facts both recorded (older results have none).
    for (key, x) in &ma.facts {
        if let Some(y) = mb.facts.get(key) {
            named.push((key.clone(), x.clone(), y.clone()));
        }
    }
    // What each experiment chose itself (--quick, loops, ladder blocks).
    let mut used: Vec<&String> = sa.used.keys().chain(sb.used.keys()).collect();
    used.sort();
    used.dedup();
    let shown = |s: &Settings, k: &str| s.used.get(k).cloned().unwrap_or("-".into());
    named.extend(used.into_iter().map(|k| (k.clone(), shown(sa, k), shown(sb, k))));
    named.into_iter().filter(|(_, x, y)| x != y).collect()
}

/// Sort results folders (`NAME`, `NAME/VARIANT`) in the book's order of
/// experiments, each experiment's plain run before its sub-runs; a folder
/// of an experiment this lab no longer has comes last.
pub fn in_book_order(folders: &mut [String]) {
    let place = |f: &String| {
        let experiment = f.split('/').next().unwrap_or(f);
        let at = crate::experiments::every().position(|e| e.name == experiment);
        (at.unwrap_or(usize::MAX), f.clone())
    };
    folders.sort_by_cached_key(place);
}

/// Compare run folder `run` with run folder `against`.
pub fn compare(run: &Path, against: &Path) -> Result<Comparison> {
    let mut names = runs::experiments_in(run);
    for f in runs::experiments_in(against) {
        if !names.contains(&f) {
            names.push(f);
        }
    }
    in_book_order(&mut names);
    let mut entries = Vec::new();
    for folder in names {
        let (a, b) = (read(run, &folder)?, read(against, &folder)?);
        let experiment = folder.split('/').next().unwrap_or(&folder).to_string();
        let mut entry = Entry {
            results: folder,
            missing: None,
            differences: vec![],
            busy: vec![],
            figures: vec![],
        };
        match (&a, &b) {
            (Some(a), Some(b)) => {
                entry.differences = differences(a, b);
                for (side, p) in [("this run", a), ("against", b)] {
                    if let Some(load) = p.header.load.as_ref().filter(|l| l.busy) {
                        entry.busy.push(format!("{side}: {}", load.describe()));
                    }
                }
                let mut keys: Vec<String> = a.headline.keys().cloned().collect();
                keys.extend(
                    b.headline
                        .keys()
                        .filter(|k| !a.headline.contains_key(*k))
                        .cloned(),
                );
                let bad = |side: &Path, e: String| {
                    Error::failed(format!(
                        "{}: {e}",
                        side.join(&entry.results)
                            .join(format!("{experiment}.json"))
                            .display()
                    ))
                };
                for key in keys {
                    let fa = a.figure(&key).map_err(|e| bad(run, e))?;
                    let fb = b.figure(&key).map_err(|e| bad(against, e))?;
                    let any = fa.clone().or(fb.clone()).expect("one side has it");
                    let (va, vb) = (fa.map(|f| f.value), fb.map(|f| f.value));
                    entry.figures.push(FigureRow {
                        key,
                        label: any.label,
                        unit: any.unit,
                        run: va,
                        against: vb,
                        ratio: va
                            .zip(vb)
                            .filter(|(_, b)| *b != 0.0)
                            .map(|(a, b)| a / b),
                    });
                }
            }
            (Some(_), None) => {
                entry.missing = Some("not in the run compared against".into())
            }
            (None, _) => entry.missing = Some("not in this run".into()),
        }
        entries.push(entry);
    }
    let rules =
        RulesNote::of(&claims::Rules::of(run)?, &claims::Rules::of(against)?);
    Ok(Comparison {
        run: run.display().to_string(),
        against: against.display().to_string(),
        entries,
        claims: claims::evaluate_checked(run)?,
        against_claims: claims::evaluate_checked(against)?,
        rules,
        noisy: [("this run", run), ("against", against)]
            .into_iter()
            .filter_map(|(side, r)| {
                crate::experiments::controls::noisy_line(r)
                    .map(|l| l.map(|l| format!("{side}: {l}")))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?,
    })
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".into(), |v| claims::show(v, unit))
}

impl Comparison {
    /// Markdown: one table per experiment, then the then-and-now table.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "# `{}` against `{}`\n\nratio: this run's figure over the other's.\n",
            self.run, self.against
        );
        for e in &self.entries {
            md.push_str(&format!("\n## {}\n\n", e.results));
            if let Some(why) = &e.missing {
                md.push_str(&format!("Missing: {why}.\n"));
                continue;
            }
            for busy in &e.busy {
                md.push_str(&format!("Measured on a busy machine, {busy}.\n\n"));
            }
            if !e.differences.is_empty() {
                md.push_str("| setting | this run | against |\n|---|---|---|\n");
                for (what, a, b) in &e.differences {
                    md.push_str(&format!("| {what} | {a} | {b} |\n"));
                }
                md.push('\n');
            }
            md.push_str(
                "| figure | this run | against | ratio |\n|---|---|---|---|\n",
            );
            for f in &e.figures {
                md.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    f.label.replace('|', "\\|"),
                    opt(f.run, &f.unit),
                    opt(f.against, &f.unit),
                    f.ratio.map_or("-".into(), |r| format!("{r:.2}"))
                ));
            }
        }
        let name = Path::new(&self.run)
            .file_name()
            .map_or(self.run.clone(), |n| n.to_string_lossy().into_owned());
        md.push_str("\n## Verdicts side by side\n\n");
        for line in self.rules.lines() {
            md.push_str(&format!("Rules: {line}.\n\n"));
        }
        for line in &self.noisy {
            md.push_str(&format!("Noisy: {line}.\n\n"));
        }
        md.push_str("| claim | this run | against |\n|---|---|---|\n");
        for (id, a, b, differs) in self.side_by_side() {
            let id =
                if differs { format!("**{id}** (verdicts differ)") } else { id };
            md.push_str(&format!(
                "| {id} | {} | {} |\n",
                a.replace('|', "\\|"),
                b.replace('|', "\\|")
            ));
        }
        md.push_str("\n## Then and now\n\n");
        md.push_str(&claims::markdown(&self.claims, &name, &|_| None));
        md
    }

    /// Plain text for the terminal.
    pub fn text(&self) -> String {
        let mut out = format!("{}\n  against {}\n", self.run, self.against);
        for e in &self.entries {
            out.push_str(&format!("\n{}\n", e.results));
            if let Some(why) = &e.missing {
                out.push_str(&format!("  missing: {why}\n"));
                continue;
            }
            for (what, a, b) in &e.differences {
                out.push_str(&format!("  differs: {what}: {a} | {b}\n"));
            }
            for busy in &e.busy {
                out.push_str(&format!("  busy machine: {busy}\n"));
            }
            for f in &e.figures {
                out.push_str(&format!(
                    "  {:<56} {:>14} {:>14} {:>6}\n",
                    f.label,
                    opt(f.run, &f.unit),
                    opt(f.against, &f.unit),
                    f.ratio.map_or("-".into(), |r| format!("{r:.2}"))
                ));
            }
        }
        out.push_str("\nVerdicts side by side (this run | against)\n");
        for line in self.rules.lines() {
            out.push_str(&format!("  rules: {line}\n"));
        }
        for line in &self.noisy {
            out.push_str(&format!("  noisy: {line}\n"));
        }
        for (id, a, b, differs) in self.side_by_side() {
            let mark = if differs { "  <- the verdicts differ" } else { "" };
            out.push_str(&format!(
                "  {id}{mark}\n    this run: {a}\n    against:  {b}\n"
            ));
        }
        out.push('\n');
        out.push_str(&claims::text(&self.claims));
        out
    }

    /// Per judged claim (of either run's rules): its id, this run's
    /// verdict and figure, the other run's, and whether the two verdicts
    /// differ.
    pub fn side_by_side(&self) -> Vec<(String, String, String, bool)> {
        let cell = |r: Option<&claims::Row>| {
            r.map_or("- (not among its rules)".into(), |r| match r.today_text() {
                Some(t) => {
                    format!("{}: {t}, {}", short_verdict(&r.verdict), r.judged_on)
                }
                None => r.verdict.to_string(),
            })
        };
        let word = |r: Option<&claims::Row>| r.map(|r| short_verdict(&r.verdict));
        let mut out: Vec<(String, String, String, bool)> = self
            .claims
            .iter()
            .filter(|r| r.claim.cannot.is_none())
            .map(|r| {
                let other = row_of(&self.against_claims, &r.claim.id);
                let differs = word(Some(r)) != word(other);
                (r.claim.id.clone(), cell(Some(r)), cell(other), differs)
            })
            .collect();
        // A claim only the other run's rules have.
        for o in self.against_claims.iter().filter(|o| o.claim.cannot.is_none()) {
            if row_of(&self.claims, &o.claim.id).is_none() {
                out.push((o.claim.id.clone(), cell(None), cell(Some(o)), true));
            }
        }
        out
    }
}

/// The row of claim `id` among `rows`.
fn row_of<'a>(rows: &'a [claims::Row], id: &str) -> Option<&'a claims::Row> {
    rows.iter().find(|r| r.claim.id == id)
}

/// A verdict as a word or two (the reason is in the then-and-now table).
/// A decided verdict needs only its word; "not yet measured" and "cannot
/// be re-run" keep their reason.
fn short_verdict(v: &claims::Verdict) -> String {
    match v {
        claims::Verdict::NotMeasured(_) | claims::Verdict::CannotRerun(_) => {
            v.to_string()
        }
        v => v.word().into(),
    }
}

/// `lab compare [RUN] [AGAINST] [--out DIR]`: print the comparison, and
/// write `compare.md` and `compare.json` into `--out DIR`, or else into RUN
/// when it is a finished run of the reader's own under `runs/`. Nothing is
/// ever written into `results/`, or into a folder that is not a lab run.
pub fn main(names: Vec<String>, out: Option<PathBuf>) -> Result<()> {
    use crate::checkout::{may_write, real_path};
    // Refused before anything is read: results/, a tracked folder.
    if let Some(dir) = &out {
        crate::results::check_writable(dir, "--out")?;
    }
    runs::sweep_and_say();
    // A class: three or more runs, or one folder of runs.
    let class = match names.as_slice() {
        [one]
            if Path::new(one).is_dir()
                && !runs::is_run(Path::new(one))?
                && !crate::class::runs_in(Path::new(one))?.is_empty() =>
        {
            let dir = PathBuf::from(one);
            Some((crate::class::runs_in(&dir)?, Some(dir)))
        }
        many if many.len() >= 3 => {
            let list =
                many.iter().map(|n| resolve(n)).collect::<Result<Vec<_>>>()?;
            Some((list, None))
        }
        _ => None,
    };
    if let Some((list, folder)) = class {
        // Beside the runs of a folder a teacher collected: never into
        // results/ or a tracked folder, and never beside a reference run
        // (another checkout's results/ is no class either).
        let beside = match folder {
            Some(d) if list.iter().any(|r| runs::is_reference(r)) => {
                eprintln!(
                    "lab: class comparison not saved in {}: it holds a reference \
                     run; --out DIR saves it",
                    d.display()
                );
                None
            }
            Some(d) => match may_write(&d, "") {
                Ok(()) => Some(d),
                Err(e) => {
                    eprintln!("lab: class comparison not saved there: {e}");
                    None
                }
            },
            None => None,
        };
        return crate::class::main(&list, out.or(beside).as_deref());
    }
    let mut names = names.into_iter();
    let (run, against) = (names.next(), names.next());
    let both_given = against.is_some();
    if run.is_none() {
        // Your latest run is looked for in runs/: one that is not a folder
        // says so, rather than "no run".
        crate::checkout::runs_folder()?;
    }
    let run = resolve_or(run, latest, || {
        format!(
            "no finished run of yours in {} yet: `lab run all` or `lab run NAME` \
             makes one",
            runs::runs_root().display()
        )
    })?;
    let against = resolve_or(against, runs::reference, || {
        format!("no reference run in {}", runs::results_root().display())
    })?;
    if both_given && real_path(&run) == real_path(&against) {
        return Err(Error::usage(format!(
            "{} and {} are the same run: give two runs, or one to put beside \
             the reference",
            run.display(),
            against.display()
        )));
    }
    let comparison = compare(&run, &against)?;
    labkit::error::print(&comparison.text())?;
    let into = match out {
        Some(dir) => dir,
        None => {
            let ours = real_path(&run).starts_with(real_path(&runs::runs_root()));
            let why = if !ours {
                Some("it is not a run of yours under runs/".to_string())
            } else if !runs::is_finished(&run) {
                Some(
                    "it is unfinished (it was cut short, or is still running)"
                        .into(),
                )
            } else {
                may_write(&run, "").err().map(|e| e.to_string())
            };
            if let Some(why) = why {
                eprintln!(
                    "lab: comparison not saved in {}: {why}; --out DIR saves it",
                    run.display()
                );
                return Ok(());
            }
            run
        }
    };
    crate::results::write_file(&into.join("compare.md"), &comparison.markdown())?;
    crate::results::write_json(&into.join("compare.json"), &comparison)?;
    eprintln!("lab: comparison written to {}", into.join("compare.md").display());
    Ok(())
}
