//! The then-and-now table: every claim of the articles (`claims.toml`),
//! judged on a run's results.
//!
//! A claim's rule reads one headline figure of one experiment (see
//! [`crate::report::Figure`]) and puts it in a range: *holds*, *depends on*
//! (what), or *no longer holds*. Claims the lab cannot re-run say why.

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
    pub depends: Option<[f64; 2]>,
    pub depends_on: Option<String>,
}

/// Every claim, in the file's order.
pub fn all() -> Vec<Claim> {
    let file: File =
        toml::from_str(include_str!("../claims.toml")).expect("claims.toml parses");
    file.claim
}

/// What a rule says of today's figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", content = "why", rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    NoLongerHolds,
    DependsOn(String),
    NotMeasured(String),
    CannotRerun(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Holds => f.write_str("holds"),
            Verdict::NoLongerHolds => f.write_str("no longer holds"),
            Verdict::DependsOn(what) => write!(f, "depends on {what}"),
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

    /// The verdict for `value`, today's figure.
    pub fn judge(&self, value: f64) -> Verdict {
        let within = |r: Option<[f64; 2]>| {
            r.is_some_and(|[lo, hi]| lo <= value && value <= hi)
        };
        if within(self.holds) {
            Verdict::Holds
        } else if within(self.depends) {
            Verdict::DependsOn(self.depends_on.clone().unwrap_or_default())
        } else {
            Verdict::NoLongerHolds
        }
    }
}

/// One row of the then-and-now table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub claim: Claim,
    /// Today's figure, its unit and what it is.
    pub today: Option<f64>,
    pub unit: String,
    pub label: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// "1 CPU", "2 CPUs": what the figure was measured on.
    pub judged_on: String,
    /// The folder of the results it was read from, inside the run.
    pub results: String,
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

/// Judge every claim on the results in run folder `run`.
pub fn evaluate(run: &Path) -> Result<Vec<Row>> {
    all().into_iter().map(|c| evaluate_one(c, run)).collect()
}

fn evaluate_one(claim: Claim, run: &Path) -> Result<Row> {
    let row = |claim, verdict, judged_on: &str| Row {
        claim,
        today: None,
        unit: String::new(),
        label: String::new(),
        verdict,
        judged_on: judged_on.into(),
        results: String::new(),
    };
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
    let found = candidates(run, experiment)?;
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
    let Some(figure) = published.figure(key) else {
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
    Ok(Row {
        verdict: claim.judge(figure.value),
        today: Some(figure.value),
        unit: figure.unit,
        label: figure.label,
        judged_on,
        results: folder.clone(),
        claim,
    })
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

/// The table as Markdown, citations linked to the References page.
pub fn markdown(rows: &[Row], run: &str) -> String {
    let mut md =
        String::from("| claim | then | today | verdict |\n|---|---|---|---|\n");
    for r in rows {
        let today = match r.today {
            Some(v) => format!(
                "{} ({}; {}, `{}`)",
                show(v, &r.unit),
                r.label,
                r.judged_on,
                r.results
            ),
            None => "-".into(),
        };
        md.push_str(&format!(
            "| {} ([{}](references.md#{})) | {} | {} | **{}** |\n",
            cell(&r.claim.claim),
            r.claim.source,
            r.claim.source,
            cell(&format!("{} ({})", r.claim.then, r.claim.setting)),
            cell(&today),
            cell(&r.verdict.to_string()),
        ));
    }
    md.push_str(&format!(
        "\nJudged by the rules in `claims.toml` on the run `{run}`. \"1 CPU\": the \
         figure comes from a run confined with `--cpus`, as the articles ran.\n"
    ));
    md
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The table as plain text for the terminal.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::from("Then and now: the articles' claims on this run\n\n");
    for r in rows {
        out.push_str(&format!("{:<24} {}\n", r.claim.id, r.verdict));
        out.push_str(&format!(
            "    claim: {} [{}]\n",
            r.claim.claim, r.claim.source
        ));
        out.push_str(&format!("    then:  {}\n", r.claim.then));
        if let Some(v) = r.today {
            out.push_str(&format!(
                "    today: {} ({}; {})\n",
                show(v, &r.unit),
                r.label,
                r.judged_on
            ));
        }
    }
    out
}

/// Write `then-and-now.md` and `.json` into run folder `run`.
pub fn write(run: &Path) -> Result<Vec<Row>> {
    let rows = evaluate(run)?;
    let name =
        run.file_name().map_or("?".into(), |n| n.to_string_lossy().into_owned());
    crate::results::write_file(
        &run.join("then-and-now.md"),
        &markdown(&rows, &name),
    )?;
    crate::results::write_json(&run.join("then-and-now.json"), &rows)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Each rule, on a figure inside its range and on one outside both.
    #[test]
    fn every_rule_holds_inside_its_range_and_fails_outside() {
        for c in all().iter().filter(|c| c.cannot.is_none()) {
            let [lo, hi] = c.holds.unwrap();
            let inside =
                if hi.is_finite() { (lo + hi) / 2.0 } else { lo * 2.0 + 1.0 };
            assert_eq!(c.judge(inside), Verdict::Holds, "{} at {inside}", c.id);
            let mut edges = vec![lo, hi];
            edges.extend(c.depends.iter().flatten());
            // Just past each edge, and the ends of the scale.
            let mut probes = vec![0.0, 1e12];
            for e in edges.iter().filter(|e| e.is_finite()) {
                let step = (e.abs() * 0.01).max(1e-3);
                probes.extend([e - step, e + step]);
            }
            let outside: Vec<f64> = probes
                .into_iter()
                .filter(|v| *v >= 0.0 && !(lo <= *v && *v <= hi))
                .filter(|v| !c.depends.is_some_and(|[a, b]| a <= *v && *v <= b))
                .collect();
            if let Some([a, b]) = c.depends {
                let mid = if b.is_finite() { (a + b) / 2.0 } else { a + 1.0 };
                if !(lo <= mid && mid <= hi) {
                    assert!(
                        matches!(c.judge(mid), Verdict::DependsOn(_)),
                        "{} at {mid}",
                        c.id
                    );
                }
            }
            // A rule whose ranges cover every figure from 0 up cannot fail;
            // only "ten-or-a-hundred" is built so (it answers holds or
            // depends), and it says why.
            if outside.is_empty() {
                assert_eq!(c.id, "ten-or-a-hundred", "{} can never fail", c.id);
                continue;
            }
            for v in outside {
                assert_eq!(c.judge(v), Verdict::NoLongerHolds, "{} at {v}", c.id);
            }
        }
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
