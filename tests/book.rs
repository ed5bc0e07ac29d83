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
