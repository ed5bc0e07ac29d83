//! The book's listings: mdBook prints an error for an `{{#include}}` of a
//! file that is not there and still succeeds, and an anchor that is not
//! there gives an empty listing without a word. Code moves between files as
//! the lab grows, so every include is checked here: its file exists, its
//! anchor is opened and closed exactly once, and what it includes is not
//! empty.

use std::path::{Path, PathBuf};

/// Every `{{#include PATH[:ANCHOR|:FROM:TO]}}` in the chapters: chapter,
/// path (relative to the chapter) and the part after the colon.
fn includes(book: &Path) -> Vec<(String, String, Option<String>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(book).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let chapter = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("{{#include ") {
            let from = &rest[start + "{{#include ".len()..];
            let end = from.find("}}").expect("an include is closed with }}");
            let target = from[..end].trim();
            let (file, part) = match target.split_once(':') {
                Some((file, part)) => (file, Some(part.to_string())),
                None => (target, None),
            };
            found.push((chapter.clone(), file.to_string(), part));
            rest = &from[end..];
        }
    }
    found.sort();
    found
}

/// The lines an anchor encloses, as mdBook finds them.
fn anchored<'a>(text: &'a str, anchor: &str) -> Result<Vec<&'a str>, String> {
    let is = |line: &str, what: &str| {
        line.split_once(what).is_some_and(|(_, name)| {
            name.trim().trim_end_matches("*/").trim() == anchor
        })
    };
    // The numbers of the lines that name the anchor after `what`.
    let marks = |what: &str| -> Vec<usize> {
        let lines = text.lines().enumerate();
        lines.filter(|(_, l)| is(l, what)).map(|(i, _)| i).collect()
    };
    let (opens, closes) = (marks("ANCHOR:"), marks("ANCHOR_END:"));
    match (opens.as_slice(), closes.as_slice()) {
        ([open], [close]) if open < close => Ok(text
            .lines()
            .skip(open + 1)
            .take(close - open - 1)
            .filter(|l| !l.contains("ANCHOR"))
            .collect()),
        _ => Err(format!(
            "anchor '{anchor}' opened {} and closed {} times",
            opens.len(),
            closes.len()
        )),
    }
}

#[test]
fn every_listing_names_a_file_and_anchor_that_exist() {
    let book = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let all = includes(&book);
    assert!(all.len() > 50, "the book's listings were not found: {all:?}");
    let mut bad = Vec::new();
    for (chapter, file, part) in &all {
        let path = book.join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            bad.push(format!("{chapter}: {file}: no such file"));
            continue;
        };
        let lines = match part.as_deref() {
            None => Ok(text.lines().collect()),
            Some(range) if range.split(':').all(|n| n.parse::<usize>().is_ok()) => {
                let n: Vec<usize> =
                    range.split(':').map(|n| n.parse().unwrap()).collect();
                let (from, to) =
                    (n[0].max(1), n.get(1).copied().unwrap_or(usize::MAX));
                Ok(text
                    .lines()
                    .skip(from - 1)
                    .take(to + 1 - from)
                    .collect::<Vec<_>>())
            }
            Some(anchor) => anchored(&text, anchor),
        };
        match lines {
            Ok(lines) if lines.iter().all(|l| l.trim().is_empty()) => {
                bad.push(format!(
                    "{chapter}: {file}:{}: empty",
                    part.as_deref().unwrap_or("")
                ))
            }
            Ok(_) => {}
            Err(why) => bad.push(format!("{chapter}: {file}: {why}")),
        }
    }
    assert!(bad.is_empty(), "broken listings:\n{}", bad.join("\n"));
}

#[test]
fn a_missing_anchor_or_an_unclosed_one_is_caught() {
    let text = "a\n// ANCHOR: x\nfn x() {}\n// ANCHOR_END: x\n/* ANCHOR: y */\n";
    assert_eq!(anchored(text, "x").unwrap(), ["fn x() {}"]);
    assert!(anchored(text, "y").is_err(), "opened, never closed");
    assert!(anchored(text, "z").is_err(), "not there");
}

/// Every chapter of the book, name and text.
fn chapters() -> Vec<(String, String)> {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&book)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    found.sort();
    found
}

/// Copy the reference folder `from` into `to`, each results file with one
/// more point in every list of settings: a copy of its first element, with
/// every setting changed, put first (where a quote by position would take
/// it). The rounds of a setting (`runs`, and thread-limits' `pthread` and
/// `std` tries) are no settings: a round is named by its number.
fn copy_with_an_extra_point(from: &Path, to: &Path) {
    fn changed(v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(format!("{s} extra")),
            Value::Number(n) => {
                serde_json::json!(n.as_f64().unwrap_or(0.0) + 1e9 + 0.5)
            }
            Value::Object(map) => Value::Object(
                map.iter().map(|(k, v)| (k.clone(), changed(v))).collect(),
            ),
            other => other.clone(),
        }
    }
    fn grow(v: &mut serde_json::Value, key: &str) {
        use serde_json::Value;
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    grow(child, k);
                }
            }
            Value::Array(items) => {
                for child in items.iter_mut() {
                    grow(child, "");
                }
                let rounds = ["runs", "pthread", "std"].contains(&key);
                if let Some(first @ Value::Object(_)) = items.first().cloned()
                    && !rounds
                {
                    items.insert(0, changed(&first));
                }
            }
            _ => {}
        }
    }
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (path, into) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            copy_with_an_extra_point(&path, &into);
        } else if path.extension().is_some_and(|e| e == "json") {
            let mut json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                    .unwrap();
            grow(&mut json, "");
            std::fs::write(&into, json.to_string()).unwrap();
        } else {
            std::fs::copy(&path, &into).unwrap();
        }
    }
}

#[test]
fn figures_are_named_by_setting_so_an_extra_point_changes_none() {
    let reference = lab::runs::reference().expect("a reference run in results/");
    let scratch = labkit::testing::tempdir();
    // Under the reference's own name, which the then-and-now page gives.
    let grown = scratch.path().join(reference.file_name().unwrap());
    std::fs::create_dir(&grown).unwrap();
    copy_with_an_extra_point(&reference, &grown);
    let mut quoted = 0;
    for (name, text) in chapters() {
        quoted += text.matches("{{#figure ").count();
        let want = lab::book::expand(&text, &reference, None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = lab::book::expand(&text, &grown, None)
            .unwrap_or_else(|e| panic!("{name}, with an extra point: {e}"));
        assert!(
            want == got,
            "{name}: an extra point changed what the chapter quotes"
        );
    }
    assert!(quoted > 200, "{quoted} figures quoted");
}

#[test]
fn no_chapter_quotes_a_figure_by_its_position() {
    for (name, text) in chapters() {
        for quote in text.split("{{#figure ").skip(1) {
            let path = quote.split_whitespace().nth(1).unwrap_or("");
            let positional = path.split('/').any(|s| s.parse::<usize>().is_ok());
            assert!(
                !positional,
                "{name}: {path} names an array element by position"
            );
        }
    }
}

/// Every claim's verdict is quoted by exactly one chapter, through
/// `{{#verdict ID}}` (so that prose and table come from one evaluation),
/// and no chapter quotes a claim that does not exist.
#[test]
fn every_claim_has_one_verdict_directive_in_the_book() {
    let mut quoted: Vec<(String, String)> = Vec::new();
    for (name, text) in chapters() {
        for id in lab::book::verdicts_in(&text) {
            quoted.push((id, name.clone()));
        }
    }
    for claim in lab::claims::all() {
        let at: Vec<&String> = quoted
            .iter()
            .filter(|(id, _)| *id == claim.id)
            .map(|(_, c)| c)
            .collect();
        assert_eq!(at.len(), 1, "{}: quoted by {at:?}", claim.id);
    }
    for (id, chapter) in &quoted {
        assert!(
            lab::claims::all().iter().any(|c| &c.id == id),
            "{chapter}: no claim {id}"
        );
    }
}

/// Each experiment's pages in the book's order: its chapter, then the
/// sub-pages SUMMARY.md lists under it.
fn experiment_pages() -> Vec<(String, Vec<String>)> {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let summary = std::fs::read_to_string(book.join("SUMMARY.md")).unwrap();
    let page = |line: &str| {
        let target = line.split("](").nth(1)?;
        target.strip_suffix(".md)").map(str::to_string)
    };
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in summary.lines() {
        if let Some(rest) = line.strip_prefix("- [") {
            let name = page(rest).unwrap();
            let is_experiment = lab::experiments::ALL.iter().any(|e| e.name == name);
            if is_experiment {
                out.push((name.clone(), vec![name]));
            } else {
                break;
            }
        } else if let (Some(sub), Some(last)) =
            (line.strip_prefix("  - [").and_then(page), out.last_mut())
        {
            last.1.push(sub);
        }
    }
    out
}

/// A teacher puts a program's heart on one slide: every experiment's first
/// listing is a loop of the tested source, taken by anchor and at most
/// about 40 lines long; where it stands in a side-by-side block, the C it
/// mirrors stands beside it, by anchor too.
#[test]
fn each_experiments_first_listing_is_a_slide_sized_loop_beside_its_c() {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let pages = experiment_pages();
    assert_eq!(pages.len(), lab::experiments::ALL.len(), "{pages:?}");
    let mut side_by_side = 0;
    for (name, pages) in &pages {
        let (page, text, at) = pages
            .iter()
            .find_map(|p| {
                let text =
                    std::fs::read_to_string(book.join(format!("{p}.md"))).ok()?;
                let at = text.find("{{#include ")?;
                Some((p.clone(), text, at))
            })
            .unwrap_or_else(|| panic!("{name}: no listing on any of its pages"));
        let target = &text[at + "{{#include ".len()..];
        let target = target[..target.find("}}").unwrap()].trim();
        let (file, anchor) = target.split_once(':').unwrap_or_else(|| {
            panic!("{page}: first listing {target} has no anchor")
        });
        assert!(
            anchor.parse::<usize>().is_err(),
            "{page}: first listing {target} is a line range, not an anchor"
        );
        let source = std::fs::read_to_string(book.join(file)).unwrap();
        let lines = anchored(&source, anchor).unwrap();
        assert!(
            (1..=45).contains(&lines.len()),
            "{page}: first listing {target} has {} lines, not a slide's",
            lines.len()
        );
        // The block it stands in, if it is a side-by-side one.
        let open = text[..at].rfind("<div class=\"side-by-side\">");
        let closed =
            open.is_some_and(|o| text[o..at].matches("</div>").count() >= 2);
        if let Some(o) = open.filter(|_| !closed) {
            side_by_side += 1;
            let block = &text[o..];
            let block = &block[..block.find("</div>\n</div>").unwrap()];
            let c = block
                .split("{{#include ")
                .skip(1)
                .map(|i| i[..i.find("}}").unwrap()].trim())
                .find(|i| i.contains("/c/") && i.contains(".c:"))
                .unwrap_or_else(|| panic!("{page}: side-by-side without its C"));
            let (file, anchor) = c.split_once(':').unwrap();
            let source = std::fs::read_to_string(book.join(file)).unwrap();
            assert!(!anchored(&source, anchor).unwrap().is_empty(), "{page}: {c}");
        }
    }
    // fork-vs-thread, thread-limits, create-destroy and pipe-speed have a
    // C twin to set beside their loop.
    assert!(side_by_side >= 4, "{side_by_side} listings beside their C");
}
