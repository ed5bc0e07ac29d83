//! `lab compare` of a class: three or more runs, or a folder of runs (a
//! teacher's collection of each student's run folder), side by side. Per
//! claim, how many runs hold, no longer hold, depend or are too close to
//! call; the figure's median and range across the runs; and the runs
//! grouped by CPU model and kernel.
//!
//! A class's runs come from many machines and maybe several versions of
//! the lab, so each results file is read as plain JSON first: a file that
//! does not parse (a truncated copy) leaves its run out, named in one line;
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
use crate::report::Figure;
use crate::runs;

/// One run of the class, as read.
#[derive(Debug, Serialize)]
pub struct Member {
    pub run: String,
    pub cpu_model: String,
    pub kernel: String,
    /// Fields of today's figures that this run's figures lack (a run made
    /// by another version of the lab), each once.
    pub lacks: Vec<String>,
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
}

#[derive(Debug, Serialize)]
pub struct Class {
    pub members: Vec<Member>,
    /// Runs left out, and why (one line each).
    pub left_out: Vec<(String, String)>,
    /// (CPU model, kernel) -> the runs made on it.
    pub groups: Vec<(String, String, Vec<String>)>,
    pub claims: Vec<ClaimRow>,
}

/// The fields every figure has today.
const FIGURE_FIELDS: [&str; 8] =
    ["label", "value", "unit", "interval", "rounds", "method", "resamples", "seed"];

/// The results files of run `run` as JSON, by folder; an error (one line)
/// names the first that does not parse.
fn read_run(run: &Path) -> std::result::Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for folder in runs::experiments_in(run) {
        let experiment = folder.split('/').next().unwrap_or(&folder).to_string();
        let path = run.join(&folder).join(format!("{experiment}.json"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
        out.push((folder, json));
    }
    Ok(out)
}

/// What one run says of `claim`: the verdict as a word or two, the value
/// (if any) and the fields its figure lacks.
fn judge(
    claim: &Claim,
    files: &[(String, Value)],
) -> (String, Option<(f64, String)>, Vec<String>) {
    let Some((experiment, key)) = claim.figure_ref() else {
        return (
            Verdict::CannotRerun(String::new()).word().into(),
            None,
            Vec::new(),
        );
    };
    let of: Vec<&(String, Value)> = files
        .iter()
        .filter(|(folder, _)| folder.split('/').next() == Some(experiment))
        .collect();
    let one_cpu = |j: &Value| j["settings"]["cpu_count"].as_u64() == Some(1);
    let pick = if claim.one_cpu {
        of.iter().find(|(_, j)| one_cpu(j)).or(of.first())
    } else {
        of.first()
    };
    let Some((_, json)) = pick else {
        return (
            Verdict::NotMeasured(String::new()).word().into(),
            None,
            Vec::new(),
        );
    };
    let raw = &json["headline"][key];
    if raw.is_null() {
        return (
            Verdict::NotMeasured(String::new()).word().into(),
            None,
            Vec::new(),
        );
    }
    let unit = raw["unit"].as_str().unwrap_or("").to_string();
    match serde_json::from_value::<Figure>(raw.clone()) {
        Ok(f) if f.check().is_ok() => {
            let verdict = claim.verdict_on(&f, experiment).word().to_string();
            (verdict, Some((f.value, unit)), Vec::new())
        }
        _ => {
            let lacks: Vec<String> = FIGURE_FIELDS
                .iter()
                .filter(|f| raw.get(**f).is_none())
                .map(|f| f.to_string())
                .collect();
            match raw["value"].as_f64() {
                // Another version's figure: its value, but no verdict.
                Some(v) => {
                    ("not judged (older figure)".into(), Some((v, unit)), lacks)
                }
                None => ("not judged (older figure)".into(), None, lacks),
            }
        }
    }
}

/// The runs `dir` holds, sorted: its sub-folders that are lab runs, and
/// those that cannot be read (to be named and left out), when at least one
/// is a run; none when no sub-folder is known to be a run (`/`, whose
/// folders an ordinary user cannot all read, is no folder of runs).
pub fn runs_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir.display(), e))?;
    let judged: Vec<(PathBuf, Option<bool>)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .map(|p| {
            let run = runs::is_run(&p).ok();
            (p, run)
        })
        .collect();
    if !judged.iter().any(|(_, run)| *run == Some(true)) {
        return Ok(Vec::new());
    }
    let mut found: Vec<PathBuf> = judged
        .into_iter()
        .filter(|(_, run)| *run != Some(false))
        .map(|(p, _)| p)
        .collect();
    found.sort();
    Ok(found)
}

/// Compare the class `runs`.
pub fn compare(list: &[PathBuf]) -> Result<Class> {
    let mut members = Vec::new();
    let mut left_out = Vec::new();
    let mut read = Vec::new();
    for run in list {
        let name = run.display().to_string();
        match read_run(run) {
            Ok(files) if files.is_empty() => {
                left_out.push((name, "no results in it".into()));
            }
            Ok(files) => read.push((name, files)),
            Err(why) => left_out.push((name, why)),
        }
    }
    let mut rows = Vec::new();
    let mut lacks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut compared: BTreeMap<String, bool> = BTreeMap::new();
    for claim in claims::all().into_iter().filter(|c| c.cannot.is_none()) {
        let mut verdicts = BTreeMap::new();
        let mut values = Vec::new();
        let mut unit = String::new();
        for (name, files) in &read {
            let (verdict, value, missing) = judge(&claim, files);
            *verdicts.entry(verdict).or_insert(0) += 1;
            if let Some((v, u)) = value {
                values.push(v);
                unit = u;
                compared.insert(name.clone(), true);
            }
            let l = lacks.entry(name.clone()).or_default();
            for m in missing {
                if !l.contains(&m) {
                    l.push(m);
                }
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
        });
    }
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (name, files) in read {
        if !compared.contains_key(&name) {
            left_out.push((
                name,
                "none of its figures can be compared (another version of the lab?)"
                    .into(),
            ));
            continue;
        }
        let machine = &files[0].1["machine"];
        let cpu = machine["cpu_model"].as_str().unwrap_or("unknown CPU").to_string();
        let kernel =
            machine["kernel"].as_str().unwrap_or("unknown kernel").to_string();
        groups.entry((cpu.clone(), kernel.clone())).or_default().push(name.clone());
        members.push(Member {
            lacks: lacks.remove(&name).unwrap_or_default(),
            run: name,
            cpu_model: cpu,
            kernel,
        });
    }
    if members.is_empty() {
        let why: Vec<String> =
            left_out.iter().map(|(r, w)| format!("{r}: {w}")).collect();
        return Err(Error::failed(format!(
            "no run can be compared ({})",
            why.join("; ")
        )));
    }
    Ok(Class {
        members,
        left_out,
        groups: groups.into_iter().map(|((c, k), r)| (c, k, r)).collect(),
        claims: rows,
    })
}

const ORDER: [&str; 7] = [
    "holds",
    "no longer holds",
    "depends",
    "too close to call",
    "not yet measured",
    "not judged (older figure)",
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

impl Class {
    pub fn markdown(&self) -> String {
        let mut md = format!("# A class of {} runs\n\n", self.members.len());
        for (run, why) in &self.left_out {
            md.push_str(&format!("Left out: `{run}`: {why}.\n\n"));
        }
        md.push_str(
            "| claim | verdicts | figure: median (range, runs) |\n|---|---|---|\n",
        );
        for r in &self.claims {
            md.push_str(&format!(
                "| {} | {} | {} |\n",
                r.id,
                r.counts(),
                r.spread()
            ));
        }
        md.push_str("\n## The machines\n\n| CPU | kernel | runs |\n|---|---|---|\n");
        for (cpu, kernel, runs) in &self.groups {
            md.push_str(&format!("| {cpu} | {kernel} | {} |\n", runs.join(", ")));
        }
        for m in self.members.iter().filter(|m| !m.lacks.is_empty()) {
            md.push_str(&format!(
                "\n`{}` was made by another version of the lab: its figures lack {}, so it \
                 gives values but no verdicts.\n",
                m.run,
                m.lacks.join(", ")
            ));
        }
        md
    }

    pub fn text(&self) -> String {
        let mut out = format!("A class of {} runs\n", self.members.len());
        for r in &self.claims {
            out.push_str(&format!(
                "\n{}\n  verdicts: {}\n  figure:   {}\n",
                r.id,
                r.counts(),
                r.spread()
            ));
        }
        out.push_str("\nThe machines\n");
        for (cpu, kernel, runs) in &self.groups {
            out.push_str(&format!("  {cpu}, {kernel}: {}\n", runs.join(", ")));
        }
        for m in self.members.iter().filter(|m| !m.lacks.is_empty()) {
            out.push_str(&format!(
                "  {} lacks {} (another version of the lab)\n",
                m.run,
                m.lacks.join(", ")
            ));
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
    labkit::error::print(&class.text())?;
    match into {
        Some(dir) => {
            crate::results::check_writable(dir)?;
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
