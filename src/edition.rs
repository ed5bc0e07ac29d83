//! `lab book [RUN] [--out DIR]`: your own edition of the book. Every
//! directive of the book ([`crate::book`]) is filled from your run, with the
//! reference's figure beside it; a figure your run does not have is the
//! book's, labelled so, and the chapter names the command that measures
//! it; a sentence your run contradicts is marked, with your figure.
//! `lab book DIR` over a folder of runs is a class's edition: per figure the
//! median and range across the runs, per claim the count of each verdict.
//!
//! The book is built in-process by mdBook's library (`mdbook-driver`), so
//! an edition needs nothing but the lab's own build: no `mdbook` program,
//! no network.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use labkit::{Error, Result};
use serde_json::Value;

use crate::claims::{self, Row};
use crate::document::Document;
use crate::runs;

/// Which runs a book is rendered from.
#[derive(Debug, Default)]
pub enum Edition {
    /// The book as published: every figure from the reference.
    #[default]
    Reference,
    /// A reader's run, beside the reference.
    Own(Own),
    /// A class's runs, beside the reference.
    Class(Class),
}

/// A reader's run.
#[derive(Debug)]
pub struct Own {
    pub run: Source,
    /// Its name, as the edition prints it.
    pub name: String,
    rows: Vec<Row>,
    /// The reference's verdicts.
    book: Vec<Row>,
    /// The results folders (`EXP[/SUB]`) a chapter asked for and the run
    /// lacks, since the chapter started.
    missing: RefCell<BTreeSet<String>>,
}

/// The runs of a class that can be read; those that cannot, named.
#[derive(Debug)]
pub struct Class {
    pub dir: PathBuf,
    /// (name, results) of each run counted.
    pub runs: Vec<(String, Source)>,
    /// (run, why) of each run left out, copies included.
    pub left_out: Vec<(String, String)>,
    /// Each counted run's verdicts, in the order of `runs`.
    rows: Vec<Vec<Row>>,
    book: Vec<Row>,
    missing: RefCell<BTreeSet<String>>,
    /// The runs judged by today's claims.toml, having no rules stored.
    pub todays_rules: Vec<String>,
}

impl Own {
    /// `run`, to be shown beside reference run `reference`.
    pub fn new(run: &Path, reference: &Path) -> Result<Own> {
        let book = claims::evaluate(reference)?;
        let mut rows = claims::evaluate_checked(run)?;
        every_claim_of(&book, &mut rows);
        Ok(Own {
            run: Source::new(run),
            name: run_name(run),
            rows,
            book,
            missing: RefCell::default(),
        })
    }
}

impl Class {
    /// The class of the runs in `dir`: a run that does not read, is
    /// unfinished or copies another is left out and named
    /// ([`crate::class::compare`]).
    pub fn new(dir: &Path, reference: &Path) -> Result<Class> {
        // An earlier class edition inside the folder is none of its runs.
        let list: Vec<PathBuf> = crate::class::runs_in(dir)?
            .into_iter()
            .filter(|p| !p.join(MARK).exists())
            .collect();
        let class = crate::class::compare(&list)?;
        let mut left_out = class.left_out.clone();
        left_out.extend(
            class
                .duplicates
                .iter()
                .map(|(copy, of)| (copy.clone(), format!("a copy of {of}"))),
        );
        let book = claims::evaluate(reference)?;
        let mut runs = Vec::new();
        let mut rows = Vec::new();
        let mut todays_rules = Vec::new();
        for m in &class.members {
            let path = PathBuf::from(&m.run);
            match claims::evaluate(&path) {
                Ok(mut r) => {
                    every_claim_of(&book, &mut r);
                    rows.push(r);
                    runs.push((run_name(&path), Source::new(&path)));
                    if !m.rules_stored {
                        todays_rules.push(m.run.clone());
                    }
                }
                Err(e) => left_out.push((m.run.clone(), e.to_string())),
            }
        }
        if runs.is_empty() {
            return Err(Error::failed(format!(
                "{}: no run in it can be read",
                dir.display()
            )));
        }
        Ok(Class {
            dir: dir.to_path_buf(),
            runs,
            left_out,
            rows,
            book,
            missing: RefCell::default(),
            todays_rules,
        })
    }
}

/// A run judged by the rules stored with it may lack a claim the book has:
/// it is given one, not judged, that says so.
fn every_claim_of(book: &[Row], rows: &mut Vec<Row>) {
    for b in book {
        if !rows.iter().any(|r| r.claim.id == b.claim.id) {
            rows.push(Row::unjudged(
                b.claim.clone(),
                claims::Verdict::NotMeasured(
                    "not among the rules stored with this run".into(),
                ),
                "-",
            ));
        }
    }
}

fn run_name(run: &Path) -> String {
    run.file_name().map_or_else(
        || run.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A run's results files, each read once ([`Document`]).
#[derive(Debug)]
pub struct Source {
    pub path: PathBuf,
    files: RefCell<std::collections::HashMap<String, Option<Rc<Document>>>>,
}

impl Source {
    pub fn new(path: &Path) -> Source {
        Source { path: path.to_path_buf(), files: RefCell::default() }
    }

    /// The results file of `folder` (`EXP[/SUB]`); `None` when there is
    /// none.
    pub fn json(&self, folder: &str) -> Result<Option<Rc<Document>>> {
        if let Some(known) = self.files.borrow().get(folder) {
            return Ok(known.clone());
        }
        let doc = Document::read_folder(&self.path, folder)?.map(Rc::new);
        self.files.borrow_mut().insert(folder.to_string(), doc.clone());
        Ok(doc)
    }

    /// The value at `pointer` in results `folder`
    /// ([`crate::document::resolve`]): `None` when the run has no such
    /// results, or they have no such value.
    pub fn value(&self, folder: &str, pointer: &str) -> Result<Option<Value>> {
        let Some(doc) = self.json(folder)? else { return Ok(None) };
        Ok(doc.get(pointer).cloned())
    }
}

/// A figure as `{{#figure}}` prints it ([`crate::book`]).
pub fn show_value(value: &Value, decimals: Option<usize>) -> String {
    match (value, decimals) {
        (Value::Number(n), Some(d)) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            format!("{x:.d$}")
        }
        (Value::String(s), _) => s.clone(),
        (Value::Array(ends), Some(d))
            if ends.len() == 2 && ends.iter().all(Value::is_number) =>
        {
            let end = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
            format!("{:.d$} to {:.d$}", end(&ends[0]), end(&ends[1]))
        }
        (Value::Null, _) => "-".to_string(),
        (other, _) => other.to_string(),
    }
}

/// Text as HTML: `<`, `>`, `&` and `"` escaped.
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The verdict of claim `id` among `rows`.
fn row<'a>(rows: &'a [Row], id: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.claim.id == id)
}

/// A claims table's cell for a claim, and whether it differs from the
/// book's.
type Cell<'a> = dyn Fn(&Row) -> (String, bool) + 'a;

/// A verdict and its figure in words: "holds, 6.24x (95% interval ...)".
fn verdict_words(r: &Row) -> String {
    match r.today_text() {
        Some(t) => format!("**{}**, {t}", r.verdict.word()),
        None => format!("**{}**", r.verdict),
    }
}

/// What a `{{#rests-on}}` sentence rests on:
/// `PART [and PART ...]`, each PART one of
/// - `CLAIM VERDICT[|VERDICT]`: the claim's verdict is one of these
///   (`holds`, `no-longer-holds`, `depends`, `too-close`);
/// - `EXP[/SUB] WHAT above|below|contains N`: WHAT is a headline key (its
///   whole 95% interval lies above or below N, or contains N) or a
///   `/pointer` to one value;
/// - `EXP[/SUB] WHAT over EXP[/SUB] WHAT above|below N`: the quotient of
///   two figures (a headline figure's value, or one value).
#[derive(Debug, PartialEq)]
pub enum Condition {
    Verdict { id: String, verdicts: Vec<String> },
    Figure { figure: Figure, test: Test },
    Ratio { over: Figure, under: Figure, test: Test },
    All(Vec<Condition>),
}

/// A figure of a run: results folder `EXP[/SUB]` and a headline key or a
/// `/pointer`.
#[derive(Debug, PartialEq)]
pub struct Figure {
    pub folder: String,
    pub what: String,
}

#[derive(Debug, PartialEq)]
pub enum Test {
    Above(f64),
    Below(f64),
    Contains(f64),
}

const VERDICT_WORDS: [&str; 4] =
    ["holds", "no-longer-holds", "depends", "too-close"];

impl Test {
    fn parse(side: &str, bound: &str) -> std::result::Result<Test, String> {
        let n =
            bound.parse::<f64>().map_err(|_| format!("'{bound}' is no number"))?;
        match side {
            "above" => Ok(Test::Above(n)),
            "below" => Ok(Test::Below(n)),
            "contains" => Ok(Test::Contains(n)),
            other => Err(format!("'{other}': give above, below or contains")),
        }
    }

    /// Whether the range `[lo, hi]` passes.
    fn passes(&self, [lo, hi]: [f64; 2]) -> bool {
        match *self {
            Test::Above(n) => lo > n,
            Test::Below(n) => hi < n,
            Test::Contains(n) => lo <= n && n <= hi,
        }
    }

    fn words(&self) -> String {
        let (w, n) = match *self {
            Test::Above(n) => ("above", n),
            Test::Below(n) => ("below", n),
            Test::Contains(n) => ("contains", n),
        };
        format!("{w} {}", crate::table::sig(n))
    }
}

impl Figure {
    /// Its value, the range a test judges (a headline figure's interval,
    /// else the value itself) and the figure in words; `None` when `run`
    /// did not measure it.
    fn read(&self, run: &Source) -> Result<Option<(f64, [f64; 2], String)>> {
        let Figure { folder, what } = self;
        if what.starts_with('/') {
            let v = run.value(folder, what)?.and_then(|v| v.as_f64());
            return Ok(v.map(|v| {
                (v, [v, v], format!("{what} is {}", crate::table::sig(v)))
            }));
        }
        let Some(h) = run.value(folder, &format!("/headline/{what}"))? else {
            return Ok(None);
        };
        let num = |v: Option<&Value>| v.and_then(Value::as_f64);
        let Some(value) = num(h.get("value")) else { return Ok(None) };
        let iv = h.get("interval").and_then(Value::as_array);
        let lo = num(iv.and_then(|i| i.first())).unwrap_or(value);
        let hi = num(iv.and_then(|i| i.get(1))).unwrap_or(value);
        let json = serde_json::json!({ "headline": { what.as_str(): h.clone() } });
        let text = crate::book::headline(&json, what, 2)
            .map_err(|e| Error::failed(format!("{folder} {what}: {e}")))?;
        Ok(Some((value, [lo, hi], format!("{what} is {text}"))))
    }
}

impl Condition {
    pub fn parse(text: &str) -> std::result::Result<Condition, String> {
        let parts: Vec<&str> = text.split(" and ").collect();
        if parts.len() > 1 {
            return parts
                .into_iter()
                .map(Condition::parse)
                .collect::<Result<_, _>>()
                .map(Condition::All);
        }
        let fig = |folder: &str, what: &str| Figure {
            folder: folder.to_string(),
            what: what.to_string(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            [id, verdicts] => {
                let verdicts: Vec<String> =
                    verdicts.split('|').map(str::to_string).collect();
                if let Some(bad) =
                    verdicts.iter().find(|v| !VERDICT_WORDS.contains(&v.as_str()))
                {
                    return Err(format!(
                        "'{bad}' is no verdict: give one of {}",
                        VERDICT_WORDS.join(", ")
                    ));
                }
                if !claims::all().iter().any(|c| c.id == *id) {
                    return Err(format!("no claim {id} in claims.toml"));
                }
                Ok(Condition::Verdict { id: id.to_string(), verdicts })
            }
            [folder, what, side, bound] => Ok(Condition::Figure {
                figure: fig(folder, what),
                test: Test::parse(side, bound)?,
            }),
            [f1, w1, "over", f2, w2, side, bound] => {
                let test = Test::parse(side, bound)?;
                if matches!(test, Test::Contains(_)) {
                    return Err("a quotient is judged above or below a bound".into());
                }
                Ok(Condition::Ratio { over: fig(f1, w1), under: fig(f2, w2), test })
            }
            _ => Err("give CLAIM VERDICT, EXP WHAT above|below|contains N, or EXP \
                      WHAT over EXP WHAT above|below N"
                .into()),
        }
    }

    /// Whether it holds on `run` (`None`: the run did not measure it), and
    /// what the run measured, in words.
    pub fn on(&self, run: &Source, rows: &[Row]) -> Result<(Option<bool>, String)> {
        let unmeasured =
            |f: &Figure| format!("{} {} was not measured", f.folder, f.what);
        match self {
            Condition::Verdict { id, verdicts } => {
                let r = row(rows, id).ok_or_else(|| {
                    Error::failed(format!("no claim {id} in claims.toml"))
                })?;
                if r.today.is_none() {
                    return Ok((None, format!("{id} was not measured")));
                }
                let word =
                    r.verdict.word().replace(' ', "-").replace("-to-call", "");
                Ok((
                    Some(verdicts.contains(&word)),
                    format!("{id} {}", verdict_words(r)),
                ))
            }
            Condition::Figure { figure, test } => Ok(match figure.read(run)? {
                Some((_, range, said)) => (Some(test.passes(range)), said),
                None => (None, unmeasured(figure)),
            }),
            Condition::Ratio { over, under, test } => {
                let (Some(a), Some(b)) = (over.read(run)?, under.read(run)?) else {
                    return Ok((
                        None,
                        format!("{} or {}", unmeasured(over), unmeasured(under)),
                    ));
                };
                if b.0 == 0.0 {
                    return Ok((None, format!("{} is 0", under.what)));
                }
                let q = a.0 / b.0;
                Ok((
                    Some(test.passes([q, q])),
                    format!(
                        "{} over {} is {}",
                        over.what,
                        under.what,
                        crate::table::sig(q)
                    ),
                ))
            }
            Condition::All(parts) => {
                let mut holds = Some(true);
                let mut said = Vec::new();
                for part in parts {
                    let (h, s) = part.on(run, rows)?;
                    match h {
                        Some(false) => {
                            holds = Some(false);
                            said.push(s);
                        }
                        None if holds == Some(true) => {
                            holds = None;
                            said.push(s);
                        }
                        _ => {}
                    }
                }
                Ok((holds, said.join("; ")))
            }
        }
    }

    /// The condition in words, for a reader: what the sentence rests on.
    pub fn words(&self) -> String {
        match self {
            Condition::Verdict { id, verdicts } => {
                format!("{id}: {}", verdicts.join(" or ").replace('-', " "))
            }
            Condition::Figure { figure, test } => {
                format!("{} {} {}", figure.folder, figure.what, test.words())
            }
            Condition::Ratio { over, under, test } => format!(
                "{} {} over {} {} {}",
                over.folder,
                over.what,
                under.folder,
                under.what,
                test.words()
            ),
            Condition::All(parts) => {
                parts.iter().map(Condition::words).collect::<Vec<_>>().join(" and ")
            }
        }
    }
}

/// The first of the reference plan's commands that makes results folder
/// `folder`, as a reader types it: `lab run NAME FLAGS`.
pub fn command_for(folder: &str) -> String {
    let experiment = folder.split('/').next().unwrap_or(folder);
    let step =
        crate::schedule::reference_plan().into_iter().find(|s| s.folder() == folder);
    match step {
        Some(step) => {
            let mut plan = step.plan;
            plan.common.reference = false;
            plan.command()
        }
        None => format!("lab run {experiment}"),
    }
}

impl Edition {
    /// `{{#figure}}`: `book` is the reference's figure as the book prints it.
    pub fn figure(
        &self,
        folder: &str,
        pointer: &str,
        decimals: Option<usize>,
        book: String,
    ) -> Result<String> {
        let data = html(&format!(
            "{folder} {pointer}{}",
            decimals.map_or(String::new(), |d| format!(" {d}"))
        ));
        match self {
            Edition::Reference => Ok(book),
            Edition::Own(own) => match own.run.value(folder, pointer)? {
                // A figure the run could not give (no perf, no root): the
                // book's, as for one it did not measure.
                Some(Value::Null) | None => Ok(own.book_only(
                    folder,
                    &format!("data-figure=\"{data}\""),
                    &book,
                )),
                Some(v) => {
                    let mine = show_value(&v, decimals);
                    let theirs = if mine == book { "same".into() } else { book };
                    Ok(format!(
                        "<span class=\"lab-yours\" data-figure=\"{data}\">{}</span>\
                         <span class=\"lab-book\"> (book: {})</span>",
                        html(&mine),
                        html(&theirs)
                    ))
                }
            },
            Edition::Class(class) => {
                let mut numbers = Vec::new();
                let mut words = BTreeSet::new();
                for (_, run) in &class.runs {
                    match run.value(folder, pointer)? {
                        Some(Value::Number(n)) => {
                            numbers.extend(n.as_f64());
                        }
                        Some(v) => {
                            words.insert(show_value(&v, decimals));
                        }
                        None => {}
                    }
                }
                let n = class.runs.len();
                let shown = if let Some(s) = crate::stats::Summary::of(&numbers) {
                    let d = decimals.unwrap_or(2);
                    format!(
                        "{:.d$} (median of {} of {n} runs; range {:.d$} to {:.d$})",
                        s.median, s.n, s.min, s.max
                    )
                } else if words.len() == 1 {
                    words.into_iter().next().expect("one")
                } else if !words.is_empty() {
                    format!("{} values across the runs", words.len())
                } else {
                    class.missing.borrow_mut().insert(folder.to_string());
                    return Ok(format!(
                        "<span class=\"lab-book-only\" data-figure=\"{data}\">{} \
                         (the book's; no run measured it)</span>",
                        html(&book)
                    ));
                };
                Ok(format!(
                    "<span class=\"lab-yours\" data-figure=\"{data}\">{}</span>\
                     <span class=\"lab-book\"> (book: {})</span>",
                    html(&shown),
                    html(&book)
                ))
            }
        }
    }

    /// `{{#headline}}`: `book` is the reference's, as the book prints it.
    pub fn headline(
        &self,
        folder: &str,
        key: &str,
        decimals: usize,
        book: String,
    ) -> Result<String> {
        let data = html(&format!("{folder} {key} {decimals}"));
        let of = |run: &Source| -> Result<Option<(String, Option<f64>)>> {
            let Some(doc) = run.json(folder)? else { return Ok(None) };
            let json = doc.json();
            if json.pointer(&format!("/headline/{key}")).is_none() {
                return Ok(None);
            }
            let text = crate::book::headline(json, key, decimals).map_err(|e| {
                Error::failed(format!("{}: {e}", run.path.display()))
            })?;
            let value = json
                .pointer(&format!("/headline/{key}/value"))
                .and_then(Value::as_f64);
            Ok(Some((text, value)))
        };
        match self {
            Edition::Reference => Ok(book),
            Edition::Own(own) => match of(&own.run)? {
                Some((mine, _)) => Ok(format!(
                    "<span class=\"lab-yours\" data-headline=\"{data}\">{}</span> on \
                     your run<span class=\"lab-book\">; the book's: {}</span>",
                    html(&mine),
                    html(&book)
                )),
                None => Ok(own.book_only(
                    folder,
                    &format!("data-headline=\"{data}\""),
                    &book,
                )),
            },
            Edition::Class(class) => {
                let mut values = Vec::new();
                for (_, run) in &class.runs {
                    if let Some((_, Some(v))) = of(run)? {
                        values.push(v);
                    }
                }
                let Some(s) = crate::stats::Summary::of(&values) else {
                    class.missing.borrow_mut().insert(folder.to_string());
                    return Ok(format!(
                        "<span class=\"lab-book-only\" data-headline=\"{data}\">{} \
                         (the book's; no run measured it)</span>",
                        html(&book)
                    ));
                };
                let d = decimals;
                Ok(format!(
                    "<span class=\"lab-yours\" data-headline=\"{data}\">{:.d$} \
                     (median of {} of {} runs; range {:.d$} to {:.d$})</span>\
                     <span class=\"lab-book\">; the book's: {}</span>",
                    s.median,
                    s.n,
                    class.runs.len(),
                    s.min,
                    s.max,
                    html(&book)
                ))
            }
        }
    }

    /// `{{#result EXP/FILE}}`: `book` is the reference's file.
    pub fn result(&self, file: &str, book: String) -> Result<String> {
        let folder = file.rsplit_once('/').map_or(file, |(f, _)| f);
        let svg = file.ends_with(".svg");
        match self {
            Edition::Reference => Ok(book),
            Edition::Own(own) => {
                let path = own.run.path.join(file);
                let mine = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        own.missing.borrow_mut().insert(folder.to_string());
                        return Ok(labelled(
                            &book,
                            svg,
                            "The book's (your run did not measure this)",
                        ));
                    }
                    Err(e) => return Err(Error::io(path.display(), e)),
                };
                if svg {
                    // Side by side: one picture each, at the same scale.
                    Ok(format!(
                        "\n<div class=\"lab-beside\" data-result=\"{f}\">\n\
                         <figure class=\"lab-yours\">\n{mine}\n<figcaption>Your run \
                         ({name})</figcaption>\n</figure>\n<figure class=\"lab-book\">\n\
                         {book}\n<figcaption>The book's</figcaption>\n</figure>\n</div>\n",
                        f = html(file),
                        name = html(&own.name),
                    ))
                } else {
                    Ok(format!(
                        "\n<p class=\"lab-caption\" data-result=\"{f}\">Your run \
                         ({name}):</p>\n\n{mine}\n\n<details class=\"lab-book\">\
                         <summary>The book's</summary>\n\n{book}\n\n</details>\n",
                        f = html(file),
                        name = html(&own.name),
                    ))
                }
            }
            Edition::Class(_) => Ok(labelled(
                &book,
                svg,
                "The book's (each run's own edition, `lab book RUN`, has its own)",
            )),
        }
    }

    /// `{{#verdict ID}}`: `book` is the book's sentence.
    pub fn verdict(&self, id: &str, book: String) -> Result<String> {
        match self {
            Edition::Reference => Ok(book),
            Edition::Own(own) => {
                let mine = row(&own.rows, id)
                    .ok_or_else(|| Error::failed(format!("no claim {id}")))?;
                let theirs = row(&own.book, id)
                    .ok_or_else(|| Error::failed(format!("no claim {id}")))?;
                let measured = mine.today.is_some() || mine.claim.cannot.is_some();
                if !measured {
                    own.missing.borrow_mut().insert(theirs.results.clone());
                }
                let differs = measured && own_differs(own, id);
                let on = |r: &Row| match r.today_text() {
                    Some(t) => format!("{t}, on {} (`{}`)", r.judged_on, r.results),
                    None => r.verdict.to_string(),
                };
                let yours = if measured {
                    format!(
                        "Your run: {}{}.",
                        on(mine),
                        mine.busy
                            .as_ref()
                            .map_or(String::new(), |b| format!(" (*busy*: {b})"))
                    )
                } else {
                    "<span class=\"lab-book-only\">Your run did not measure it.</span>"
                        .to_string()
                };
                let rule = if theirs.claim.cannot.is_none() {
                    format!(" The rule: {}.", theirs.claim.rule(&theirs.unit))
                } else {
                    String::new()
                };
                Ok(format!(
                    "<a id=\"verdict-{id}\"></a><span class=\"lab-verdict{}\" \
                     data-verdict=\"{id}\">{}**Verdict on \"{claim}\" ({id}): on your \
                     run, {mine_word}; the book's: {book_word}.** {yours} \
                     <span class=\"lab-book\">The book's: {book_on}.</span>{rule} \
                     ([All the claims](then-and-now.md#{heading}))</span>",
                    if differs { " lab-differs" } else { "" },
                    if differs {
                        "<strong class=\"lab-mark\">Differs from the book's.</strong> "
                    } else {
                        ""
                    },
                    claim = theirs.claim.claim,
                    mine_word =
                        if measured { mine.verdict.word() } else { "not measured" },
                    book_word = theirs.verdict.word(),
                    book_on = on(theirs),
                    heading = claims::heading_id(id),
                ))
            }
            Edition::Class(class) => {
                let (counts, differ) = class.tally(id)?;
                Ok(format!(
                    "<span class=\"lab-yours{}\" data-verdict=\"{id}\">{}Across the \
                     class's {} runs: {counts}.</span> {book}",
                    if differ { " lab-differs" } else { "" },
                    if differ {
                        "<strong class=\"lab-mark\">Not every run agrees with the \
                         book.</strong> "
                    } else {
                        ""
                    },
                    class.runs.len()
                ))
            }
        }
    }

    /// `{{#rests-on COND}}TEXT{{/rests-on}}`: `text` expanded. The
    /// reference's book refuses a sentence its own reference contradicts.
    pub fn rests_on(
        &self,
        condition: &str,
        text: String,
        reference: &Path,
        reference_rows: &[Row],
    ) -> Result<String> {
        let cond = Condition::parse(condition).map_err(|e| {
            Error::failed(format!("{{{{#rests-on {condition}}}}}: {e}"))
        })?;
        let (on_book, said) = cond.on(&Source::new(reference), reference_rows)?;
        if on_book != Some(true) {
            return Err(Error::failed(format!(
                "{{{{#rests-on {condition}}}}}: the reference does not support \
                 \"{}\": {said}",
                text.trim()
            )));
        }
        let data = html(condition);
        match self {
            Edition::Reference => Ok(text),
            Edition::Own(own) => match cond.on(&own.run, &own.rows)? {
                (Some(true), _) => Ok(text),
                (Some(false), said) => Ok(format!(
                    "<span class=\"lab-contradicted\" data-rests-on=\"{data}\">{text}\
                     </span> <strong class=\"lab-mark\">Your run says otherwise: \
                     {said}</strong>"
                )),
                (None, _) => Ok(format!(
                    "{text} <span class=\"lab-book-only\" data-rests-on=\"{data}\">\
                     (the book's run; yours did not measure {})</span>",
                    html(&cond.words())
                )),
            },
            Edition::Class(class) => {
                let mut against = Vec::new();
                for ((name, run), rows) in class.runs.iter().zip(&class.rows) {
                    if cond.on(run, rows)?.0 == Some(false) {
                        against.push(name.clone());
                    }
                }
                if against.is_empty() {
                    return Ok(text);
                }
                Ok(format!(
                    "<span class=\"lab-contradicted\" data-rests-on=\"{data}\">{text}\
                     </span> <strong class=\"lab-mark\">{} of {} runs say otherwise \
                     ({})</strong>",
                    against.len(),
                    class.runs.len(),
                    html(&against.join(", "))
                ))
            }
        }
    }

    /// `{{#then-and-now}}` and `{{#findings}}` of an edition: a column per
    /// run, the book's last, each row marked where they differ. `None` for
    /// the reference's book.
    pub fn claims_table(
        &self,
        book: &[Row],
        link: &dyn Fn(&Row) -> String,
    ) -> Option<String> {
        let (head, cells): (String, Box<Cell>) = match self {
            Edition::Reference => return None,
            Edition::Own(own) => (
                format!("your run ({})", own.name),
                Box::new(move |b: &Row| {
                    let mine = row(&own.rows, &b.claim.id).expect("every claim");
                    (
                        format!(
                            "{}{}",
                            verdict_words(mine),
                            if mine.busy.is_some() { " (*busy*)" } else { "" }
                        ),
                        own_differs(own, &b.claim.id),
                    )
                }),
            ),
            Edition::Class(class) => (
                format!("the class's {} runs", class.runs.len()),
                Box::new(move |b: &Row| {
                    class
                        .tally(&b.claim.id)
                        .unwrap_or_else(|e| (e.to_string(), true))
                }),
            ),
        };
        let mut md = format!("| claim | {head} | the book's |\n|---|---|---|\n");
        for b in book {
            let (mine, differs) = cells(b);
            md.push_str(&format!(
                "| {}{} | {} | {} |\n",
                if differs { "**differs:** " } else { "" },
                claims::cell(&link(b)),
                claims::cell(&mine),
                claims::cell(&verdict_words(b)),
            ));
        }
        Some(md)
    }

    /// The results folders the chapter asked for and no run had, since
    /// the last call.
    fn take_missing(&self) -> BTreeSet<String> {
        match self {
            Edition::Reference => BTreeSet::new(),
            Edition::Own(own) => own.missing.take(),
            Edition::Class(class) => class.missing.take(),
        }
    }

    /// A chapter of an edition opens on what it is rendered from: for an
    /// experiment's chapter, the settings of the run that differ from the
    /// reference's; on every page, what the run did not measure and the
    /// command that would. `stem` is the page's file stem.
    pub fn open_chapter(
        &self,
        stem: &str,
        content: String,
        reference: &Path,
    ) -> Result<String> {
        let missing = self.take_missing();
        let experiment = crate::experiments::every()
            .map(|e| e.name)
            .filter(|name| stem == *name || stem.starts_with(&format!("{name}-")))
            .max_by_key(|name| name.len());
        let main_page = experiment.is_some_and(|e| e == stem);
        let mut note = String::new();
        match self {
            Edition::Reference => return Ok(content),
            Edition::Own(own) => {
                note.push_str(&format!(
                    "**Your edition**: figures from your run `{}`, each with the \
                     book's beside it (the reference run `{}`).",
                    own.name,
                    run_name(reference)
                ));
                if let (true, Some(e)) = (main_page, experiment) {
                    note.push_str(&settings_table(&own.run.path, reference, e)?);
                }
            }
            Edition::Class(class) => {
                note.push_str(&format!(
                    "**A class's edition**: {} runs of `{}` ({}), each figure their \
                     median and range, beside the book's (the reference run `{}`).",
                    class.runs.len(),
                    class.dir.display(),
                    class
                        .runs
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    run_name(reference)
                ));
                if !class.left_out.is_empty() {
                    note.push_str(" Left out:");
                    for (run, why) in &class.left_out {
                        note.push_str(&format!(" `{run}` ({why});"));
                    }
                }
                if let (true, Some(e)) = (main_page, experiment) {
                    let with: Vec<&str> = class
                        .runs
                        .iter()
                        .filter(|(_, r)| r.path.join(e).is_dir())
                        .map(|(n, _)| n.as_str())
                        .collect();
                    note.push_str(&format!(
                        " {} of the {} runs measured {e}.",
                        with.len(),
                        class.runs.len()
                    ));
                }
            }
        }
        if !missing.is_empty() {
            note.push_str(&format!(
                "\n\n<div class=\"lab-missing\">\n\n**Not measured by your {}:** on \
                 this page these show the book's figures, labelled so. The commands \
                 that measure them:\n\n",
                if matches!(self, Edition::Class(_)) { "runs" } else { "run" }
            ));
            for folder in &missing {
                note.push_str(&format!("- `{folder}`: `{}`\n", command_for(folder)));
            }
            note.push_str("\n</div>\n");
        }
        let block = format!("\n<div class=\"lab-edition\">\n\n{note}\n\n</div>\n\n");
        // After the page's title, if it opens on one.
        Ok(match content.split_once('\n') {
            Some((first, rest)) if first.starts_with("# ") => {
                format!("{first}\n{block}{rest}")
            }
            _ => format!("{block}{content}"),
        })
    }
}

/// The book's `text` (a table, a chart), labelled.
fn labelled(text: &str, svg: bool, label: &str) -> String {
    if svg {
        format!(
            "\n<figure class=\"lab-book-only\">\n{text}\n<figcaption>{}</figcaption>\n\
             </figure>\n",
            html(label)
        )
    } else {
        format!("\n<p class=\"lab-book-only\">{}:</p>\n\n{text}\n", html(label))
    }
}

impl Own {
    /// The book's figure where the run has none, labelled, and the folder
    /// noted for the chapter's list.
    fn book_only(&self, folder: &str, attribute: &str, book: &str) -> String {
        self.missing.borrow_mut().insert(folder.to_string());
        format!(
            "<span class=\"lab-book-only\" {attribute}>{} (the book's; \
             your run did not measure it)</span>",
            html(book)
        )
    }
}

/// Whether the run's verdict on claim `id` differs from the book's.
fn own_differs(own: &Own, id: &str) -> bool {
    let book = row(&own.book, id).map(|r| r.verdict.word());
    let mine = row(&own.rows, id).map(|r| r.verdict.word());
    mine.is_some() && book.is_some() && mine != book
}

impl Class {
    /// Claim `id` across the runs: "2 holds, 1 too close to call", and
    /// whether any run's verdict differs from the book's.
    fn tally(&self, id: &str) -> Result<(String, bool)> {
        let book = row(&self.book, id).map(|r| r.verdict.word());
        let mut counts = std::collections::BTreeMap::new();
        let mut differ = false;
        for rows in &self.rows {
            let r = row(rows, id)
                .ok_or_else(|| Error::failed(format!("no claim {id}")))?;
            *counts.entry(r.verdict.word()).or_insert(0) += 1;
            differ |= r.today.is_some() && Some(r.verdict.word()) != book;
        }
        let words: Vec<String> =
            counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
        Ok((words.join(", "), differ))
    }
}

/// The settings of `run`'s results for `experiment` (and its sub-runs)
/// that differ from the reference's, as a table: CPUs, `--quick`, rounds,
/// kernel, virtualisation and what the experiment chose itself.
fn settings_table(run: &Path, reference: &Path, experiment: &str) -> Result<String> {
    use crate::report::Published;
    let mut rows: Vec<(String, String, String, Vec<String>)> = Vec::new();
    let folders = runs::experiments_in(reference);
    for folder in folders.iter().filter(|f| {
        f.as_str() == experiment || f.starts_with(&format!("{experiment}/"))
    }) {
        let (Some(mine), Some(book)) = (
            Published::read(&run.join(folder), experiment)?,
            Published::read(&reference.join(folder), experiment)?,
        ) else {
            continue;
        };
        let facts: Vec<&String> = book.header.machine.facts.keys().collect();
        for (what, yours, theirs) in crate::compare::differences(&mine, &book) {
            if what == "command" || facts.contains(&&what) {
                continue;
            }
            match rows
                .iter_mut()
                .find(|r| r.0 == what && r.1 == yours && r.2 == theirs)
            {
                Some(r) => r.3.push(folder.clone()),
                None => rows.push((what, yours, theirs, vec![folder.clone()])),
            }
        }
    }
    if rows.is_empty() {
        return Ok(" Its settings are the book's.".into());
    }
    let mut md = String::from(
        " Its settings differ from the book's:\n\n| setting | your run | the book's | \
         results |\n|---|---|---|---|\n",
    );
    for (what, yours, theirs, folders) in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            claims::cell(&what),
            claims::cell(&yours),
            claims::cell(&theirs),
            folders.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(md)
}

/// The book's directives as an mdBook preprocessor in-process, for one
/// edition (taken by the one build that runs it).
struct Preprocessor {
    reference: PathBuf,
    repository: Option<String>,
    edition: RefCell<Option<Edition>>,
}

impl mdbook_preprocessor::Preprocessor for Preprocessor {
    fn name(&self) -> &str {
        // In the place of book.toml's `[preprocessor.lab]`, which runs the
        // published book's (`mdbook-lab`) through Cargo.
        "lab"
    }

    fn run(
        &self,
        _: &mdbook_preprocessor::PreprocessorContext,
        book: mdbook_driver::book::Book,
    ) -> mdbook_driver::errors::Result<mdbook_driver::book::Book> {
        let edition = self.edition.borrow_mut().take().ok_or_else(|| {
            mdbook_driver::errors::Error::msg(
                "the edition was rendered once already",
            )
        })?;
        let mut json = serde_json::to_value(&book)?;
        crate::book::expand_edition(
            &mut json,
            &self.reference,
            self.repository.as_deref(),
            edition,
        )
        .map_err(|e| mdbook_driver::errors::Error::msg(e.to_string()))?;
        Ok(serde_json::from_value(json)?)
    }
}

/// The file that marks a folder as an edition `lab book` wrote, which a
/// new edition may replace.
const MARK: &str = ".lab-edition";

/// `lab book [RUN|DIR] [--out DIR]`.
pub fn main(name: Option<String>, out: Option<PathBuf>) -> Result<()> {
    use crate::checkout::{may_write, real_path};
    if let Some(dir) = &out {
        crate::results::check_writable(dir, "--out")?;
    }
    let started = std::time::Instant::now();
    runs::sweep_and_say();
    let reference = runs::reference().ok_or_else(|| {
        Error::usage(format!(
            "no reference run in {}",
            runs::results_root().display()
        ))
    })?;
    let class_dir = match &name {
        Some(n)
            if Path::new(n).is_dir()
                && !runs::is_run(Path::new(n))?
                && !crate::class::runs_in(Path::new(n))?.is_empty() =>
        {
            Some(PathBuf::from(n))
        }
        _ => None,
    };
    // Which rules judged the runs, said once the edition has a place.
    let mut note = None;
    let (edition, home) = match class_dir {
        Some(dir) => {
            let class = Class::new(&dir, &reference)?;
            for (run, why) in &class.left_out {
                eprintln!("lab: left out {run}: {why}");
            }
            if !class.todays_rules.is_empty() {
                note = Some(format!(
                    "judged by today's claims.toml, having no rules stored with \
                     them: {}",
                    class.todays_rules.join(", ")
                ));
            }
            let home = may_write(&dir, "").map(|()| dir.join("book")).map_err(|e| {
                format!("it cannot be written into {}: {e}", dir.display())
            });
            (Edition::Class(class), home)
        }
        None => {
            if name.is_none() {
                crate::checkout::runs_folder()?;
            }
            let run = crate::compare::resolve_or(
                name,
                crate::compare::latest,
                || {
                    format!(
                        "no finished run of yours in {} yet: `lab run all` or `lab run \
                     NAME` makes one",
                        runs::runs_root().display()
                    )
                },
            )?;
            let ours = real_path(&run).starts_with(real_path(&runs::runs_root()));
            let home = if !ours {
                Err("it is not a run of yours under runs/".to_string())
            } else if !runs::is_finished(&run) {
                Err("it is unfinished (cut short, or still running)".into())
            } else {
                may_write(&run, "")
                    .map(|()| run.join("book"))
                    .map_err(|e| e.to_string())
            };
            if !claims::Rules::of(&run)?.stored {
                note = Some(format!(
                    "{} is judged by today's claims.toml: it has no rules stored \
                     with it",
                    run.display()
                ));
            }
            (Edition::Own(Own::new(&run, &reference)?), home)
        }
    };
    let into = match (out, home) {
        (Some(dir), _) => dir,
        (None, Ok(dir)) => dir,
        (None, Err(why)) => {
            return Err(Error::usage(format!(
                "the edition has no place of its own: {why}; give --out DIR"
            )));
        }
    };
    // mdBook takes a relative build folder as relative to the book.
    let into =
        std::path::absolute(&into).map_err(|e| Error::io(into.display(), e))?;
    let fresh = std::fs::read_dir(&into).map_or(true, |mut d| d.next().is_none());
    if !fresh && !into.join(MARK).is_file() {
        return Err(Error::usage(format!(
            "{}: not empty, and no edition of the book: give a new or empty folder",
            into.display()
        )));
    }
    if let Some(note) = note {
        eprintln!("lab: note: {note}");
    }
    build(edition, &reference, &into)?;
    labkit::error::print(&format!("{}\n", into.join("index.html").display()))?;
    eprintln!("lab: edition built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Build `edition` of the book into `into`: in a staging folder beside it,
/// renamed into place when whole (an interrupt leaves the old edition, or
/// none).
fn build(edition: Edition, reference: &Path, into: &Path) -> Result<()> {
    let parent = match into.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(parent.display(), e))?;
    let staging = parent.join(format!(".lab-edition-{}", std::process::id()));
    labkit::cleanup::remove_if_killed(&staging);
    let built = render(edition, reference, &staging);
    let placed = built.and_then(|()| {
        std::fs::write(staging.join(MARK), "written by `lab book`\n")
            .map_err(|e| Error::io(staging.display(), e))?;
        if into.exists() {
            std::fs::remove_dir_all(into)
                .map_err(|e| Error::io(into.display(), e))?;
        }
        std::fs::rename(&staging, into).map_err(|e| Error::io(into.display(), e))
    });
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    labkit::cleanup::keep_if_killed(&staging);
    placed
}

fn render(edition: Edition, reference: &Path, dir: &Path) -> Result<()> {
    let root = crate::checkout::root().join("book");
    let failed = |e: mdbook_driver::errors::Error| {
        Error::failed(format!("the book in {}: {e:#}", root.display()))
    };
    let mut book = mdbook_driver::MDBook::load(&root).map_err(failed)?;
    book.config.build.build_dir = dir.to_path_buf();
    let repository = crate::book::repository();
    if let Some(url) = &repository {
        book.config.set("output.html.git-repository-url", url).map_err(failed)?;
    }
    book.with_preprocessor(Preprocessor {
        reference: reference.to_path_buf(),
        repository,
        edition: RefCell::new(Some(edition)),
    });
    book.build().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run with one results folder `demo` whose headline figure `x` has
    /// the interval `[lo, hi]`, and a plain value `n`.
    fn run_with(lo: f64, hi: f64) -> labkit::cleanup::TempDir {
        let dir = labtest::tempdir();
        std::fs::create_dir_all(dir.path().join("demo")).unwrap();
        let json = serde_json::json!({
            "headline": {"x": {"value": (lo + hi) / 2.0, "unit": "x",
                                "interval": [lo, hi], "method": "median"}},
            "n": 7
        });
        std::fs::write(dir.path().join("demo/demo.json"), json.to_string()).unwrap();
        dir
    }

    #[test]
    fn a_condition_names_a_claim_and_verdicts_or_a_figure_and_a_bound() {
        assert_eq!(
            Condition::parse("create-ratio holds|depends").unwrap(),
            Condition::Verdict {
                id: "create-ratio".into(),
                verdicts: vec!["holds".into(), "depends".into()]
            }
        );
        let fig = |folder: &str, what: &str| Figure {
            folder: folder.into(),
            what: what.into(),
        };
        assert_eq!(
            Condition::parse("demo/cpu0 x above 1.5").unwrap(),
            Condition::Figure {
                figure: fig("demo/cpu0", "x"),
                test: Test::Above(1.5)
            }
        );
        assert_eq!(
            Condition::parse(
                "demo x over demo/cpu0 /n below 2 and create-ratio holds"
            )
            .unwrap(),
            Condition::All(vec![
                Condition::Ratio {
                    over: fig("demo", "x"),
                    under: fig("demo/cpu0", "/n"),
                    test: Test::Below(2.0)
                },
                Condition::Verdict {
                    id: "create-ratio".into(),
                    verdicts: vec!["holds".into()]
                },
            ])
        );
        for bad in [
            "create-ratio maybe",
            "no-such-claim holds",
            "demo x beside 1",
            "demo x above one",
            "demo x over demo y contains 1",
            "demo x above 1 and",
            "demo",
        ] {
            assert!(Condition::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_figure_condition_holds_only_when_the_whole_interval_clears_the_bound() {
        let on = |lo, hi, text: &str| {
            let run = run_with(lo, hi);
            Condition::parse(text)
                .unwrap()
                .on(&Source::new(run.path()), &[])
                .unwrap()
                .0
        };
        assert_eq!(on(1.2, 1.4, "demo x above 1"), Some(true));
        // Straddling the bound: the run does not support the sentence.
        assert_eq!(on(0.9, 1.4, "demo x above 1"), Some(false));
        assert_eq!(on(0.9, 1.4, "demo x below 1"), Some(false));
        assert_eq!(on(0.5, 0.9, "demo x below 1"), Some(true));
        assert_eq!(on(0.5, 0.9, "demo /n above 6"), Some(true));
        assert_eq!(on(0.5, 0.9, "demo /n below 6"), Some(false));
        assert_eq!(on(0.9, 1.4, "demo x contains 1"), Some(true));
        assert_eq!(on(1.2, 1.4, "demo x contains 1"), Some(false));
        // A quotient of two values: x is 0.7 here, n 7.
        assert_eq!(on(0.5, 0.9, "demo /n over demo x above 9"), Some(true));
        assert_eq!(on(0.5, 0.9, "demo /n over demo x below 9"), Some(false));
        // Every part must hold; one that fails decides.
        assert_eq!(on(0.5, 0.9, "demo x below 1 and demo /n above 6"), Some(true));
        assert_eq!(on(0.5, 0.9, "demo x below 1 and demo /n above 8"), Some(false));
        assert_eq!(
            on(0.5, 0.9, "demo nothing above 1 and demo /n above 8"),
            Some(false)
        );
        // What the run did not measure is neither.
        assert_eq!(on(0.5, 0.9, "demo nothing above 1"), None);
        assert_eq!(on(0.5, 0.9, "other x above 1"), None);
        assert_eq!(on(0.5, 0.9, "demo x below 1 and other x above 1"), None);
    }

    #[test]
    fn the_books_own_reference_must_support_every_sentence_that_rests_on_it() {
        let reference = run_with(1.2, 1.4);
        let book = Edition::Reference;
        let text = "Processes cost more.".to_string();
        let ok =
            book.rests_on("demo x above 1", text.clone(), reference.path(), &[]);
        assert_eq!(ok.unwrap(), text);
        let err = book
            .rests_on("demo x below 1", text, reference.path(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not support") && err.contains("Processes"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_folder_is_measured_by_the_reference_plans_command() {
        assert_eq!(
            command_for("fork-vs-thread/cpu0"),
            "lab run fork-vs-thread --vs-c --variant cpu0 --cpus 0"
        );
        assert!(!command_for("fork-vs-thread/cpu0").contains("--reference"));
        assert_eq!(command_for("no-such/x"), "lab run no-such");
    }
}
