//! The measurement engine: an experiment says what it compares, at each
//! setting of its factors, and the engine measures it, the same way for
//! every experiment.
//!
//! - **Order.** Each round runs every condition once. Round `k` takes
//!   them rotated by `k / 2`, and every odd round in the reverse of the
//!   round before ([`order`]): for two conditions ABBA, for more a
//!   reversed rotation. Over any even number of rounds each pair of
//!   conditions goes in each order equally often, and each condition's
//!   mean place in the round is the middle; over `2n` rounds each goes
//!   first equally often. So the rounds are made even
//!   ([`balanced_rounds`]): slow drift (the clock, the caches, another
//!   tenant) favours none of them, whatever their number.
//! - **Warm-up.** The first time a condition runs in an experiment it
//!   runs once more, first: that run faults in the program's pages and the
//!   runner's, fills the page cache and wakes the CPU's clock. It is
//!   discarded from every figure, and kept in the observations, marked.
//! - **Best of k.** Where a figure compares runs made at different times
//!   (a slope across a grid's settings), a stretch in which the whole
//!   machine runs slower (another tenant of the host: it slows a program
//!   on one CPU and a spinning loop on the other together) would bend one
//!   round's figure. An experiment may then ask for each run to be made
//!   `k` times in a round, in `k` passes over the grid, so that the
//!   repeats of a run are a whole pass apart, and keep the least of a
//!   metric (lmbench's rule: the undisturbed cost is the least one seen).
//!   The others stay in the observations, marked `beaten`, and no figure
//!   uses them ([`Engine::best_of`]).
//! - **Placement.** A two-party measurement (two threads through a pipe, a
//!   ping-pong) runs once per [`Placement`], each its own series: both
//!   parties on one CPU, and one on each of two CPUs, pinned; unpinned
//!   only as "what you get by default", whose rounds may fall in separate
//!   clusters ([`clusters`]).
//! - **Observations.** Every run of a condition is one row of one long
//!   table ([`Observation`]): its setting (the factors' values, placement
//!   included), the condition, its round (none for a warm-up), its place
//!   in the round's order and its metrics. The results file keeps the
//!   table, so that every figure can be derived again from what was
//!   measured ([`Observations`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::stats::{self, Summary};

/// The factors' values at one setting, by name: `{"procs": 255, "count":
/// 1000}`. A placement is a factor like any other (`"placement":
/// "one-cpu"`).
pub type Setting = BTreeMap<String, Value>;

/// A setting from `(factor, value)` pairs.
pub fn setting<const N: usize>(factors: [(&str, Value); N]) -> Setting {
    factors.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// One run of one condition, as the engine saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Observation {
    pub setting: Setting,
    /// The condition: `fork`, `thread.c`, ...
    pub condition: String,
    /// Its round, from 1; `None` for a warm-up run, which no figure uses.
    pub round: Option<usize>,
    /// Its place in its round's order, from 0.
    pub position: usize,
    /// What the run yielded, by name: `wall_s`, `user_s`, ...
    pub metrics: BTreeMap<String, f64>,
    /// In a round measured best of k ([`Engine::best_of`]), another run of
    /// the same condition at the same setting gave less: kept, and no
    /// figure uses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beaten: bool,
}

impl Observation {
    /// `t`'s run of `condition` at `setting` as the engine records it: in
    /// round `round` (`None`: a warm-up), `position`th in its round. The
    /// engine's own record, and the tests' way to make observations.
    pub fn of<T: Observed + ?Sized>(
        setting: &Setting,
        condition: &str,
        round: Option<usize>,
        position: usize,
        t: &T,
    ) -> Observation {
        let metrics = t.metrics().into_iter().map(|(k, v)| (k.to_string(), v));
        Observation {
            setting: setting.clone(),
            condition: condition.to_string(),
            round,
            position,
            metrics: metrics.collect(),
            beaten: false,
        }
    }

    /// A test's observations: `runs` of `condition` at `at`, one a round,
    /// from round 1, each first in its round.
    #[cfg(test)]
    pub fn rounds<T: Observed>(
        at: &Setting,
        condition: &str,
        runs: &[T],
    ) -> Vec<Observation> {
        let each = |(k, r)| Observation::of(at, condition, Some(k + 1), 0, r);
        runs.iter().enumerate().map(each).collect()
    }
}

/// What a run of a condition yields, as named numbers.
pub trait Observed {
    fn metrics(&self) -> Vec<(&'static str, f64)>;
}

impl Observed for labkit::measure::Usage {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("wall_s", self.wall_s),
            ("user_s", self.user_s),
            ("sys_s", self.sys_s),
            ("cpu_s", self.user_s + self.sys_s),
            ("max_rss_kib", self.max_rss_kib as f64),
            ("voluntary_switches", self.voluntary_switches as f64),
            ("involuntary_switches", self.involuntary_switches as f64),
        ]
    }
}

impl Observed for f64 {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![("value", *self)]
    }
}

/// A run of one of several kinds of condition at one setting (a program
/// and its C twin, or a yardstick tool, each with a report of its own).
impl Observed for Box<dyn Observed> {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        (**self).metrics()
    }
}

/// A program's own report and what its run cost, timed from outside
/// ([`crate::bins::run_json`]): the metrics of both.
impl<A: Observed, B: Observed> Observed for (A, B) {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        let mut m = self.0.metrics();
        m.extend(self.1.metrics());
        m
    }
}

/// Named figures as they are: a test's hand-made run.
#[cfg(test)]
impl Observed for Vec<(&'static str, f64)> {
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        self.clone()
    }
}

/// The rounds that balance the order of `conditions` ([`order`]): even,
/// `rounds` rounded up, when there are two or more.
pub fn balanced_rounds(rounds: usize, conditions: usize) -> usize {
    if conditions <= 1 { rounds } else { rounds + rounds % 2 }
}

/// The order in which `n` conditions run in round `round` (from 0): the
/// conditions rotated by `round / 2`, reversed in odd rounds. Two
/// conditions: AB, BA, BA, AB, AB, BA (ABBA); three: ABC, CBA, BCA, ACB,
/// CAB, BAC.
pub fn order(n: usize, round: usize) -> Vec<usize> {
    let rotated = (0..n).map(|k| (k + round / 2) % n.max(1));
    if round % 2 == 0 { rotated.collect() } else { rotated.rev().collect() }
}

/// One experiment's measurements: the rounds it was asked for, the
/// conditions warmed up so far and every observation.
#[derive(Debug)]
pub struct Engine {
    rounds: usize,
    /// Each run made this many times a round, the least of `best.1` kept.
    best: (usize, &'static str),
    warmed: BTreeSet<String>,
    log: Vec<Observation>,
    bar: Option<indicatif::ProgressBar>,
}

impl Engine {
    /// An engine that runs `rounds` rounds (or more, to balance the order)
    /// of each setting.
    pub fn new(rounds: u32) -> Engine {
        Engine {
            rounds: rounds as usize,
            best: (1, ""),
            warmed: BTreeSet::new(),
            log: Vec::new(),
            bar: None,
        }
    }

    /// The rounds of a setting of `conditions` conditions.
    fn rounds_of(&self, conditions: usize) -> usize {
        balanced_rounds(self.rounds, conditions)
    }

    /// Show progress: `runs` measured runs in all (warm-ups are not
    /// counted), under `name`; a bar already shown (an earlier part of the
    /// experiment) is cleared.
    pub fn progress(&mut self, runs: usize, name: &str) {
        let bar = crate::progress::bar(runs as u64, name);
        if let Some(done) = self.bar.replace(bar) {
            done.finish_and_clear();
        }
    }

    /// From now on, measure `rounds` rounds (or more, to balance the
    /// order): for a setting whose rounds are short and whose figure needs
    /// more of them than the rest.
    pub fn set_rounds(&mut self, rounds: u32) {
        self.rounds = rounds as usize;
    }

    /// From now on, make each run `k` times a round, in `k` passes over
    /// the settings, and keep the run with the least `metric`; the others
    /// are recorded `beaten`. `best_of(1, "")` measures each run once
    /// again.
    pub fn best_of(&mut self, k: usize, metric: &'static str) {
        self.best = (k.max(1), metric);
    }

    /// The measured runs `conditions` conditions take at one setting.
    pub fn runs_for(&self, conditions: usize) -> usize {
        self.runs_at(self.rounds, conditions)
    }

    /// The measured runs `conditions` conditions take at one setting
    /// measured at `rounds` rounds ([`Engine::set_rounds`]).
    pub fn runs_at(&self, rounds: usize, conditions: usize) -> usize {
        balanced_rounds(rounds, conditions) * conditions * self.best.0
    }

    /// Measure `conditions` at `setting`: a warm-up run of each condition
    /// not yet warmed up in this experiment, then the balanced rounds.
    /// `run(k)` runs condition `k` once. The result holds each condition's
    /// runs, in round order. The first error stops the measurement and is
    /// returned. A grid of one setting ([`Engine::measure_grid`]).
    pub fn measure<T: Observed>(
        &mut self,
        setting: &Setting,
        conditions: &[&str],
        mut run: impl FnMut(usize) -> labkit::Result<T>,
    ) -> labkit::Result<Vec<Vec<T>>> {
        let mut runs =
            self.measure_grid(std::slice::from_ref(setting), conditions, |_, k| {
                run(k)
            })?;
        Ok(runs.pop().unwrap_or_default())
    }

    /// Measure `conditions` at every one of `settings` round by round:
    /// each round runs every setting (in the balanced order of
    /// [`order`]), and at each setting every condition (in that order
    /// too), before the next round starts. A figure that compares rounds
    /// of different settings (a slope across them) then compares runs
    /// made seconds apart, so that a stretch in which the whole machine
    /// runs slower falls on one round's points together, not on one
    /// setting's. First a warm-up run, at the first setting, of each
    /// condition not yet warmed up in this experiment. `run(s, k)` runs
    /// condition `k` at setting `s` once. The result holds, for each
    /// setting, each condition's runs in round order (best of k: the
    /// kept one of each round). The first error stops the measurement and
    /// is returned.
    pub fn measure_grid<T: Observed>(
        &mut self,
        settings: &[Setting],
        conditions: &[&str],
        mut run: impl FnMut(usize, usize) -> labkit::Result<T>,
    ) -> labkit::Result<Vec<Vec<Vec<T>>>> {
        let Some(first) = settings.first() else { return Ok(Vec::new()) };
        if let Some(bar) = &self.bar {
            bar.set_message(words(first));
        }
        let cold: Vec<usize> = (0..conditions.len())
            .filter(|k| !self.warmed.contains(conditions[*k]))
            .collect();
        for (position, &k) in cold.iter().enumerate() {
            let t = run(0, k)?;
            self.record(first, conditions[k], None, position, &t);
            self.warmed.insert(conditions[k].to_string());
        }
        let mut runs: Vec<Vec<Vec<T>>> = settings
            .iter()
            .map(|_| conditions.iter().map(|_| Vec::new()).collect())
            .collect();
        let (passes, metric) = self.best;
        for round in 0..self.rounds_of(conditions.len()) {
            // Each pass's run of condition k at setting s, with its row in
            // the log.
            let mut made: Vec<Vec<Vec<(usize, T)>>> = settings
                .iter()
                .map(|_| conditions.iter().map(|_| Vec::new()).collect())
                .collect();
            for _ in 0..passes {
                for s in order(settings.len(), round) {
                    if let Some(bar) = &self.bar {
                        bar.set_message(words(&settings[s]));
                    }
                    for (position, k) in
                        order(conditions.len(), round).into_iter().enumerate()
                    {
                        let t = run(s, k)?;
                        self.record(
                            &settings[s],
                            conditions[k],
                            Some(round + 1),
                            position,
                            &t,
                        );
                        made[s][k].push((self.log.len() - 1, t));
                        if let Some(bar) = &self.bar {
                            bar.inc(1);
                        }
                    }
                }
            }
            for (s, by_condition) in made.into_iter().enumerate() {
                for (k, tries) in by_condition.into_iter().enumerate() {
                    runs[s][k].extend(self.keep_least(tries, metric));
                }
            }
        }
        Ok(runs)
    }

    /// Of one round's tries of a run, the one with the least `metric` (the
    /// first, without it); the others' rows are marked beaten.
    fn keep_least<T: Observed>(
        &mut self,
        tries: Vec<(usize, T)>,
        metric: &str,
    ) -> Option<T> {
        let value = |row: usize| {
            self.log[row].metrics.get(metric).copied().unwrap_or(f64::INFINITY)
        };
        let best = (0..tries.len())
            .min_by(|&a, &b| value(tries[a].0).total_cmp(&value(tries[b].0)))?;
        let mut kept = None;
        for (i, (row, t)) in tries.into_iter().enumerate() {
            if i == best {
                kept = Some(t);
            } else {
                self.log[row].beaten = true;
            }
        }
        kept
    }

    fn record<T: Observed>(
        &mut self,
        setting: &Setting,
        condition: &str,
        round: Option<usize>,
        position: usize,
        t: &T,
    ) {
        self.log.push(Observation::of(setting, condition, round, position, t));
    }

    /// Every observation so far, in the order the runs were made.
    pub fn observations(&self) -> Observations<'_> {
        Observations(&self.log)
    }

    /// Every observation, in the order the runs were made.
    pub fn finish(self) -> Vec<Observation> {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        self.log
    }
}

/// A setting as words, for a progress line: `count=1000 procs=255`.
fn words(setting: &Setting) -> String {
    let word = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    setting
        .iter()
        .map(|(k, v)| format!("{k}={}", word(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The figures of a set of observations: each quantity one value per
/// round, warm-ups left out.
#[derive(Clone, Copy, Debug)]
pub struct Observations<'a>(pub &'a [Observation]);

impl<'a> Observations<'a> {
    /// The observations at settings that have every factor of `at`.
    pub fn at(&self, at: &Setting) -> impl Iterator<Item = &'a Observation> + 'a {
        let at = at.clone();
        self.0.iter().filter(move |o| {
            o.round.is_some()
                && !o.beaten
                && at.iter().all(|(k, v)| o.setting.get(k) == Some(v))
        })
    }

    /// `condition`'s `metric` at `at`, one value per round, in round order;
    /// `None` when it has no round there or a round lacks the metric.
    pub fn rounds(
        &self,
        at: &Setting,
        condition: &str,
        metric: &str,
    ) -> Option<Vec<f64>> {
        let mut found: Vec<(usize, f64)> = self
            .at(at)
            .filter(|o| o.condition == condition)
            .map(|o| Some((o.round?, *o.metrics.get(metric)?)))
            .collect::<Option<_>>()?;
        found.sort_by_key(|(round, _)| *round);
        (!found.is_empty()).then(|| found.into_iter().map(|(_, v)| v).collect())
    }

    /// The summary of [`Observations::rounds`].
    pub fn summary(
        &self,
        at: &Setting,
        condition: &str,
        metric: &str,
    ) -> Option<Summary> {
        Summary::of(&self.rounds(at, condition, metric)?)
    }

    /// Each round's `a / b` of `metric` at `at`, both measured in that
    /// round ([`stats::paired_ratios`]).
    pub fn paired(
        &self,
        at: &Setting,
        a: &str,
        b: &str,
        metric: &str,
    ) -> Option<Vec<f64>> {
        stats::paired_ratios(
            &self.rounds(at, a, metric)?,
            &self.rounds(at, b, metric)?,
        )
    }

    /// Each round's best (largest) `metric` among `conditions` at `at`,
    /// all measured in that round: which of them gave it (its index in
    /// `conditions`) and its value. `None` without conditions, or when one
    /// of them has no rounds there.
    pub fn best(
        &self,
        at: &Setting,
        conditions: &[&str],
        metric: &str,
    ) -> Option<Vec<(usize, f64)>> {
        let rounds: Vec<Vec<f64>> = conditions
            .iter()
            .map(|c| self.rounds(at, c, metric))
            .collect::<Option<_>>()?;
        let n = rounds.iter().map(Vec::len).min()?;
        let best = |k: usize| {
            let i = (0..rounds.len())
                .max_by(|&a, &b| rounds[a][k].total_cmp(&rounds[b][k]));
            i.map(|i| (i, rounds[i][k]))
        };
        (0..n).map(best).collect()
    }

    /// The settings measured, in the order first measured.
    pub fn settings(&self) -> Vec<&'a Setting> {
        let mut seen: Vec<&Setting> = Vec::new();
        for o in self.0 {
            if !seen.contains(&&o.setting) {
                seen.push(&o.setting);
            }
        }
        seen
    }
}

impl Observations<'_> {
    /// The median of [`Observations::rounds`]: the one number a table's
    /// cell, a ratio of medians or a best-of search takes.
    pub fn median(
        &self,
        at: &Setting,
        condition: &str,
        metric: &str,
    ) -> Option<f64> {
        Some(stats::median(&self.rounds(at, condition, metric)?))
    }

    /// The values of the whole-number factor `factor` at the settings that
    /// have every factor of `at` and where `condition` ran, ascending and
    /// each once: the block sizes a program ran at, say.
    pub fn levels(&self, at: &Setting, condition: &str, factor: &str) -> Vec<u64> {
        let here = self.at(at).filter(|o| o.condition == condition);
        let levels: BTreeSet<u64> =
            here.filter_map(|o| o.setting.get(factor)?.as_u64()).collect();
        levels.into_iter().collect()
    }
}

/// One condition at one setting, summed up: each metric's rounds as a
/// [`Summary`] (median, range, and the median's interval). The setting's
/// factors and the metrics are fields of their own, so that a book pointer
/// names a series by them: `/series[count=5000,condition=thread-c]/wall_s/median`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Series {
    #[serde(flatten)]
    pub setting: Setting,
    pub condition: String,
    #[serde(flatten)]
    pub metrics: BTreeMap<String, Summary>,
}

impl Series {
    /// The summary of `metric`; a metric it lacks is an empty summary, whose
    /// cells read as nothing measured.
    pub fn get(&self, metric: &str) -> Option<&Summary> {
        self.metrics.get(metric)
    }
}

impl Observations<'_> {
    /// Every condition at every setting, in the order first measured, with
    /// each metric its rounds have.
    pub fn series(&self) -> Vec<Series> {
        // Each (setting, condition) once, in the order first measured, with
        // its rounds' metrics gathered in one pass over the observations.
        type Rounds = BTreeMap<String, Vec<(usize, f64)>>;
        let mut order: Vec<(&Setting, &str)> = Vec::new();
        let mut found: Vec<Rounds> = Vec::new();
        let mut index: std::collections::HashMap<(String, &str), usize> =
            std::collections::HashMap::new();
        for o in self.0 {
            let Some(round) = o.round.filter(|_| !o.beaten) else { continue };
            let key = (
                serde_json::to_string(&o.setting).unwrap_or_default(),
                o.condition.as_str(),
            );
            let k = *index.entry(key).or_insert_with(|| {
                order.push((&o.setting, o.condition.as_str()));
                found.push(Rounds::new());
                order.len() - 1
            });
            for (m, v) in &o.metrics {
                found[k].entry(m.clone()).or_default().push((round, *v));
            }
        }
        order
            .into_iter()
            .zip(found)
            .map(|((setting, condition), metrics)| Series {
                setting: setting.clone(),
                condition: condition.to_string(),
                metrics: metrics
                    .into_iter()
                    .filter_map(|(m, mut rounds)| {
                        rounds.sort_by_key(|(round, _)| *round);
                        let v: Vec<f64> =
                            rounds.into_iter().map(|(_, v)| v).collect();
                        Some((m, Summary::of(&v)?))
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Two conditions compared at one setting: each round's ratio of one
/// metric, `condition` over `against`, both measured in that round
/// ([`Observations::paired`]), summed up. Named by its factors and the
/// two conditions, so that a book pointer picks it by them:
/// `/vs_c[against=pthreadcreat-c]/ratio/median`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Paired {
    #[serde(flatten)]
    pub setting: Setting,
    pub condition: String,
    pub against: String,
    pub ratio: Summary,
}

impl Observations<'_> {
    /// `condition` over `against` in `metric`, paired round by round, at
    /// every setting where both ran, in the order first measured.
    pub fn pairs(
        &self,
        condition: &str,
        against: &str,
        metric: &str,
    ) -> Vec<Paired> {
        let pair = |at: &Setting| {
            let ratios = self.paired(at, condition, against, metric)?;
            Some(Paired {
                setting: at.clone(),
                condition: condition.into(),
                against: against.into(),
                ratio: Summary::of(&ratios)?,
            })
        };
        self.settings().into_iter().filter_map(pair).collect()
    }
}

/// Where the two parties of a two-party measurement run.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Both on one CPU: every hand-off is a context switch on that CPU.
    OneCpu(usize),
    /// One on each of two CPUs: every hand-off is a wake-up across them.
    TwoCpus(usize, usize),
    /// Where the scheduler puts them: what you get by default, which may
    /// be either of the others from one run to the next.
    Unpinned,
}

impl Placement {
    /// The pinned placements these CPUs allow: one CPU, and two when there
    /// are two (the first two allowed).
    pub fn pinned(allowed: &[usize]) -> Vec<Placement> {
        match allowed {
            [] => Vec::new(),
            [one] => vec![Placement::OneCpu(*one)],
            [a, b, ..] => vec![Placement::OneCpu(*a), Placement::TwoCpus(*a, *b)],
        }
    }

    /// Its name as a factor's value: `one-cpu`, `two-cpus`, `unpinned`.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::OneCpu(_) => "one-cpu",
            Placement::TwoCpus(..) => "two-cpus",
            Placement::Unpinned => "unpinned",
        }
    }

    /// The CPUs of the first party and the second, if pinned.
    pub fn cpus(&self) -> Option<[usize; 2]> {
        match *self {
            Placement::OneCpu(c) => Some([c, c]),
            Placement::TwoCpus(a, b) => Some([a, b]),
            Placement::Unpinned => None,
        }
    }

    /// In words, for a table: "one CPU (0)", "two CPUs (0, 1)", "unpinned".
    pub fn describe(&self) -> String {
        match self {
            Placement::OneCpu(c) => format!("one CPU ({c})"),
            Placement::TwoCpus(a, b) => format!("two CPUs ({a}, {b})"),
            Placement::Unpinned => "unpinned".into(),
        }
    }
}

/// A run of rounds that lie together, apart from the others.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// How far apart, as a ratio, two neighbouring rounds (sorted) must lie to
/// be in separate clusters: twice. Rounds of one placement vary by tens of
/// percent at most; those that ran on one CPU and those that ran on two
/// differ several-fold (a pipe's 864 against 8038 MB/s).
pub const CLUSTER_GAP: f64 = 2.0;

/// The clusters of `rounds`, lowest first: split wherever two neighbours
/// differ by [`CLUSTER_GAP`] times or more, each cluster keeping at least
/// two rounds (one far round alone is an outlier of its neighbours'
/// cluster, not a cluster). One cluster for rounds that lie together;
/// none for no rounds, or rounds that are not all positive (a ratio's gap
/// means nothing there).
pub fn clusters(rounds: &[f64]) -> Vec<Cluster> {
    let mut v: Vec<f64> = rounds.to_vec();
    if v.is_empty() || v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let mut cuts = vec![0];
    for i in 1..v.len() {
        let last = *cuts.last().expect("starts with 0");
        if v[i] / v[i - 1] >= CLUSTER_GAP && i - last >= 2 && v.len() - i >= 2 {
            cuts.push(i);
        }
    }
    cuts.push(v.len());
    cuts.windows(2)
        .map(|w| {
            let part = &v[w[0]..w[1]];
            Cluster {
                n: part.len(),
                median: stats::median(part),
                min: part[0],
                max: part[part.len() - 1],
            }
        })
        .collect()
}

/// A series' rounds in a table's cell: the median with its range, or, when
/// they fall in separate clusters, each cluster's range and count, since
/// one median would describe none of them: `864-1,190 (7) | 7,500-8,038
/// (8)`.
pub fn distribution(rounds: &[f64], digits: usize) -> String {
    let cs = clusters(rounds);
    if cs.len() > 1 {
        let f = |x: f64| format!("{x:.digits$}");
        return cs
            .iter()
            .map(|c| format!("{}-{} ({})", f(c.min), f(c.max), c.n))
            .collect::<Vec<_>>()
            .join(" | ");
    }
    crate::table::range_or_dash(Summary::of(rounds), digits)
}

/// A series' rounds in a table's cell: [`distribution`] where `split` (a
/// two-party measurement left unpinned, whose rounds may fall apart), else
/// the median with its range alone; `-` for no rounds.
pub fn spread(rounds: &[f64], digits: usize, split: bool) -> String {
    if split {
        return distribution(rounds, digits);
    }
    crate::table::range_or_dash(Summary::of(rounds), digits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_condition_warms_up_once_then_goes_first_equally_often() {
        let mut engine = Engine::new(6);
        let mut calls = Vec::new();
        let s1 = setting([("n", json!(1))]);
        let runs = engine
            .measure(&s1, &["a", "b"], |k| {
                calls.push(k);
                Ok(k as f64)
            })
            .unwrap();
        // One warm-up each, then six rounds of two.
        assert_eq!(calls.len(), 2 + 12);
        assert_eq!(runs, vec![vec![0.0; 6], vec![1.0; 6]]);
        // A second setting: warmed already, no warm-up.
        let s2 = setting([("n", json!(2))]);
        engine.measure(&s2, &["a", "b", "c"], |k| Ok(k as f64)).unwrap();
        // Five rounds asked, seventeen conditions: six, not seventeen.
        let mut five = Engine::new(5);
        let names: Vec<String> = (0..17).map(|k| format!("c{k}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let runs = five.measure(&s1, &names, |k| Ok(k as f64)).unwrap();
        assert_eq!(runs[0].len(), 6);
        let log = engine.finish();
        assert_eq!(log.len(), 2 + 12 + 1 + 18);
        let warm: Vec<_> = log.iter().filter(|o| o.round.is_none()).collect();
        assert_eq!(
            warm.iter().map(|o| o.condition.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        // Two conditions in six rounds: ABBAAB, each first three times.
        let firsts: Vec<&str> = log
            .iter()
            .filter(|o| o.setting == s1 && o.round.is_some() && o.position == 0)
            .map(|o| o.condition.as_str())
            .collect();
        assert_eq!(firsts, ["a", "b", "b", "a", "a", "b"]);
        assert_eq!(log[2].metrics, BTreeMap::from([("value".to_string(), 0.0)]));
    }

    #[test]
    fn a_grid_runs_every_setting_in_each_round_before_the_next() {
        let mut engine = Engine::new(4);
        let settings: Vec<Setting> =
            (1..=3).map(|n| setting([("n", json!(n))])).collect();
        let mut calls = Vec::new();
        let runs = engine
            .measure_grid(&settings, &["a", "b"], |s, k| {
                calls.push((s, k));
                Ok((10 * s + k) as f64)
            })
            .unwrap();
        // One warm-up each, at the first setting; then four rounds of
        // three settings of two conditions.
        assert_eq!(calls[..2], [(0, 0), (0, 1)]);
        assert_eq!(calls.len(), 2 + 4 * 3 * 2);
        // The runs come back by setting and condition, warm-ups left out.
        let expected: Vec<Vec<Vec<f64>>> = (0..3)
            .map(|s| (0..2).map(|k| vec![(10 * s + k) as f64; 4]).collect())
            .collect();
        assert_eq!(runs, expected);
        let log = engine.finish();
        let measured: Vec<_> = log.iter().filter(|o| o.round.is_some()).collect();
        // Every round holds all six cells, and no round starts before the
        // one before it ends.
        for (i, chunk) in measured.chunks(6).enumerate() {
            assert!(chunk.iter().all(|o| o.round == Some(i + 1)), "{chunk:?}");
            let mut cells: Vec<_> = chunk
                .iter()
                .map(|o| (o.setting["n"].clone(), &o.condition))
                .collect();
            cells.sort_by_key(|c| c.0.to_string());
            cells.dedup();
            assert_eq!(cells.len(), 6);
        }
        // Each observation is filed under its own setting.
        for o in &measured {
            let n = o.setting["n"].as_u64().unwrap() as f64;
            let k = if o.condition == "a" { 0.0 } else { 1.0 };
            assert_eq!(o.metrics["value"], 10.0 * (n - 1.0) + k);
        }
        // The settings take turns in the engine's order too: ABC, CBA,
        // BCA, ACB.
        let firsts: Vec<_> =
            measured.chunks(6).map(|c| c[0].setting["n"].clone()).collect();
        assert_eq!(firsts, [json!(1), json!(3), json!(2), json!(1)]);
    }

    #[test]
    fn measuring_one_setting_is_a_grid_of_one() {
        let at = setting([("n", json!(1))]);
        let run = |log: &mut Vec<usize>, k: usize| {
            log.push(k);
            Ok(k as f64)
        };
        let (mut one, mut grid) = (Engine::new(3), Engine::new(3));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let runs = one.measure(&at, &["x", "y", "z"], |k| run(&mut a, k)).unwrap();
        let grid_runs = grid
            .measure_grid(std::slice::from_ref(&at), &["x", "y", "z"], |_, k| {
                run(&mut b, k)
            })
            .unwrap();
        assert_eq!(a, b, "the same runs in the same order");
        assert_eq!(one.finish(), grid.finish(), "the same observations");
        assert_eq!(vec![runs], grid_runs);
    }

    #[test]
    fn a_setting_may_take_more_rounds_than_the_rest() {
        let (a, b) = (setting([("n", json!(1))]), setting([("n", json!(2))]));
        let mut engine = Engine::new(2);
        engine.measure(&a, &["x", "y"], |k| Ok(k as f64)).unwrap();
        engine.set_rounds(5);
        assert_eq!(engine.runs_for(2), 6 * 2, "five made even");
        assert_eq!(engine.runs_at(3, 2), engine.runs_for(2) - 2 * 2);
        let runs = engine.measure(&b, &["x", "y"], |k| Ok(k as f64)).unwrap();
        assert_eq!(runs[0].len(), 6);
        let obs = engine.observations();
        assert_eq!(obs.rounds(&a, "x", "value").unwrap().len(), 2);
        assert_eq!(obs.rounds(&b, "y", "value").unwrap().len(), 6);
    }

    #[test]
    fn best_of_two_keeps_the_least_run_of_each_round_and_marks_the_other() {
        let grid = [setting([("n", json!(1))]), setting([("n", json!(2))])];
        let mut engine = Engine::new(2);
        engine.best_of(2, "value");
        assert_eq!(engine.runs_for(2), 2 * 2 * 2);
        // Each call's (setting, condition); its value: the call's number,
        // less 100 in every third call, so that either pass may win.
        let mut calls: Vec<(usize, usize)> = Vec::new();
        let runs = engine
            .measure_grid(&grid, &["a", "b"], |s, k| {
                calls.push((s, k));
                let i = calls.len() as f64;
                Ok(if calls.len() % 3 == 0 { i - 100.0 } else { i })
            })
            .unwrap();
        // Two warm-ups, then per round two passes of 2 settings x 2.
        assert_eq!(calls.len(), 2 + 2 * 2 * 4);
        // A pass repeats its round's order, so a run's two tries are a
        // whole pass (four runs) apart.
        for round in 0..2 {
            let first = 2 + round * 8;
            assert_eq!(calls[first..first + 4], calls[first + 4..first + 8]);
        }
        let value = |call: usize| {
            let i = call as f64 + 1.0;
            if (call + 1) % 3 == 0 { i - 100.0 } else { i }
        };
        let log = engine.finish();
        let obs = Observations(&log);
        for (s, at) in grid.iter().enumerate() {
            for (k, name) in ["a", "b"].iter().enumerate() {
                let mut least = Vec::new();
                for round in 0..2 {
                    let tries: Vec<f64> = (2 + round * 8..2 + round * 8 + 8)
                        .filter(|&c| calls[c] == (s, k))
                        .map(value)
                        .collect();
                    assert_eq!(tries.len(), 2);
                    least.push(tries[0].min(tries[1]));
                }
                assert_eq!(runs[s][k], least, "{s} {name}");
                assert_eq!(obs.rounds(at, name, "value"), Some(least.clone()));
                let series = obs.series();
                let one = series
                    .iter()
                    .find(|x| x.setting == *at && x.condition == *name)
                    .unwrap();
                assert_eq!(one.get("value").unwrap().n, 2, "beaten runs left out");
            }
        }
        // Every try is kept: the beaten ones marked, one per kept run.
        let measured: Vec<&Observation> =
            log.iter().filter(|o| o.round.is_some()).collect();
        assert_eq!(measured.len(), 16);
        assert_eq!(measured.iter().filter(|o| o.beaten).count(), 8);
        // Marked in the JSON only where beaten; older rows read unbeaten.
        let json = serde_json::to_value(&log).unwrap();
        let marked = json.as_array().unwrap().iter();
        assert_eq!(marked.filter(|o| o.get("beaten").is_some()).count(), 8);
        let mut old = serde_json::to_value(&log[2]).unwrap();
        old.as_object_mut().unwrap().remove("beaten");
        let read: Observation = serde_json::from_value(old).unwrap();
        assert!(!read.beaten);
    }

    #[test]
    fn every_even_number_of_rounds_balances_every_pair_and_place() {
        for n in 2..=9 {
            for rounds in (2..=2 * n).step_by(2) {
                let orders: Vec<Vec<usize>> =
                    (0..rounds).map(|r| order(n, r)).collect();
                for o in &orders {
                    let mut sorted = o.clone();
                    sorted.sort();
                    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{n}: {o:?}");
                }
                // Each condition's places sum to the middle's, each round
                // pair mirroring the other.
                for c in 0..n {
                    let places: usize = orders
                        .iter()
                        .map(|o| o.iter().position(|k| *k == c).unwrap())
                        .sum();
                    assert_eq!(2 * places, rounds * (n - 1), "{n} {rounds}: {c}");
                }
                // Each pair goes in each order equally often.
                for a in 0..n {
                    for b in a + 1..n {
                        let before = orders
                            .iter()
                            .filter(|o| {
                                o.iter().position(|k| *k == a)
                                    < o.iter().position(|k| *k == b)
                            })
                            .count();
                        assert_eq!(2 * before, rounds, "{n} {rounds}: {a} {b}");
                    }
                }
            }
            // Over 2n rounds each goes first equally often.
            let mut first = vec![0; n];
            for r in 0..2 * n {
                first[order(n, r)[0]] += 1;
            }
            assert!(first.iter().all(|f| *f == 2), "{n}: {first:?}");
        }
        assert_eq!(balanced_rounds(5, 2), 6);
        assert_eq!(balanced_rounds(6, 17), 6);
        assert_eq!(balanced_rounds(3, 1), 3);
    }

    #[test]
    fn figures_come_from_the_observations_round_by_round() {
        let mut engine = Engine::new(2);
        let at = setting([("n", json!(1)), ("placement", json!("one-cpu"))]);
        let mut t = 0.0;
        engine
            .measure(&at, &["a", "b"], |k| {
                t += 1.0;
                Ok(if k == 0 { 2.0 * t } else { t })
            })
            .unwrap();
        let obs = engine.observations();
        // Warm-ups a=2 (t=1), b=2; round 1: a=6, b=4; round 2: b=5, a=12.
        assert_eq!(obs.rounds(&at, "a", "value"), Some(vec![6.0, 12.0]));
        assert_eq!(obs.rounds(&at, "b", "value"), Some(vec![4.0, 5.0]));
        assert_eq!(obs.paired(&at, "a", "b", "value"), Some(vec![1.5, 2.4]));
        let one = setting([("placement", json!("one-cpu"))]);
        assert_eq!(obs.summary(&one, "a", "value").unwrap().median, 9.0);
        assert_eq!(obs.median(&one, "a", "value"), Some(9.0));
        assert_eq!(obs.median(&at, "c", "value"), None);
        assert_eq!(obs.levels(&one, "b", "n"), [1]);
        assert!(obs.levels(&one, "c", "n").is_empty());
        assert_eq!(obs.rounds(&at, "c", "value"), None);
        assert_eq!(obs.rounds(&at, "a", "wall_s"), None);
        assert_eq!(obs.settings(), vec![&at]);
        // Each round's best of the two, and which: a both times.
        assert_eq!(
            obs.best(&at, &["b", "a"], "value"),
            Some(vec![(1, 6.0), (1, 12.0)])
        );
        assert_eq!(obs.best(&at, &["a", "c"], "value"), None);
        assert_eq!(obs.best(&at, &[], "value"), None);
        let series = obs.series();
        assert_eq!(series.len(), 2);
        assert_eq!(
            (series[0].condition.as_str(), series[1].condition.as_str()),
            ("a", "b")
        );
        assert_eq!(series[1].get("value").unwrap().median, 4.5);
        // Its JSON names it by its factors: a book pointer picks by them.
        let json = serde_json::to_value(&series[0]).unwrap();
        assert_eq!(json["placement"], "one-cpu");
        assert_eq!(json["value"]["median"], 9.0);
        // a over b, paired per round, named by its setting and both.
        let pairs = obs.pairs("a", "b", "value");
        assert_eq!(pairs.len(), 1);
        assert_eq!((pairs[0].ratio.min, pairs[0].ratio.max), (1.5, 2.4));
        let json = serde_json::to_value(&pairs[0]).unwrap();
        assert_eq!((&json["n"], &json["against"]), (&json!(1), &json!("b")));
        assert!(obs.pairs("a", "c", "value").is_empty());
    }

    #[test]
    fn an_error_stops_the_measurement() {
        let mut engine = Engine::new(3);
        let mut n = 0;
        let r = engine.measure(&Setting::new(), &["a", "b"], |_| {
            n += 1;
            if n == 4 { Err(labkit::Error::failed("boom")) } else { Ok(1.0) }
        });
        assert!(r.is_err());
        assert_eq!(engine.finish().len(), 3);
    }

    #[test]
    fn pinned_placements_follow_the_cpus_allowed() {
        assert_eq!(
            Placement::pinned(&[0, 1, 2]),
            [Placement::OneCpu(0), Placement::TwoCpus(0, 1)]
        );
        assert_eq!(Placement::pinned(&[3]), [Placement::OneCpu(3)]);
        assert_eq!(Placement::TwoCpus(0, 1).cpus(), Some([0, 1]));
        assert_eq!(Placement::Unpinned.name(), "unpinned");
    }

    /// `n` rounds around `center`, spread by up to ±`spread` (a fraction),
    /// from a fixed generator.
    fn around(
        rng: &mut stats::SplitMix64,
        center: f64,
        spread: f64,
        n: usize,
    ) -> Vec<f64> {
        (0..n).map(|_| center * (1.0 + spread * (2.0 * rng.unit() - 1.0))).collect()
    }

    #[test]
    fn rounds_of_two_placements_fall_in_two_clusters_and_one_placement_in_one() {
        let mut rng = stats::SplitMix64(7);
        for _ in 0..1000 {
            // Unpinned pipe rounds: some on one CPU (about 900 MB/s), some
            // on two (about 7,800), in any order.
            let mut mixed = around(&mut rng, 900.0, 0.3, 7);
            mixed.extend(around(&mut rng, 7800.0, 0.1, 8));
            let cs = clusters(&mixed);
            assert_eq!(cs.len(), 2, "{mixed:?}");
            assert_eq!((cs[0].n, cs[1].n), (7, 8));
            assert!(cs[0].max < 1200.0 && cs[1].min > 7000.0, "{cs:?}");
            // One placement: ±30% never splits.
            let one = around(&mut rng, 900.0, 0.3, 15);
            assert_eq!(clusters(&one).len(), 1, "{one:?}");
        }
        // One far round is no cluster of its own; nothing, or a ratio
        // below zero, has none.
        assert_eq!(clusters(&[1.0, 1.1, 1.2, 9.0]).len(), 1);
        assert!(clusters(&[]).is_empty() && clusters(&[-1.0, 2.0]).is_empty());
        let cell = distribution(&[900.0, 1000.0, 8000.0, 7900.0, 8100.0], 0);
        assert_eq!(cell, "900-1000 (2) | 7900-8100 (3)");
        assert_eq!(distribution(&[1.0, 2.0, 3.0], 1), "2.0 (1.0-3.0)");
        assert_eq!(spread(&[1.0, 1.1, 8.0, 8.1], 1, false), "4.5 (1.0-8.1)");
        assert_eq!(
            spread(&[1.0, 1.1, 8.0, 8.1], 1, true),
            "1.0-1.1 (2) | 8.0-8.1 (2)"
        );
        assert_eq!(spread(&[], 1, false), "-");
    }
}
