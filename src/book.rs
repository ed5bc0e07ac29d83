//! The book's preprocessor (`mdbook-lab`): it fills the chapters from the
//! committed reference run, so that no figure about today's machine is
//! typed into the prose.
//!
//! - `{{#result EXP/FILE}}` is replaced by the file `FILE` of the reference
//!   run's folder `EXP` (a table, a chart), e.g.
//!   `{{#result fork-vs-thread/tables.md}}`.
//! - `{{#figure EXP[/SUB] /path [DECIMALS]}}` is replaced by the value at
//!   that path in the reference file `EXP[/SUB]/EXP.json`, e.g.
//!   `{{#figure create-destroy /headline/fork_us/value 0}}`. A null value
//!   (a figure the run could not give) prints as `-`. The path is a JSON
//!   pointer whose steps into an array name the element by its setting,
//!   never by its position: `/series[condition=pipe,block_bytes=4096]/mb_per_s/median`
//!   ([`select`]), so a run with one more point quotes the same figures.
//!   Its first step says where it starts in the results file, of any
//!   version ([`crate::document::resolve`]): a top-level key (`/headline/...`)
//!   at the root, a header field (`/machine/...`) in the header, anything
//!   else in the experiment's data.
//!
//! - `{{#verdict ID}}` is replaced by claim `ID`'s verdict on the reference,
//!   with its figure, 95% interval, rounds and settings, and a link to its
//!   entry on the then-and-now page: a chapter's conclusion about a claim
//!   comes from the same evaluation as the table, so the two cannot
//!   disagree.
//! - `{{#then-and-now}}` is replaced by the then-and-now table of the
//!   reference ([`crate::claims::markdown`]), each claim linked to the
//!   chapter whose `{{#verdict ID}}` discusses it.
//! - `{{#chart-key}}` is replaced by the key to the charts
//!   ([`crate::chart::key_svg`]): each meaning's colour and marker, drawn by
//!   the code that draws the charts.
//! - `{{#rests-on CONDITION}}TEXT{{/rests-on}}` is TEXT, a sentence that
//!   rests on a verdict or a figure ([`crate::edition::Condition`]:
//!   `CLAIM VERDICT[|VERDICT]`, or `EXP[/SUB] KEY|/POINTER above|below N`).
//!   The build fails when the reference does not support it; a reader's
//!   edition marks it where their run does not.
//! - In a reader's edition ([`Edition`], `lab book`) every directive is
//!   filled from their run, the reference's figure beside it.
//! - `{{#repository}}` is replaced by the lab's public address: the book's
//!   `output.html.git-repository-url`, which `book/build` sets from the
//!   checkout's `origin` remote ([`web_url`]); without one, a placeholder
//!   that says so.
//!
//! A directive that names a file or a pointer that is not there fails the
//! build: a chapter cannot quote a figure the reference does not have.

use std::path::{Path, PathBuf};

use labkit::{Error, Result};
use serde_json::Value;

use crate::document::Document;

/// What `{{#repository}}` prints when the book has no repository address.
pub const NO_REPOSITORY: &str = "<the lab's repository URL>";

/// Expand every directive in `text` against reference folder `reference`,
/// `repository` being the lab's public address, if it has one.
pub fn expand(
    text: &str,
    reference: &Path,
    repository: Option<&str>,
) -> Result<String> {
    expand_with(text, reference, repository, &Pages::default())
}

/// What is rendered: the book as published, or an edition of it from a
/// reader's run or a class's ([`crate::edition`]).
pub use crate::edition::Edition;

/// Claim id -> the chapter (file under `src/`) whose `{{#verdict ID}}`
/// discusses it.
pub type Chapters = std::collections::BTreeMap<String, String>;

/// What a chapter's directives need to know of the other chapters.
#[derive(Debug, Default)]
pub struct Pages {
    /// Where each claim's verdict is discussed (`{{#then-and-now}}`'s links).
    pub verdicts: Chapters,
    /// Experiment -> its chapter's `## Predict` and `## Exercises`
    /// sections, from its page and sub-pages, for `{{#worksheet EXP}}`.
    pub worksheets: std::collections::BTreeMap<String, String>,
    /// Which runs the figures come from.
    pub edition: Edition,
    /// The reference's verdicts, evaluated once for the whole book.
    pub rows: std::cell::OnceCell<Vec<crate::claims::Row>>,
}

/// The sections of a chapter a worksheet prints: each `## Predict` and
/// `## Exercises`, up to the next `## ` heading, in order.
pub fn worksheet_sections(text: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with("## ") {
            let title = line[3..].trim();
            keep = title == "Predict" || title == "Exercises";
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The claim ids of the `{{#verdict ID}}` directives in `text`.
pub fn verdicts_in(text: &str) -> Vec<String> {
    text.match_indices("{{#verdict ")
        .filter_map(|(at, _)| {
            let rest = &text[at + "{{#verdict ".len()..];
            let end = rest.find("}}")?;
            Some(rest[..end].trim().to_string())
        })
        .collect()
}

/// The reference's then-and-now rows, evaluated once for the book.
fn rows<'a>(
    cache: &'a std::cell::OnceCell<Vec<crate::claims::Row>>,
    reference: &Path,
) -> Result<&'a [crate::claims::Row]> {
    if cache.get().is_none() {
        let _ = cache.set(crate::claims::evaluate(reference)?);
    }
    Ok(cache.get().expect("filled above"))
}

/// The sentence `{{#verdict ID}}` stands for.
fn verdict_sentence(row: &crate::claims::Row) -> String {
    let today = row.today_text().map_or(String::new(), |t| {
        format!(" Today: {t}, on {} (`{}`).", row.judged_on, row.results)
    });
    let rule = if row.claim.cannot.is_none() {
        format!(" The rule: {}.", row.claim.rule(&row.unit))
    } else {
        String::new()
    };
    format!(
        "<a id=\"verdict-{id}\"></a>**Verdict on \"{claim}\" ({id}): {verdict}.**{today}{rule} \
         ([All the claims](then-and-now.md#{heading}))",
        id = row.claim.id,
        heading = crate::claims::heading_id(&row.claim.id),
        claim = row.claim.claim,
        verdict = row.verdict,
    )
}

/// [`expand`], with the map of the chapters that discuss each claim (for
/// `{{#then-and-now}}`'s links).
pub fn expand_with(
    text: &str,
    reference: &Path,
    repository: Option<&str>,
    pages: &Pages,
) -> Result<String> {
    let chapters = &pages.verdicts;
    let edition = &pages.edition;
    let evaluated = &pages.rows;
    let mut out = String::with_capacity(text.len());
    // Each results file is read and parsed once per chapter.
    let mut files = std::collections::HashMap::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{#") {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let Some(end) = from.find("}}") else {
            out.push_str(from);
            return Ok(out);
        };
        let inner = &from[3..end];
        let mut words = inner.split_whitespace();
        match words.next() {
            Some("result") => {
                let file = words.next().ok_or_else(|| bad(inner))?;
                out.push_str(&edition.result(file, result(reference, file)?)?);
            }
            Some("figure") => {
                let folder = words.next().ok_or_else(|| bad(inner))?;
                let pointer = words.next().ok_or_else(|| bad(inner))?;
                let decimals = match words.next() {
                    Some(d) => Some(d.parse::<usize>().map_err(|_| bad(inner))?),
                    None => None,
                };
                let doc = results_file(&mut files, reference, folder)?;
                let book = figure(doc, pointer, decimals)?;
                out.push_str(&edition.figure(folder, pointer, decimals, book)?);
            }
            Some("verdict") => {
                let id = words.next().ok_or_else(|| bad(inner))?;
                let rows = rows(evaluated, reference)?;
                let row =
                    rows.iter().find(|r| r.claim.id == id).ok_or_else(|| {
                        Error::failed(format!(
                            "{{{{#verdict {id}}}}}: no claim {id} in claims.toml"
                        ))
                    })?;
                out.push_str(&edition.verdict(id, verdict_sentence(row))?);
            }
            Some("then-and-now") => {
                let rows = rows(evaluated, reference)?;
                let name = reference
                    .file_name()
                    .map_or("?".into(), |n| n.to_string_lossy().into_owned());
                let link = |c: &crate::claims::Claim| {
                    chapters
                        .get(&c.id)
                        .map(|page| format!("[{page}]({page}#verdict-{})", c.id))
                };
                let to_entry = |r: &crate::claims::Row| {
                    format!(
                        "[{}](#{})",
                        r.claim.claim,
                        crate::claims::heading_id(&r.claim.id)
                    )
                };
                if let Some(beside) = edition.claims_table(rows, &to_entry) {
                    out.push_str(&beside);
                    out.push_str("\nThe book's verdicts, claim by claim:\n\n");
                }
                out.push_str(&crate::claims::markdown(rows, &name, &link));
                let commits = crate::runs::commits_of(reference);
                out.push_str(&format!(
                    "\nThe reference was made from commit{} {}.\n",
                    if commits.len() == 1 { "" } else { "s" },
                    commits
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Some("headline") => {
                let folder = words.next().ok_or_else(|| bad(inner))?;
                let key = words.next().ok_or_else(|| bad(inner))?;
                let decimals = match words.next() {
                    Some(d) => d.parse::<usize>().map_err(|_| bad(inner))?,
                    None => 0,
                };
                let doc = results_file(&mut files, reference, folder)?;
                let book = headline(doc.json(), key, decimals).map_err(|e| {
                    Error::failed(format!(
                        "{{{{#{inner}}}}}: {e} in {}",
                        doc.path.display()
                    ))
                })?;
                out.push_str(&edition.headline(folder, key, decimals, book)?);
            }
            Some("findings") => {
                let rows = rows(evaluated, reference)?;
                let to_page = |r: &crate::claims::Row| match chapters
                    .get(&r.claim.id)
                {
                    Some(page) => {
                        format!("[{}]({page}#verdict-{})", r.claim.claim, r.claim.id)
                    }
                    None => r.claim.claim.clone(),
                };
                match edition.claims_table(rows, &to_page) {
                    Some(beside) => out.push_str(&beside),
                    None => out.push_str(&findings(rows, chapters)),
                }
            }
            Some("worksheet") => {
                let name = words.next().ok_or_else(|| bad(inner))?;
                let sheet = pages.worksheets.get(name).ok_or_else(|| {
                    Error::failed(format!(
                        "{{{{#worksheet {name}}}}}: no chapter {name}.md"
                    ))
                })?;
                if sheet.trim().is_empty() {
                    return Err(Error::failed(format!(
                        "{{{{#worksheet {name}}}}}: {name}.md has no `## Predict` or \
                         `## Exercises` section"
                    )));
                }
                // Its own directives too (a figure in an exercise).
                out.push_str(&expand_with(sheet, reference, repository, pages)?);
            }
            Some("rests-on") => {
                const CLOSE: &str = "{{/rests-on}}";
                let condition = inner["rests-on".len()..].trim();
                let body = &from[end + 2..];
                let close = body.find(CLOSE).ok_or_else(|| {
                    Error::failed(format!("{{{{#{inner}}}}} has no {CLOSE}"))
                })?;
                let sentence = &body[..close];
                if sentence.contains("\n\n") || sentence.contains("{{#rests-on") {
                    return Err(Error::failed(format!(
                        "{{{{#{inner}}}}}: its text runs over a paragraph, or holds \
                         another rests-on"
                    )));
                }
                let text = expand_with(sentence, reference, repository, pages)?;
                let rows = rows(evaluated, reference)?;
                out.push_str(&edition.rests_on(condition, text, reference, rows)?);
                rest = &body[close + CLOSE.len()..];
                continue;
            }
            Some("repository") => out.push_str(repository.unwrap_or(NO_REPOSITORY)),
            Some("chart-key") => out.push_str(&crate::chart::key_svg()),
            // {{#include}} and the like are mdBook's own.
            _ => out.push_str(&from[..end + 2]),
        }
        rest = &from[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Every directive of `text`, in order: where it starts (a byte offset)
/// and what its braces hold, `figure demo /n 2` of `{{#figure demo /n 2}}`
/// ([`expand_with`] finds them the same way; the directives in a
/// `{{#rests-on}}` sentence are listed too). A `{{#` with no `}}` ends the
/// list.
pub fn directives(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(start) = text[at..].find("{{#").map(|s| at + s) {
        let Some(end) = text[start..].find("}}").map(|e| start + e) else { break };
        out.push((start, &text[start + 3..end]));
        at = end + 2;
    }
    out
}

/// `{{#headline EXP KEY DECIMALS}}`: a headline figure of a results file
/// with its unit and 95% interval, e.g. `114 µs (95% interval 110 to
/// 127)`; an exact count has no interval.
pub(crate) fn headline(
    json: &Value,
    key: &str,
    decimals: usize,
) -> std::result::Result<String, String> {
    let h = json
        .get("headline")
        .and_then(|h| h.get(key))
        .ok_or_else(|| format!("no headline figure '{key}'"))?;
    let number = |v: &Value| v.as_f64().map(|x| format!("{x:.decimals$}"));
    let value =
        h.get("value").and_then(number).ok_or("its value is not a number")?;
    let unit = h.get("unit").and_then(Value::as_str).unwrap_or("");
    let with_unit = |v: String| match unit {
        "" => v,
        "x" => format!("{v}x"),
        u => format!("{v} {u}"),
    };
    let bounds = h
        .get("interval")
        .and_then(Value::as_array)
        .and_then(|i| Some((i.first()?.as_f64()?, i.get(1)?.as_f64()?)));
    let exact = h.get("method").and_then(Value::as_str) == Some("exact");
    Ok(match bounds {
        _ if exact => with_unit(value),
        // Every round gave the same figure.
        Some((lo, hi)) if lo == hi => format!("{} (every round)", with_unit(value)),
        Some((lo, hi)) => {
            // Enough digits that the two ends read apart.
            let digits = (decimals..=decimals + 3)
                .find(|&d| format!("{lo:.d$}") != format!("{hi:.d$}"))
                .unwrap_or(decimals + 3);
            format!(
                "{} (95% interval {lo:.digits$} to {hi:.digits$})",
                with_unit(value)
            )
        }
        None => format!("{} (no interval: too few rounds)", with_unit(value)),
    })
}

/// `{{#findings}}`: one line per claim: what the article said, today's
/// figure with its interval, and the verdict, each claim linked to the
/// chapter that discusses it.
fn findings(rows: &[crate::claims::Row], chapters: &Chapters) -> String {
    let mut md =
        String::from("| claim | then | today | verdict |\n|---|---|---|---|\n");
    for r in rows {
        let claim = match chapters.get(&r.claim.id) {
            Some(page) => {
                format!("[{}]({page}#verdict-{})", r.claim.claim, r.claim.id)
            }
            None => r.claim.claim.clone(),
        };
        let today = r.today_text().unwrap_or_else(|| "-".into());
        md.push_str(&format!(
            "| {} | {} | {} | **{}**{} |\n",
            crate::claims::cell(&claim),
            crate::claims::cell(&r.claim.then),
            crate::claims::cell(&today),
            crate::claims::cell(r.verdict.word()),
            if r.busy.is_some() { " (*busy*)" } else { "" }
        ));
    }
    md
}

fn bad(directive: &str) -> Error {
    Error::failed(format!("malformed directive {{{{#{directive}}}}}"))
}

fn result(reference: &Path, file: &str) -> Result<String> {
    if file.split('/').any(|part| part == "..") {
        return Err(Error::failed(format!(
            "{{{{#result {file}}}}}: no '..' allowed"
        )));
    }
    let path = reference.join(file);
    std::fs::read_to_string(&path).map_err(|e| Error::io(path.display(), e))
}

/// The results file `EXP[/SUB]/EXP.json` of the reference, read (once).
fn results_file<'a>(
    files: &'a mut std::collections::HashMap<PathBuf, Document>,
    reference: &Path,
    folder: &str,
) -> Result<&'a Document> {
    let path = crate::document::file_of(reference, folder);
    if !files.contains_key(&path) {
        let doc = Document::read(&path)?.ok_or_else(|| {
            Error::io(
                path.display(),
                std::io::Error::from_raw_os_error(libc::ENOENT),
            )
        })?;
        files.insert(path.clone(), doc);
    }
    Ok(&files[&path])
}

fn figure(doc: &Document, pointer: &str, decimals: Option<usize>) -> Result<String> {
    let value = doc
        .at(pointer)
        .map_err(|e| Error::failed(format!("{}: {e}", doc.path.display())))?;
    // An interval, `/headline/KEY/interval`, prints as "1.55 to 1.90"; a
    // figure the run could not give (a ratio over nothing) as "-".
    Ok(crate::edition::show_value(value, decimals))
}

/// The value at a path in a JSON value, array elements named by their
/// settings ([`crate::document::select`]); into a results file, a pointer
/// starts where its first step says ([`crate::document::resolve`]).
pub use crate::document::{Step, picks, select, steps};

/// The reference folder for the book at `root` (the folder of book.toml).
pub fn reference_for(root: &Path) -> Result<PathBuf> {
    let results = root.join("../results");
    crate::runs::reference_in(&results).ok_or_else(|| {
        Error::failed(format!("no reference run in {}", results.display()))
    })
}

/// Walk mdBook's JSON book and expand every chapter's content.
pub fn expand_book(
    book: &mut Value,
    reference: &Path,
    repository: Option<&str>,
) -> Result<()> {
    expand_edition(book, reference, repository, Edition::Reference)
}

/// [`expand_book`], for `edition`: each chapter opens on what it is
/// rendered from ([`Edition::open_chapter`]).
pub fn expand_edition(
    book: &mut Value,
    reference: &Path,
    repository: Option<&str>,
    edition: Edition,
) -> Result<()> {
    let mut pages = Pages { edition, ..Pages::default() };
    find_verdicts(book, &mut pages.verdicts);
    find_worksheets(book, &mut pages.worksheets);
    expand_chapters(book, reference, repository, &pages)
}

/// Each chapter's worksheet ([`worksheet_sections`]): from its page and
/// every sub-page under it, keyed by the page's file stem.
fn find_worksheets(
    book: &Value,
    sheets: &mut std::collections::BTreeMap<String, String>,
) {
    fn all_text(chapter: &serde_json::Map<String, Value>, out: &mut String) {
        if let Some(content) = chapter.get("content").and_then(Value::as_str) {
            out.push_str(&worksheet_sections(content));
        }
        for item in
            chapter.get("sub_items").and_then(Value::as_array).into_iter().flatten()
        {
            if let Some(Value::Object(sub)) = item.get("Chapter") {
                all_text(sub, out);
            }
        }
    }
    match book {
        Value::Object(map) => {
            if let Some(Value::Object(chapter)) = map.get("Chapter") {
                let stem = chapter
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(|p| p.strip_suffix(".md"));
                if let Some(stem) = stem {
                    let mut text = String::new();
                    all_text(chapter, &mut text);
                    sheets.entry(stem.to_string()).or_insert(text);
                }
            }
            map.values().for_each(|v| find_worksheets(v, sheets));
        }
        Value::Array(items) => items.iter().for_each(|v| find_worksheets(v, sheets)),
        _ => {}
    }
}

/// Which chapter holds each claim's `{{#verdict ID}}`.
fn find_verdicts(book: &Value, chapters: &mut Chapters) {
    match book {
        Value::Object(map) => {
            if let Some(Value::Object(chapter)) = map.get("Chapter") {
                let path = chapter.get("path").and_then(Value::as_str);
                let content = chapter.get("content").and_then(Value::as_str);
                if let (Some(path), Some(content)) = (path, content) {
                    for id in verdicts_in(content) {
                        chapters.entry(id).or_insert_with(|| path.to_string());
                    }
                }
            }
            map.values().for_each(|v| find_verdicts(v, chapters));
        }
        Value::Array(items) => items.iter().for_each(|v| find_verdicts(v, chapters)),
        _ => {}
    }
}

fn expand_chapters(
    book: &mut Value,
    reference: &Path,
    repository: Option<&str>,
    pages: &Pages,
) -> Result<()> {
    match book {
        Value::Object(map) => {
            if let Some(Value::Object(chapter)) = map.get_mut("Chapter") {
                let name =
                    chapter.get("name").and_then(Value::as_str).unwrap_or("?");
                let name = name.to_string();
                let stem = chapter
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(|p| p.strip_suffix(".md"))
                    .unwrap_or("")
                    .to_string();
                if let Some(Value::String(content)) = chapter.get_mut("content") {
                    let failed =
                        |e: Error| Error::failed(format!("chapter '{name}': {e}"));
                    let text = expand_with(content, reference, repository, pages)
                        .map_err(failed)?;
                    *content = pages
                        .edition
                        .open_chapter(&stem, text, reference)
                        .map_err(failed)?;
                }
            }
            for v in map.values_mut() {
                expand_chapters(v, reference, repository, pages)?;
            }
        }
        Value::Array(items) => {
            for v in items {
                expand_chapters(v, reference, repository, pages)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The web address of a git remote: `git@github.com:o/r.git` and
/// `https://github.com/o/r.git` both give `https://github.com/o/r`. `None`
/// for a remote that is not on a web host (a local path, a file URL).
pub fn web_url(remote: &str) -> Option<String> {
    let remote = remote.trim();
    let path = if let Some(rest) = remote.strip_prefix("https://") {
        rest.to_string()
    } else if let Some(rest) = remote.strip_prefix("ssh://git@") {
        rest.to_string()
    } else if let Some(rest) = remote.strip_prefix("git@") {
        rest.replacen(':', "/", 1)
    } else {
        return None;
    };
    let path = path.strip_suffix(".git").unwrap_or(&path).trim_end_matches('/');
    let (host, repo) = path.split_once('/')?;
    if host.is_empty() || repo.is_empty() || host.contains('@') {
        return None;
    }
    Some(format!("https://{host}/{repo}"))
}

/// The page-editing address template mdBook takes (`{path}` is the page),
/// for the hosts whose edit address is known.
pub fn edit_url_template(web: &str) -> Option<String> {
    let host = web.strip_prefix("https://")?.split('/').next()?;
    match host {
        "github.com" => Some(format!("{web}/edit/main/book/{{path}}")),
        "gitlab.com" => Some(format!("{web}/-/edit/main/book/{{path}}")),
        _ => None,
    }
}

/// The web address of the checkout's `origin` remote, if it has one.
pub fn repository() -> Option<String> {
    let remote = ["remote", "get-url", "origin"];
    crate::machine::git(&crate::checkout::root(), &remote).and_then(|r| web_url(&r))
}

/// The book's two addresses for `book/build`, one a line: the web address
/// of the checkout's `origin` remote and its page-editing template; an
/// empty line for each it does not have.
fn addresses() -> String {
    let web = repository();
    let edit = web.as_deref().and_then(edit_url_template);
    format!("{}\n{}\n", web.unwrap_or_default(), edit.unwrap_or_default())
}

/// The preprocessor's protocol: `mdbook-lab supports RENDERER` answers yes;
/// otherwise read `[context, book]` on stdin and write the book on stdout.
/// `mdbook-lab addresses` prints the checkout's addresses for `book/build`
/// ([`addresses`]).
pub fn main(args: Vec<String>) -> Result<()> {
    match args.get(1).map(String::as_str) {
        Some("supports") => return Ok(()),
        Some("addresses") => return labkit::error::print(&addresses()),
        _ => {}
    }
    let input: Value = serde_json::from_reader(std::io::stdin())
        .map_err(|e| Error::failed(format!("cannot read mdBook's input: {e}")))?;
    let Value::Array(mut parts) = input else {
        return Err(Error::failed("mdBook's input is not [context, book]"));
    };
    if parts.len() != 2 {
        return Err(Error::failed("mdBook's input is not [context, book]"));
    }
    let mut book = parts.pop().expect("two parts");
    let root = parts[0]
        .get("root")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::failed("mdBook's context has no root"))?;
    let reference = reference_for(Path::new(root))?;
    let repository = parts[0]
        .pointer("/config/output/html/git-repository-url")
        .and_then(Value::as_str);
    expand_book(&mut book, &reference, repository)?;
    let text = serde_json::to_string(&book)
        .map_err(|e| Error::failed(format!("cannot encode the book: {e}")))?;
    labkit::error::print(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> labkit::cleanup::TempDir {
        let dir = labtest::tempdir();
        let exp = dir.path().join("demo");
        std::fs::create_dir_all(exp.join("cpu0")).unwrap();
        std::fs::write(exp.join("tables.md"), "| a |\n").unwrap();
        std::fs::write(
            exp.join("demo.json"),
            r#"{"headline": {"x": {"value": 1.23456, "interval": [1.1, 1.456]}}, "name": "plain", "none": null}"#,
        )
        .unwrap();
        std::fs::write(exp.join("cpu0/demo.json"), r#"{"n": 7}"#).unwrap();
        dir
    }

    #[test]
    fn directives_expand_from_the_reference() {
        let r = reference();
        let text = "T {{#result demo/tables.md}} f={{#figure demo /headline/x/value 2}} \
                    n={{#figure demo/cpu0 /n}} s={{#figure demo /name}} \
                    z={{#figure demo /none 2}} i={{#figure demo /headline/x/interval 2}} \
                    {{#include other.md}}";
        let got = expand(text, r.path(), None).unwrap();
        assert_eq!(
            got,
            "T | a |\n f=1.23 n=7 s=plain z=- i=1.10 to 1.46 {{#include other.md}}"
        );
    }

    #[test]
    fn a_headline_prints_its_unit_and_interval_with_digits_enough_to_read_apart() {
        let json: Value = serde_json::from_str(
            r#"{"headline": {
                "t": {"value": 58.42, "unit": "µs", "interval": [51.06, 160.2], "method": "median"},
                "r": {"value": 1.4018, "unit": "x", "interval": [1.2857, 1.468], "method": "paired-ratio"},
                "n": {"value": 383.0, "unit": "", "interval": [383.0, 383.0], "method": "median"},
                "p": {"value": 8.31, "unit": "KiB", "interval": [8.302, 8.318], "method": "median"},
                "b": {"value": 65536.0, "unit": "bytes", "interval": [65536.0, 65536.0], "method": "exact"},
                "few": {"value": 2.0, "unit": "x", "interval": null, "method": "median"}
            }}"#,
        )
        .unwrap();
        let h = |key, d| headline(&json, key, d).unwrap();
        assert_eq!(h("t", 0), "58 µs (95% interval 51 to 160)");
        assert_eq!(h("r", 2), "1.40x (95% interval 1.29 to 1.47)");
        assert_eq!(h("n", 0), "383 (every round)");
        // 8.3 to 8.3 would read as one value: one more digit.
        assert_eq!(h("p", 1), "8.3 KiB (95% interval 8.30 to 8.32)");
        assert_eq!(h("b", 0), "65536 bytes");
        assert_eq!(h("few", 1), "2.0x (no interval: too few rounds)");
        assert!(headline(&json, "nope", 0).unwrap_err().contains("nope"));
    }

    #[test]
    fn a_worksheet_takes_the_predict_and_exercises_sections_only() {
        let text = "# T\n\nIntro.\n\n## Predict\n\n1. Guess.\n\n## Run\n\n```sh\n## not a heading\nlab run x\n```\n\n\
                    ## Exercises\n\n1. Do.\n\n```sh\n## still code\n```\n\n## Quiz\n\n1. Q.\n";
        let sheet = worksheet_sections(text);
        assert!(
            sheet.starts_with("## Predict\n") && sheet.contains("1. Guess."),
            "{sheet}"
        );
        assert!(
            sheet.contains("## Exercises") && sheet.contains("## still code"),
            "{sheet}"
        );
        assert!(
            !sheet.contains("lab run x")
                && !sheet.contains("Q.")
                && !sheet.contains("Intro"),
            "{sheet}"
        );
    }

    #[test]
    fn the_chart_key_lists_every_meaning_in_its_colour() {
        let r = reference();
        let key = expand("{{#chart-key}}", r.path(), None).unwrap();
        assert!(key.starts_with("<svg") && key.contains("class=\"lab-chart\""));
        assert!(!key.contains("\n\n"), "one HTML block");
        for m in crate::chart::Meaning::ALL {
            let name = crate::chart::escape(m.name());
            assert!(key.contains(&format!(">{name}</text>")), "{m:?} has no row");
            assert!(key.contains(m.colour()), "{m:?} is not drawn in its colour");
        }
    }

    #[test]
    fn the_repository_is_the_books_address_or_says_it_has_none() {
        let r = reference();
        let url = "https://github.com/o/r";
        assert_eq!(expand("{{#repository}}", r.path(), Some(url)).unwrap(), url);
        assert_eq!(
            expand("{{#repository}}", r.path(), None).unwrap(),
            NO_REPOSITORY
        );
    }

    #[test]
    fn remotes_become_web_addresses_and_local_ones_none() {
        let want = Some("https://github.com/o/r".to_string());
        assert_eq!(web_url("git@github.com:o/r.git\n"), want);
        assert_eq!(web_url("https://github.com/o/r.git"), want);
        assert_eq!(web_url("https://github.com/o/r/"), want);
        assert_eq!(web_url("ssh://git@github.com/o/r.git"), want);
        assert_eq!(web_url("/work/main"), None);
        assert_eq!(web_url("file:///work/main"), None);
        assert_eq!(web_url("https://github.com"), None);
        let edit = edit_url_template("https://github.com/o/r").unwrap();
        assert_eq!(edit, "https://github.com/o/r/edit/main/book/{path}");
        assert!(edit_url_template("https://example.org/o/r").is_none());
    }

    #[test]
    fn array_steps_name_the_element_by_its_setting() {
        let json = serde_json::json!({"points": [
            {"block_bytes": 4096, "mode": "fork + _exit", "v": 1, "runs": [5, 6],
             "at": {"cpu": 0}},
            {"block_bytes": 8192, "mode": "fork + _exit", "v": 2, "runs": [7]},
            {"block_bytes": 8192, "mode": "thread", "v": 3, "runs": []},
        ]});
        let at = |p: &str| select(&json, p).map(|v| v.to_string());
        assert_eq!(at("/points[block_bytes=4096]/v").unwrap(), "1");
        assert_eq!(at("/points[block_bytes=8192,mode=thread]/v").unwrap(), "3");
        assert_eq!(at("/points[mode=fork-exit,block_bytes=8192]/v").unwrap(), "2");
        assert_eq!(at("/points[block_bytes=4096]/runs[round=2]").unwrap(), "6");
        assert_eq!(at("/points[at.cpu=0]/v").unwrap(), "1");
        let refused = [
            ("/points/0/v", "is a position in an array"),
            ("/points[block_bytes=8192]/v", "more than one element"),
            ("/points[block_bytes=1]/v", "no element has block_bytes=1"),
            ("/points[block_bytes=4096]/runs[round=3]", "there are 2 rounds"),
            ("/points[block_bytes=4096/v", "no closing ]"),
            ("/points[4096]/v", "is not field=value"),
            ("/points[block_bytes=4096]/w", "no value at"),
        ];
        for (path, says) in refused {
            let err = at(path).unwrap_err();
            assert!(err.contains(says), "{path}: {err}");
        }
    }

    #[test]
    fn a_missing_file_or_pointer_fails_the_build() {
        let r = reference();
        let err = expand("{{#figure demo /nope}}", r.path(), None).unwrap_err();
        assert!(err.message.contains("no value at /nope"), "{err}");
        assert!(expand("{{#result demo/none.md}}", r.path(), None).is_err());
        assert!(expand("{{#result ../etc/passwd}}", r.path(), None).is_err());
        assert!(expand("{{#figure demo}}", r.path(), None).is_err());
    }

    #[test]
    fn the_book_json_is_walked_into_sub_chapters() {
        let r = reference();
        let mut book = serde_json::json!({"items": [{"Chapter": {
            "name": "a", "content": "{{#figure demo /name}}",
            "sub_items": [{"Chapter": {"name": "b",
                "content": "{{#figure demo/cpu0 /n}}", "sub_items": []}}]
        }}, "Separator"]});
        expand_book(&mut book, r.path(), None).unwrap();
        let sub = &book["items"][0]["Chapter"]["sub_items"][0]["Chapter"]["content"];
        assert_eq!(sub, "7");
        assert_eq!(book["items"][0]["Chapter"]["content"], "plain");
    }
}
