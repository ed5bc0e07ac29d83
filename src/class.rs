//! `lab compare` of a class: three or more runs, or a folder of runs (a
//! teacher's collection of each student's run folder), side by side. Per
//! claim, how many runs hold, no longer hold, depend or are too close to
//! call; the figure's median and range across the runs; and the runs
//! grouped by CPU model and kernel.
//!
//! A class's runs come from many machines and maybe several versions of
//! the lab, so each results file is read as it is, by the one reader of
//! every version ([`crate::document`]), its figures checked only when
//! judged: a file that does not read (a truncated copy, a schema this lab
//! does not read) leaves its run out, named in one line;
//! a figure from another version that lacks some of today's fields (its
//! rounds, its interval) still gives its value, and the fields it lacks
//! are listed; a run with nothing to compare is named, and when no run has
//! anything the comparison fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use labkit::{Error, Result};
use serde::Serialize;
use serde_json::Value;

use crate::claims::{self, Claim, Verdict};
use crate::document::Document;
use crate::report::Figure;
use crate::runs;

/// One run of the class, as read.
#[derive(Debug, Serialize)]
pub struct Member {
    pub run: String,
    pub cpu_model: String,
    pub kernel: String,
    /// Fields of today's figures that this run's figures lack, or fields
    /// they have that today's lack (a run made by another version of the
    /// lab), each once.
    pub lacks: Vec<String>,
    /// Why the run counts as busy ([`claims::Busy`]), if it does.
    pub busy: Option<String>,
    /// The SHA-256 of the rules it was judged by ([`claims::Rules::of`]),
    /// and whether they were stored with it (else today's claims.toml).
    pub rules_sha256: String,
    pub rules_stored: bool,
    /// How its stored rules differ from today's, in words, when they do.
    pub rules_differ: Option<String>,
}

/// One claim across the class.
#[derive(Debug, Serialize)]
pub struct ClaimRow {
    pub id: String,
    pub claim: String,
    /// Verdict (as a word or two) -> how many runs gave it.
    pub verdicts: BTreeMap<String, usize>,
    /// The figure's median over the runs that have it, and its range.
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub unit: String,
    /// How many runs gave a figure.
    pub runs: usize,
    /// How many of the verdicts were made on a busy run.
    pub busy: usize,
}

#[derive(Debug, Serialize)]
pub struct Class {
    pub members: Vec<Member>,
    /// Runs left out, and why (one line each).
    pub left_out: Vec<(String, String)>,
    /// Copies of a run already counted: (the copy, the run it copies).
    pub duplicates: Vec<(String, String)>,
    /// (CPU model, kernel) -> the runs made on it.
    pub groups: Vec<(String, String, Vec<String>)>,
    pub claims: Vec<ClaimRow>,
}

/// The look a results file's figures are judged at ([`crate::claims::look_of`]).
fn look_in(doc: &Document) -> usize {
    let used = doc.get("/settings/used");
    let extended = used.and_then(|u| u.get(crate::claims::EXTENDED)).is_some();
    if extended { 2 } else { 1 }
}

/// What `raw` lacks and has beyond the nearest figure version the lab
/// reads ([`crate::report::FIGURE_FIELDS`]): nothing when it is one.
fn fields_off(raw: &Value) -> Vec<String> {
    let has: Vec<&str> = raw
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    crate::report::FIGURE_FIELDS
        .iter()
        .map(|known| {
            let mut off: Vec<String> = known
                .iter()
                .filter(|f| !has.contains(f))
                .map(|f| f.to_string())
                .collect();
            off.extend(
                has.iter()
                    .filter(|k| !known.contains(k))
                    .map(|k| format!("(has) {k}")),
            );
            off
        })
        .min_by_key(Vec::len)
        .unwrap_or_default()
}

/// The results files of run `run`, by folder, each read as it is
/// ([`Document`]: of any version the lab reads, its figures checked only
/// when judged); an error (one line) names the first that does not read.
fn read_run(run: &Path) -> std::result::Result<Vec<(String, Document)>, String> {
    let mut out = Vec::new();
    for folder in runs::experiments_in(run) {
        let doc = Document::read_folder(run, &folder).map_err(|e| e.message)?;
        let doc = doc.ok_or_else(|| {
            format!("{}: gone", crate::document::file_of(run, &folder).display())
        })?;
        out.push((folder, doc));
    }
    Ok(out)
}

/// What one run says of one claim.
struct Judged {
    /// The verdict as a word or two.
    verdict: String,
    /// The figure's value and unit, if it has one.
    value: Option<(f64, String)>,
    /// Fields its figure lacks, or has beyond today's (another version's).
    other_version: Vec<String>,
    /// A figure in today's format that does not read or does not follow
    /// from its rounds: why.
    damaged: Option<String>,
}

/// The verdict word of a figure made by another version of the lab.
const OTHER_VERSION: &str = "not judged (another version's figure)";

/// The verdict word of a claim the rules stored with a run do not have.
const NOT_IN_RULES: &str = "not among its rules";

impl Judged {
    /// A verdict with no figure.
    fn plain(verdict: &str) -> Judged {
        Judged {
            verdict: verdict.into(),
            value: None,
            other_version: Vec::new(),
            damaged: None,
        }
    }
}

/// What one run says of `claim`.
fn judge(claim: &Claim, files: &[(String, Document)]) -> Judged {
    let plain = Judged::plain;
    let Some((experiment, key)) = claim.figure_ref() else {
        return plain(Verdict::CannotRerun(String::new()).word());
    };
    let of: Vec<&(String, Document)> = files
        .iter()
        .filter(|(folder, _)| folder.split('/').next() == Some(experiment))
        .collect();
    let one_cpu = |d: &Document| {
        d.get("/settings/cpu_count").and_then(Value::as_u64) == Some(1)
    };
    let pick = if claim.one_cpu {
        of.iter().find(|(_, j)| one_cpu(j)).or(of.first())
    } else {
        of.first()
    };
    let Some((folder, json)) = pick else {
        return plain(Verdict::NotMeasured(String::new()).word());
    };
    let raw = json.headline().get(key).unwrap_or(&Value::Null);
    if raw.is_null() {
        return plain(Verdict::NotMeasured(String::new()).word());
    }
    let unit = raw["unit"].as_str().unwrap_or("").to_string();
    let value = raw["value"].as_f64().map(|v| (v, unit.clone()));
    // A version the lab reads has exactly its fields; another version's
    // lacks some or has others.
    let other = fields_off(raw);
    if !other.is_empty() {
        return Judged {
            verdict: OTHER_VERSION.into(),
            value,
            other_version: other,
            damaged: None,
        };
    }
    let checked = serde_json::from_value::<Figure>(raw.clone())
        .map_err(|e| e.to_string())
        .and_then(|f| f.check().map(|()| f));
    match checked {
        Ok(f) => Judged {
            verdict: claim
                .verdict_on(&f, experiment, look_in(json))
                .word()
                .to_string(),
            value: Some((f.value, unit)),
            other_version: Vec::new(),
            damaged: None,
        },
        Err(e) => Judged {
            verdict: String::new(),
            value: None,
            other_version: Vec::new(),
            damaged: Some(format!("{folder}'s figure {key} is damaged: {e}")),
        },
    }
}

/// The runs `dir` holds, sorted: every sub-folder (those that are not
/// runs, or cannot be read, to be named and left out), when at least one
/// is a run; none when no sub-folder is known to be a run (`/`, whose
/// folders an ordinary user cannot all read, is no folder of runs).
pub fn runs_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir.display(), e))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    if !found.iter().any(|p| runs::is_run(p).unwrap_or(false)) {
        return Ok(Vec::new());
    }
    found.sort();
    Ok(found)
}

/// A run's results, as bytes: two runs with the same are copies of one.
fn fingerprint(files: &[(String, Document)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for (folder, doc) in files {
        folder.hash(&mut h);
        doc.json().to_string().hash(&mut h);
    }
    h.finish()
}

/// Why run `run` is left out of a class before its figures are read, if
/// it is: not a lab run, or not finished.
fn not_a_member(run: &Path) -> Option<String> {
    match runs::is_run(run) {
        Err(e) => return Some(e.to_string()),
        Ok(false) => {
            return Some(format!(
                "not a lab run (no {} manifest and no results)",
                runs::MANIFEST
            ));
        }
        Ok(true) => {}
    }
    if !runs::is_finished(run) {
        return Some("it never finished (cut short, or still running)".into());
    }
    let gone = runs::missing_results(run);
    gone.first().map(|f| format!("a results file is missing ({f})"))
}

/// A run counted in a class, with its judgement of every claim.
struct Counted<'a> {
    name: String,
    run: &'a Path,
    files: Vec<(String, Document)>,
    judged: Vec<Judged>,
    rules: claims::Rules,
}

/// Compare the class `runs`. Every claim's tally adds up to the runs
/// counted; a run left out is named with why, and a copy of a run already
/// counted is named and counted once. Each run is judged by the rules
/// stored with it, or today's when it has none; the rows are today's
/// claims, and a claim a run's rules lack is "not among its rules".
pub fn compare(list: &[PathBuf]) -> Result<Class> {
    let mut left_out = Vec::new();
    let mut duplicates = Vec::new();
    let mut seen: BTreeMap<u64, String> = BTreeMap::new();
    // The runs counted, each with its judgement of every claim.
    let mut counted: Vec<Counted> = Vec::new();
    let today = claims::Rules::today();
    let all: Vec<Claim> =
        today.claims.iter().filter(|c| c.cannot.is_none()).cloned().collect();
    for run in list {
        let name = run.display().to_string();
        if let Some(why) = not_a_member(run) {
            left_out.push((name, why));
            continue;
        }
        let rules = match claims::Rules::of(run) {
            Ok(rules) => rules,
            Err(e) => {
                left_out.push((name, e.to_string()));
                continue;
            }
        };
        let files = match read_run(run) {
            Ok(files) if files.is_empty() => {
                left_out.push((name, "no results in it".into()));
                continue;
            }
            Ok(files) => files,
            Err(why) => {
                left_out.push((name, why));
                continue;
            }
        };
        let print = fingerprint(&files);
        if let Some(first) = seen.get(&print) {
            duplicates.push((name, first.clone()));
            continue;
        }
        let judged: Vec<Judged> = all
            .iter()
            .map(|c| match rules.claims.iter().find(|r| r.id == c.id) {
                Some(rule) if rule.cannot.is_none() => judge(rule, &files),
                Some(_) => Judged::plain(Verdict::CannotRerun(String::new()).word()),
                None => Judged::plain(NOT_IN_RULES),
            })
            .collect();
        if let Some(why) = judged.iter().find_map(|j| j.damaged.clone()) {
            left_out.push((name, why));
            continue;
        }
        if judged.iter().all(|j| j.value.is_none()) {
            let other = judged.iter().any(|j| !j.other_version.is_empty());
            left_out.push((
                name,
                if other {
                    "none of its figures can be compared: they were made by another \
                     version of the lab"
                        .into()
                } else {
                    "none of its figures is one a claim is judged on".into()
                },
            ));
            continue;
        }
        seen.insert(print, name.clone());
        counted.push(Counted { name, run, files, judged, rules });
    }
    if counted.is_empty() {
        let why: Vec<String> =
            left_out.iter().map(|(r, w)| format!("{r}: {w}")).collect();
        return Err(Error::failed(format!(
            "no run can be compared ({})",
            why.join("; ")
        )));
    }
    let busy: Vec<Option<String>> = counted
        .iter()
        .map(|c| {
            claims::Busy::of(c.run)
                .ok()
                .filter(|b| b.is_busy())
                .map(|b| b.lines().join("; "))
        })
        .collect();
    let mut rows = Vec::new();
    for (k, claim) in all.iter().enumerate() {
        let mut verdicts = BTreeMap::new();
        let mut values = Vec::new();
        let mut unit = String::new();
        let mut on_busy = 0;
        for (i, c) in counted.iter().enumerate() {
            let j = &c.judged[k];
            *verdicts.entry(j.verdict.clone()).or_insert(0) += 1;
            if let Some((v, u)) = &j.value {
                values.push(*v);
                unit = u.clone();
            }
            if busy[i].is_some() && j.value.is_some() {
                on_busy += 1;
            }
        }
        let s = crate::stats::Summary::of(&values);
        rows.push(ClaimRow {
            id: claim.id.clone(),
            claim: claim.claim.clone(),
            verdicts,
            median: s.map(|s| s.median),
            min: s.map(|s| s.min),
            max: s.map(|s| s.max),
            unit,
            runs: values.len(),
            busy: on_busy,
        });
    }
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut members = Vec::new();
    for (Counted { name, files, judged, rules, .. }, busy) in
        counted.into_iter().zip(busy)
    {
        let machine = files[0].1.get("/machine").unwrap_or(&Value::Null);
        let cpu = machine["cpu_model"].as_str().unwrap_or("unknown CPU").to_string();
        let kernel =
            machine["kernel"].as_str().unwrap_or("unknown kernel").to_string();
        groups.entry((cpu.clone(), kernel.clone())).or_default().push(name.clone());
        let mut lacks: Vec<String> = Vec::new();
        for field in judged.into_iter().flat_map(|j| j.other_version) {
            if !lacks.contains(&field) {
                lacks.push(field);
            }
        }
        let rules_differ = (rules.stored && rules.sha256 != today.sha256)
            .then(|| rules.diff(&today).words());
        members.push(Member {
            run: name,
            cpu_model: cpu,
            kernel,
            lacks,
            busy,
            rules_sha256: rules.sha256,
            rules_stored: rules.stored,
            rules_differ,
        });
    }
    Ok(Class {
        members,
        left_out,
        duplicates,
        groups: groups.into_iter().map(|((c, k), r)| (c, k, r)).collect(),
        claims: rows,
    })
}

const ORDER: [&str; 8] = [
    "holds",
    "no longer holds",
    "depends",
    "too close to call",
    "not yet measured",
    OTHER_VERSION,
    NOT_IN_RULES,
    "cannot be re-run",
];

impl ClaimRow {
    fn counts(&self) -> String {
        let mut parts: Vec<String> = ORDER
            .iter()
            .filter_map(|k| self.verdicts.get(*k).map(|n| format!("{n} {k}")))
            .collect();
        parts.extend(
            self.verdicts
                .iter()
                .filter(|(k, _)| !ORDER.contains(&k.as_str()))
                .map(|(k, n)| format!("{n} {k}")),
        );
        parts.join(", ")
    }

    fn spread(&self) -> String {
        match (self.median, self.min, self.max) {
            (Some(m), Some(lo), Some(hi)) => format!(
                "{} ({} to {}, {} run{})",
                claims::show(m, &self.unit),
                claims::show(lo, &self.unit),
                claims::show(hi, &self.unit),
                self.runs,
                if self.runs == 1 { "" } else { "s" }
            ),
            _ => "-".into(),
        }
    }
}

impl ClaimRow {
    /// "(1 on a busy run)" after the counts, when any verdict was.
    fn busy_note(&self) -> String {
        if self.busy == 0 {
            String::new()
        } else {
            format!(" ({} on a busy run)", self.busy)
        }
    }
}

impl Class {
    /// What the counts rest on: the runs counted, left out, and copies.
    fn preamble(&self) -> Vec<String> {
        let n = self.members.len();
        let mut lines = vec![format!(
            "{n} run{} counted: each claim's verdicts add up to {n}.",
            if n == 1 { "" } else { "s" }
        )];
        for (run, why) in &self.left_out {
            lines.push(format!("Left out, not counted: {run}: {why}."));
        }
        for (copy, of) in &self.duplicates {
            lines.push(format!("A copy of {of}, counted once: {copy}."));
        }
        for m in &self.members {
            if let Some(busy) = &m.busy {
                lines.push(format!("Busy: {}: {busy}.", m.run));
            }
        }
        let today: Vec<&str> = self
            .members
            .iter()
            .filter(|m| !m.rules_stored)
            .map(|m| m.run.as_str())
            .collect();
        if !today.is_empty() {
            lines.push(format!(
                "Judged by today's claims.toml, having no rules stored with {}: {}.",
                if today.len() == 1 { "it" } else { "them" },
                today.join(", ")
            ));
        }
        for m in &self.members {
            if let Some(differ) = &m.rules_differ {
                lines.push(format!(
                    "{} was judged by the rules stored with it (SHA-256 {}), which \
                     differ from today's: {differ}.",
                    m.run,
                    &m.rules_sha256[..12.min(m.rules_sha256.len())]
                ));
            }
        }
        for m in self.members.iter().filter(|m| !m.lacks.is_empty()) {
            lines.push(format!(
                "{} was made by another version of the lab: its figures differ from \
                 today's in {}, so those give values but no verdicts.",
                m.run,
                m.lacks.join(", ")
            ));
        }
        lines
    }

    pub fn markdown(&self) -> String {
        let mut md = format!("# A class of {} runs\n\n", self.members.len());
        for line in self.preamble() {
            md.push_str(&format!("{line}\n\n"));
        }
        md.push_str(
            "| claim | verdicts | figure: median (range, runs) |\n|---|---|---|\n",
        );
        for r in &self.claims {
            md.push_str(&format!(
                "| {} | {}{} | {} |\n",
                r.id,
                r.counts(),
                r.busy_note(),
                r.spread()
            ));
        }
        md.push_str("\n## The machines\n\n| CPU | kernel | runs |\n|---|---|---|\n");
        for (cpu, kernel, runs) in &self.groups {
            md.push_str(&format!("| {cpu} | {kernel} | {} |\n", runs.join(", ")));
        }
        md
    }

    pub fn text(&self) -> String {
        let mut out = format!("A class of {} runs\n", self.members.len());
        for line in self.preamble() {
            out.push_str(&format!("  {line}\n"));
        }
        for r in &self.claims {
            out.push_str(&format!(
                "\n{}\n  verdicts: {}{}\n  figure:   {}\n",
                r.id,
                r.counts(),
                r.busy_note(),
                r.spread()
            ));
        }
        out.push_str("\nThe machines\n");
        for (cpu, kernel, runs) in &self.groups {
            out.push_str(&format!("  {cpu}, {kernel}: {}\n", runs.join(", ")));
        }
        out
    }
}

/// `lab compare` of a class: print the table, say which runs were left
/// out, and write `class.md` and `class.json` into `into`.
pub fn main(list: &[PathBuf], into: Option<&Path>) -> Result<()> {
    let class = compare(list)?;
    for (run, why) in &class.left_out {
        eprintln!("lab: left out {run}: {why}");
    }
    for (copy, of) in &class.duplicates {
        eprintln!("lab: {copy} is a copy of {of}: counted once");
    }
    labkit::error::print(&class.text())?;
    match into {
        Some(dir) => {
            crate::results::check_writable(dir, "")?;
            let mut json = serde_json::to_string_pretty(&class).map_err(|e| {
                Error::failed(format!("cannot encode the comparison: {e}"))
            })?;
            json.push('\n');
            let files = [
                ("class.md".to_string(), class.markdown()),
                ("class.json".into(), json),
            ];
            crate::results::write_all(dir, &files)?;
            eprintln!(
                "lab: class comparison written to {}",
                dir.join("class.md").display()
            );
        }
        None => eprintln!(
            "lab: class comparison not saved: give --out DIR, or a folder of runs"
        ),
    }
    Ok(())
}
