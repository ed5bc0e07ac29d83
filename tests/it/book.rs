//! The book's listings: mdBook prints an error for an `{{#include}}` of a
//! file that is not there and still succeeds, and an anchor that is not
//! there gives an empty listing without a word. Code moves between files as
//! the lab grows, so every include is checked here: its file exists, its
//! anchor is opened and closed exactly once, and what it includes is not
//! empty.

use std::path::{Path, PathBuf};

use crate::common;

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
    assert!(all.len() > 30, "the book's listings were not found: {all:?}");
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
    let scratch = labtest::tempdir();
    // Under the reference's own name, which the then-and-now page gives.
    let grown = scratch.path().join(reference.file_name().unwrap());
    std::fs::create_dir(&grown).unwrap();
    copy_with_an_extra_point(&reference, &grown);
    let mut quoted = 0;
    // Each run's verdicts are evaluated once for the whole book, as the
    // preprocessor does ([`lab::book::Pages`]), not once per chapter.
    let (theirs, ours) = (lab::book::Pages::default(), lab::book::Pages::default());
    // A worksheet quotes its chapter's sections, checked there.
    for (name, text) in
        chapters().into_iter().filter(|(_, t)| !t.contains("{{#worksheet "))
    {
        quoted += text.matches("{{#figure ").count();
        let want = lab::book::expand_with(&text, &reference, None, &theirs)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = lab::book::expand_with(&text, &grown, None, &ours)
            .unwrap_or_else(|e| panic!("{name}, with an extra point: {e}"));
        assert!(
            want == got,
            "{name}: an extra point changed what the chapter quotes"
        );
    }
    assert!(quoted > 200, "{quoted} figures quoted");
}

/// Copy run folder `from` (of schema 3) to `to`, each results file
/// written in the shape files had before schema 3: the header's fields,
/// `headline` and the experiment's data side by side at the top, no
/// `schema` and no observations.
fn copy_in_older_shape(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (path, into) = (entry.path(), to.join(entry.file_name()));
        let name = entry.file_name().into_string().unwrap();
        if path.is_dir() {
            copy_in_older_shape(&path, &into);
        } else if name.ends_with(".json")
            && !name.starts_with("then-and-now")
            && name != "run.json"
        {
            let json: serde_json::Value =
                labtest::json(&std::fs::read(&path).unwrap());
            assert_eq!(json["schema"], 3, "{path:?}: the reference is of schema 3");
            let mut older = serde_json::Map::new();
            for part in ["header", "data"] {
                for (k, v) in json[part].as_object().unwrap() {
                    older.insert(k.clone(), v.clone());
                }
            }
            older.insert("headline".into(), json["headline"].clone());
            std::fs::write(&into, serde_json::Value::Object(older).to_string())
                .unwrap();
        } else {
            std::fs::copy(&path, &into).unwrap();
        }
    }
}

#[test]
fn every_pointer_of_the_book_reads_the_same_in_schema_3() {
    let reference = lab::runs::reference().expect("a reference run in results/");
    let scratch = labtest::tempdir();
    let nested = scratch.path().join(reference.file_name().unwrap());
    copy_in_older_shape(&reference, &nested);
    let file = nested.join("fork-vs-thread/fork-vs-thread.json");
    let doc = lab::document::Document::read(&file).unwrap().unwrap();
    assert_eq!(doc.written, None, "written in the older shape");
    // Every directive that reads a pointer, of every chapter, each a
    // paragraph of its own: expanded once on each copy.
    let mut directives = Vec::new();
    for (_, text) in chapters() {
        for (open, close) in [
            ("{{#figure ", "}}"),
            ("{{#headline ", "}}"),
            ("{{#rests-on ", "{{/rests-on}}"),
        ] {
            for (at, _) in text.match_indices(open) {
                let end = at + text[at..].find(close).unwrap() + close.len();
                directives.push(text[at..end].to_string());
            }
        }
    }
    assert!(directives.len() > 300, "{} directives", directives.len());
    let text = directives.join("\n\n");
    let want = lab::book::expand(&text, &reference, None).unwrap();
    let got = lab::book::expand(&text, &nested, None).unwrap();
    for (w, g) in want.split("\n\n").zip(got.split("\n\n")) {
        assert_eq!(w, g, "the older shape changed what the book quotes");
    }
    assert_eq!(want, got);
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
    let stem = |page: &String| page.trim_end_matches(".md").to_string();
    main_path()
        .1
        .into_iter()
        .map(|(name, pages)| (name, pages.iter().map(stem).collect()))
        .collect()
}

/// The code spans `` `## …` `` of CONTRIBUTING.md's text from `lead` up to
/// the next `.` or `;`.
fn headings_named(guide: &str, lead: &str) -> Vec<String> {
    let at = guide
        .find(lead)
        .unwrap_or_else(|| panic!("CONTRIBUTING.md no longer says \"{lead}\""));
    let rest = &guide[at + lead.len()..];
    let end = rest.find(['.', ';']).unwrap_or(rest.len());
    let spans = rest[..end].split('`').skip(1).step_by(2);
    spans.filter(|s| s.starts_with("## ")).map(String::from).collect()
}

/// What CONTRIBUTING.md's step 4 says a chapter has, every chapter has:
/// its sections in that order, its exercises and quiz on it or a
/// sub-page, an answers page and a worksheet in SUMMARY.md, a link to its
/// session in teaching.md, and a row in the README's and the methodology
/// page's tables of experiments. So CONTRIBUTING.md's text is checked: a
/// chapter that strays from it, or it from the chapters, fails here.
#[test]
fn every_chapter_has_what_contributing_says_a_chapter_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    let ordered =
        headings_named(&guide, "the sections every chapter has, in this order:");
    let anywhere = headings_named(&guide, "on it or one of its sub-pages:");
    assert!(ordered.len() >= 4 && anywhere.len() >= 2, "{ordered:?} {anywhere:?}");
    let read = |page: &str| std::fs::read_to_string(book_src().join(page)).unwrap();
    let summary = read("SUMMARY.md");
    let teaching = read("teaching.md");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let methodology = read("methodology.md");
    let experiments = experiment_pages();
    assert_eq!(experiments.len(), lab::experiments::ALL.len(), "{experiments:?}");
    let mut wrong = Vec::new();
    for (name, pages) in experiments {
        let chapter = read(&format!("{name}.md"));
        let has: Vec<&str> =
            chapter.lines().filter(|l| l.starts_with("## ")).collect();
        let mut from = 0;
        for want in &ordered {
            match has[from..].iter().position(|h| h == want) {
                Some(k) => from += k + 1,
                None => wrong.push(format!("{name}.md: no {want} (in order)")),
            }
        }
        let all = pages.iter().map(|p| read(&format!("{p}.md"))).collect::<Vec<_>>();
        let all = all.join("\n");
        for want in &anywhere {
            if !all.lines().any(|l| l == want) {
                wrong.push(format!("{name}: no {want} on its pages"));
            }
        }
        for part in ["answers", "worksheet"] {
            if !summary.contains(&format!("({name}-{part}.md)")) {
                wrong.push(format!("SUMMARY.md: no {name}-{part}.md"));
            }
        }
        if !read(&format!("{name}-worksheet.md"))
            .contains(&format!("{{{{#worksheet {name}}}}}"))
        {
            wrong.push(format!("{name}-worksheet.md: no {{{{#worksheet {name}}}}}"));
        }
        if !teaching.lines().any(|l| l == format!("### {name}")) {
            wrong.push(format!("teaching.md: no ### {name}"));
        }
        if !chapter.contains(&format!("(teaching.md#{name})")) {
            wrong.push(format!("{name}.md: no link to teaching.md#{name}"));
        }
        if !readme.lines().any(|l| l.starts_with(&format!("| `{name}` |"))) {
            wrong.push(format!(
                "README.md: no row of {name} in its table of experiments"
            ));
        }
        if !methodology.lines().any(|l| l.starts_with(&format!("| {name} |"))) {
            wrong.push(format!(
                "methodology.md: no row of {name} in What one operation is"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
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

// --- What a student reads: its length, its commands ---------------------

/// The book's source folder.
fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src")
}

/// `text` without what is not prose: fenced code, directives, HTML tags,
/// link targets, table rows and headings.
fn prose(text: &str) -> String {
    fn cut(text: &str, open: &str, close: &str, keep: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find(open) {
            out.push_str(&rest[..at]);
            match rest[at + open.len()..].find(close) {
                Some(end) => {
                    out.push_str(keep);
                    rest = &rest[at + open.len() + end + close.len()..];
                }
                None => {
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }
    let text = cut(text, "```", "```", " ");
    let text = cut(&text, "{{#", "}}", " ");
    // The close of a directive that wraps a sentence (`{{/rests-on}}`).
    let text = cut(&text, "{{/", "}}", " ");
    let text = cut(&text, "<", ">", " ");
    let text = cut(&text, "](", ")", "]");
    text.lines()
        .filter(|l| !l.trim_start().starts_with('|') && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words of prose: each run of word characters (letters, digits, `_`,
/// `'`, `’`, `.`, `-`) that holds an ASCII letter or digit.
fn words(text: &str) -> usize {
    let word = |c: char| c.is_alphanumeric() || "_'’.-".contains(c);
    prose(text)
        .split(|c: char| !word(c))
        .filter(|w| w.chars().any(|c| c.is_ascii_alphanumeric()))
        .count()
}

/// The main path, as build.rs read it from SUMMARY.md (the lab's one
/// reader of it; `tests/lab.rs` checks its reading against mdBook's): the
/// pages before the experiments (introduction, getting started,
/// methodology), then each experiment with its sub-pages, up to the first
/// part title after them (the appendix).
fn main_path() -> (Vec<String>, Vec<(String, Vec<String>)>) {
    use lab::experiments::{CHAPTERS, OPENING};
    let owned = |pages: &[&str]| pages.iter().map(|p| p.to_string()).collect();
    let experiments =
        CHAPTERS.iter().map(|(name, pages)| (name.to_string(), owned(pages)));
    (owned(OPENING), experiments.collect())
}

/// A chapter is one lab session's reading: at most 3,000 words of prose
/// per experiment with its sub-pages, and 25,000 on the whole main path.
#[test]
fn the_main_path_is_25000_words_at_most_and_each_experiment_3000() {
    let count = |page: &String| {
        words(&std::fs::read_to_string(book_src().join(page)).unwrap())
    };
    let (intro, experiments) = main_path();
    assert_eq!(experiments.len(), lab::experiments::ALL.len(), "{experiments:?}");
    let intro_words: usize = intro.iter().map(count).sum();
    let mut total = intro_words;
    let mut over = Vec::new();
    eprintln!("book words: intro pages {intro_words}");
    for (name, pages) in &experiments {
        let n: usize = pages.iter().map(count).sum();
        eprintln!("book words: {name} {n}");
        total += n;
        if n > 3000 {
            over.push(format!("{name} {n}"));
        }
    }
    eprintln!("book words: main path {total}");
    assert!(over.is_empty(), "over 3,000 words of prose: {over:?}");
    assert!(total <= 25_000, "the main path is {total} words of prose, over 25,000");
}

#[test]
fn prose_words_leave_out_code_tables_directives_and_headings() {
    let text = "# Title\n\nTwo words. {{#figure a /b 1}} µs\n\n```sh\nlab run x\n```\n\
                | a | b |\n[a link](x.md#y) <b>bold</b>{{#rests-on c holds}}{{/rests-on}}";
    // Two, words., µs (it holds an ASCII letter), a, link, bold.
    assert_eq!(words(text), 6, "{}", prose(text));
}

/// Every program of the lab a reader can type: `lab` and each binary of the
/// workspace's crates.
fn programs() -> Vec<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut names = vec!["lab".to_string()];
    for dir in std::fs::read_dir(&crates).unwrap().flatten() {
        let path = dir.path();
        if path.join("src/main.rs").is_file() {
            names.push(dir.file_name().to_string_lossy().into_owned());
        }
        for bin in
            std::fs::read_dir(path.join("src/bin")).into_iter().flatten().flatten()
        {
            if let Some(stem) = bin.file_name().to_string_lossy().strip_suffix(".rs")
            {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names
}

/// Every command line of the book: each line of a ```sh block (a `\`
/// at the end joins the next), and each inline code span of prose that
/// starts with a program of the lab. Page, line number and the command.
fn commands() -> Vec<(String, usize, String)> {
    book_commands().into_iter().map(|(page, n, c, _)| (page, n, c)).collect()
}

/// [`commands`], each marked `true` when it stands in a ```sh block (a
/// line a reader types as it is), `false` for an inline one.
fn book_commands() -> Vec<(String, usize, String, bool)> {
    let programs = programs();
    let mut found = Vec::new();
    for (page, text) in chapters() {
        let mut block: Option<String> = None;
        let mut pending = String::new();
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if let Some(lang) = trimmed.strip_prefix("```") {
                block = match block {
                    Some(_) => None,
                    None => Some(lang.trim().to_string()),
                };
                continue;
            }
            match block.as_deref() {
                Some("sh") => {
                    let line = trimmed.trim_end();
                    if let Some(head) = line.strip_suffix('\\') {
                        pending.push_str(head);
                        continue;
                    }
                    pending.push_str(line);
                    let command = std::mem::take(&mut pending);
                    if !command.is_empty() && !command.starts_with('#') {
                        found.push((page.clone(), n + 1, command, true));
                    }
                }
                Some(_) => {}
                None => {
                    for span in line.split('`').skip(1).step_by(2) {
                        let first = span.split_whitespace().next().unwrap_or("");
                        if span.contains(' ') && programs.iter().any(|p| p == first)
                        {
                            found.push((
                                page.clone(),
                                n + 1,
                                span.to_string(),
                                false,
                            ));
                        }
                    }
                }
            }
        }
    }
    found
}

/// A command without its comment (` # ...` at the end).
fn without_comment(command: &str) -> &str {
    command.find(" #").map_or(command, |at| &command[..at]).trim()
}

/// Whether `command` is written another way than the book's one: `cargo
/// lab`, `cargo run`, `just`, or a program by its path under `target/`.
/// (Getting started's `cargo build ... && export PATH=...target/release`
/// is the one step that sets the book's way up.)
fn another_way(command: &str) -> Option<&'static str> {
    let command = command.trim();
    for other in ["cargo lab", "cargo run", "just "] {
        if command.starts_with(other) || command.contains(&format!("&& {other}")) {
            return Some(other);
        }
    }
    let by_path = command.split_whitespace().any(|w| {
        let w = w.trim_matches(|c| c == '"' || c == '\'');
        ["target/release/", "target/debug/", "./target/"].iter().any(|dir| {
            w.strip_prefix(dir).is_some_and(|rest| !rest.is_empty() && rest != "c/")
        })
    });
    by_path.then_some("a program by its path under target/")
}

/// The book writes a command one way: `lab ...` and the programs by name,
/// on the PATH that Getting started sets up. `cargo lab`, `cargo run`,
/// `target/release/...` and `just` are the other ways it once had.
#[test]
fn every_command_is_written_one_way() {
    let mut wrong = Vec::new();
    for (page, n, command, _) in book_commands() {
        if let Some(other) = another_way(&command) {
            wrong.push(format!("{page}:{n}: {other} in `{command}`"));
        }
    }
    for (page, text) in chapters() {
        for (n, line) in text.lines().enumerate() {
            for span in line.split('`').skip(1).step_by(2) {
                if let Some(other) = another_way(span) {
                    wrong.push(format!("{page}:{}: {other} in `{span}`", n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "commands written another way:\n{}", wrong.join("\n"));
}

#[test]
fn the_one_way_check_tells_the_other_ways() {
    assert_eq!(another_way("cargo lab run fork-vs-thread"), Some("cargo lab"));
    assert_eq!(another_way("cargo run -p mq --bin broker"), Some("cargo run"));
    assert!(another_way("target/release/pipespeed2t 20k 64k").is_some());
    assert!(another_way("./target/release/lab list").is_some());
    for fine in [
        "lab run fork-vs-thread",
        "pipespeed2t 20k 64k",
        r#"cargo build --release --workspace && export PATH="$PWD/target/release:$PATH""#,
        "target/release/",
        "target/release/c/",
    ] {
        assert_eq!(another_way(fine), None, "{fine}");
    }
}

/// The programs that run another command given to them: a lab program
/// after one of these (and its options) is the command that runs.
const WRAPPERS: [&str; 16] = [
    "taskset",
    "/usr/bin/time",
    "time",
    "perf",
    "strace",
    "ltrace",
    "prlimit",
    "env",
    "chrt",
    "setpriv",
    "gdb",
    "timeout",
    "nice",
    "valgrind",
    "sudo",
    "exec",
];

/// The parts of a command line that run one of the lab's programs: each
/// `|`, `;` or `&&` segment whose command is a lab program, directly or
/// after a wrapper (`taskset -c 0`, `perf stat --`, `/usr/bin/time -v`),
/// from the program's name on.
fn lab_part<'a>(command: &'a str, programs: &[String]) -> Vec<&'a str> {
    let mut parts = Vec::new();
    for segment in
        without_comment(command).split(['|', ';']).flat_map(|s| s.split("&&"))
    {
        let first = segment.split_whitespace().next().unwrap_or("");
        let wrapped = WRAPPERS.contains(&first);
        if !wrapped && !programs.iter().any(|p| p == first) {
            continue;
        }
        let mut at = 0;
        for word in segment.split_whitespace() {
            let start = segment[at..].find(word).unwrap() + at;
            if programs.iter().any(|p| p == word) {
                parts.push(segment[start..].trim());
                break;
            }
            at = start + word.len();
        }
    }
    parts
}

/// A command's syntax rather than a command: a placeholder in capitals
/// (`lab run NAME`, `pipespeed2 COUNT BYTES`), an ellipsis, or a
/// subcommand named alone (`lab run`).
fn is_template(command: &str) -> bool {
    let words: Vec<&str> = without_comment(command).split_whitespace().collect();
    words.len() < 2
        || words == ["lab", "run"]
        || words.iter().any(|w| {
            w.contains("...")
                || (w.len() > 1
                    && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        })
}

/// Every command the book prints parses with the real parser of the
/// program it runs ([`labkit::cli::PARSE_ONLY`]): a flag that does not
/// exist, a value out of range or a wrong experiment name fails here
/// before a student types it.
#[test]
fn every_command_in_the_book_parses() {
    let programs = programs();
    let bin = common::bin_dir();
    let path =
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let scratch = labkit::cleanup::tempdir("lab-book-commands-").unwrap();
    let (mut checked, mut wrong) = (0, Vec::new());
    for (page, n, command) in commands() {
        if is_template(&command) {
            continue;
        }
        for part in lab_part(&command, &programs) {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(part)
                .env("PATH", &path)
                .env(labkit::cli::PARSE_ONLY, "1")
                .env("LAB_CHECKOUT", env!("CARGO_MANIFEST_DIR"))
                .current_dir(scratch.path())
                .output()
                .unwrap();
            checked += 1;
            if !out.status.success() {
                wrong.push(format!(
                    "{page}:{n}: `{part}`: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    eprintln!("book commands: {checked} checked against their parsers");
    assert!(checked > 50, "only {checked} commands found: is the scan broken?");
    assert!(wrong.is_empty(), "commands that do not parse:\n{}", wrong.join("\n"));
}

/// A sentence about the rounds of today's reference ("in every round",
/// "all five rounds") would go false without a word when the reference is
/// made again: the book states intervals instead, and a generated figure
/// says "(every round)" itself.
#[test]
fn no_sentence_about_the_rounds_is_typed() {
    let phrases = [
        "in every round",
        "in all rounds",
        "in all the rounds",
        "every one of the rounds",
        "all five rounds",
        "all eleven rounds",
        "all 5 rounds",
        "all 11 rounds",
        "all 15 rounds",
        "all 31 rounds",
    ];
    let mut typed = Vec::new();
    for (page, text) in chapters() {
        let lower = prose(&text).to_lowercase();
        for p in phrases {
            if lower.contains(p) {
                typed.push(format!("{page}: {p:?}"));
            }
        }
    }
    assert!(
        typed.is_empty(),
        "sentences about the reference's rounds:\n{}",
        typed.join("\n")
    );
}

/// Whether the book's test runs `command` for real, as a reader types it:
/// every line of a ```sh block but those that set up the checkout (`git`,
/// `cargo`, `cd`, `export`), take minutes (`lab run`, `lab compare`, the
/// class's `tar` and `for`), serve until stopped (`broker`, `server`), or
/// need `perf` (the ctx-switch chapter's own runs need it; these are
/// parsed only).
fn runs_as_written(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or("");
    let skip_first = [
        "git", "cargo", "cd", "export", "tar", "mkdir", "for", "perf", "broker",
        "server", "sudo",
    ];
    let lab_quick = ["lab list", "lab verdicts", "lab --help"];
    if first == "lab" {
        return lab_quick.iter().any(|q| without_comment(command) == *q)
            || command.split_whitespace().any(|w| w == "--help");
    }
    !skip_first.contains(&first) && !command.contains("perf ")
}

/// A page of the book and the commands of it that run: line number, command.
type Page = (String, Vec<(usize, String)>);

/// Run `pages` in the book's order, each in one shell as a terminal is, in
/// the folder `dir` (made here, with `crates/` the checkout's and `tmp/`
/// for the book's `/tmp/`): how many commands ran, and a line for each
/// that did not run as written.
fn run_pages(
    root: &Path,
    dir: &Path,
    path: &str,
    pages: &[&Page],
) -> (usize, Vec<String>) {
    std::fs::create_dir(dir).unwrap();
    std::os::unix::fs::symlink(root.join("crates"), dir.join("crates")).unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    for (dir, mode) in [(dir, 0o755), (&tmp, 0o1777)] {
        let mode = std::os::unix::fs::PermissionsExt::from_mode(mode);
        std::fs::set_permissions(dir, mode).unwrap();
    }
    let private_tmp = format!("{}/", tmp.display());
    let (mut ran, mut wrong) = (0, Vec::new());
    for (page, lines) in pages {
        let mut script = String::new();
        for (n, command) in lines {
            // One shell, as a terminal is: `ulimit` and `$!` carry over.
            let command = without_comment(command).replace("/tmp/", &private_tmp);
            script.push_str(&match command.strip_suffix('&') {
                Some(job) => {
                    format!("{{ {job}; }} </dev/null >/dev/null 2>&1 3>&- &\necho \"{n} 0\" >&3\n")
                }
                None => format!(
                    "{{ {command}\n}} </dev/null >/dev/null 2>>\"$LAB_ERR\"; echo \"{n} $?\" >&3\n"
                ),
            });
        }
        script.push_str("kill $(jobs -p) 2>/dev/null\n");
        let err = dir.join("stderr");
        use std::os::unix::process::CommandExt;
        let shell = std::process::Command::new("timeout")
            .args(["300", "bash", "-c", &format!("exec 3>&1; {script}")])
            .process_group(0)
            .env("PATH", path)
            .env("LAB_CHECKOUT", root)
            .env("LAB_ERR", &err)
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let group = shell.id().to_string();
        let out = shell.wait_with_output().unwrap();
        // Whatever a page left running (a busy loop it did not kill).
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .output();
        let codes = String::from_utf8_lossy(&out.stdout).into_owned();
        for (n, command) in lines {
            ran += 1;
            let code = codes
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{n} ")))
                .and_then(|c| c.trim().parse::<i32>().ok());
            // Said to fail, or a grep that found nothing (exit 1).
            let comment = command.find(" #").map_or("", |at| &command[at..]);
            let may_fail =
                ["fails", "exit", "dies"].iter().any(|w| comment.contains(w));
            let last =
                without_comment(command).rsplit('|').next().unwrap_or("").trim();
            let found_nothing = last.starts_with("grep ") && code == Some(1);
            // A process limit binds everyone but root: run by an ordinary
            // user, as the book asks, its forks fail and it exits 1.
            let limited = code == Some(1)
                && !labtest::is_root()
                && without_comment(command).contains("prlimit --nproc");
            match code {
                Some(0) => {}
                Some(_) if may_fail || found_nothing || limited => {}
                Some(c) => wrong.push(format!("{page}:{n}: `{command}` exited {c}")),
                None => wrong.push(format!(
                    "{page}:{n}: `{command}` did not finish ({})",
                    out.status
                )),
            }
        }
    }
    (ran, wrong)
}

/// Every command of a ```sh block that [`runs_as_written`] says is cheap
/// runs as the book prints it, page by page, in order, in one shell per
/// page (so a `cc -o /tmp/x` on one line builds what the next runs; an
/// experiment's pages in turn, the experiments side by side), with
/// the lab on the `PATH` as Getting started sets it up. It must exit 0,
/// unless its comment says it fails (`# fails`, `# exits N`). The shell
/// starts in a scratch folder where `crates/` is the checkout's, so a
/// relative path reads the checkout's C and a relative output lands in
/// the scratch folder. The book's `/tmp/NAME` is a `tmp/NAME` of the
/// scratch folder's, the same for every page of an experiment: two suites
/// at once (two checkouts, or root's and a user's) would otherwise build
/// and run each other's `/tmp/forkfill`, or find the other user's in
/// their way.
#[test]
fn the_books_cheap_commands_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = labkit::cleanup::tempdir("lab-book-run-").unwrap();
    // Open to all as /tmp is, for a command that runs a program it built
    // there as another user (setpriv).
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(scratch.path(), mode).unwrap();
    let path = format!(
        "{}:{}",
        common::bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut pages: Vec<Page> = Vec::new();
    let mut missing = std::collections::BTreeSet::new();
    for (page, n, command, in_block) in book_commands() {
        if !in_block || !runs_as_written(&command) {
            continue;
        }
        // A tool the machine lacks (gdb, strace, GNU time): said and counted.
        let tool = without_comment(&command)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let known = tool.starts_with("/tmp/")
            || tool.starts_with("./")
            || tool.contains('=');
        let found = known
            || std::process::Command::new("bash")
                .args(["-c", &format!("command -v {tool}")])
                .env("PATH", &path)
                .output()
                .is_ok_and(|o| o.status.success());
        if !found {
            missing.insert(tool);
            continue;
        }
        match pages.last_mut() {
            Some((p, lines)) if *p == page => lines.push((n, command)),
            _ => pages.push((page, vec![(n, command)])),
        }
    }
    // An experiment's pages (its chapter, sub-pages, appendix pages,
    // answers, worksheet) run in the book's order in a folder of their own,
    // as a reader works through them: an answer runs what its chapter
    // built. Experiments run side by side, a few at a time.
    let mut groups: Vec<(String, Vec<&Page>)> = Vec::new();
    for page in &pages {
        let stem = page.0.trim_end_matches(".md");
        let experiment = lab::experiments::ALL
            .iter()
            .map(|e| e.name)
            .filter(|name| stem.starts_with(name))
            .max_by_key(|name| name.len())
            .unwrap_or(stem);
        match groups.iter_mut().find(|(g, _)| g == experiment) {
            Some((_, members)) => members.push(page),
            None => groups.push((experiment.to_string(), vec![page])),
        }
    }
    let queue = std::sync::Mutex::new(groups.iter().collect::<Vec<_>>());
    let results = std::sync::Mutex::new(std::collections::BTreeMap::new());
    std::thread::scope(|threads| {
        for _ in 0..3 {
            threads.spawn(|| {
                loop {
                    let Some((group, members)) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let dir = scratch.path().join(group);
                    let said = run_pages(root, &dir, &path, members);
                    results.lock().unwrap().insert(group.clone(), said);
                }
            });
        }
    });
    let (mut ran, mut wrong) = (0, Vec::new());
    for (_, (n, bad)) in results.into_inner().unwrap() {
        ran += n;
        wrong.extend(bad);
    }
    for tool in &missing {
        labtest::skipped(&format!(
            "the book's commands that start with {tool}: no {tool} here"
        ));
    }
    eprintln!("book commands: {ran} run as written");
    assert!(ran > 20, "only {ran} commands ran: is the scan broken?");
    assert!(
        wrong.is_empty(),
        "commands that do not run as written:\n{}",
        wrong.join("\n")
    );
}

/// The parse-only mode the book's test relies on: a command line that
/// parses exits 0 having done nothing, a bad one exits 2 with one line,
/// for a program and for `lab run`.
#[test]
fn parse_only_checks_the_flags_and_runs_nothing() {
    let scratch = labtest::tempdir();
    let log = scratch.path().join("f.log");
    let out = scratch.path().join("out");
    let run = |cmd: &mut std::process::Command| {
        cmd.env(labkit::cli::PARSE_ONLY, "1")
            .current_dir(scratch.path())
            .output()
            .unwrap()
    };
    let ok = run(std::process::Command::new(common::bin_dir().join("fork"))
        .args(["--procs", "3", "--log"])
        .arg(&log));
    assert!(ok.status.success() && ok.stdout.is_empty(), "{ok:?}");
    assert!(!log.exists(), "parse-only forked and wrote the log");
    let bad = run(std::process::Command::new(common::bin_dir().join("fork"))
        .args(["--procz", "3"]));
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1, "{bad:?}");
    let lab = run(common::lab_std()
        .args(["run", "fork-vs-thread", "--cpus", "0", "--out"])
        .arg(&out));
    assert!(lab.status.success(), "{lab:?}");
    assert!(!out.exists(), "parse-only ran the experiment");
    let wrong = run(common::lab_std().args(["run", "fork-vs-thread", "--bogus"]));
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
}

/// A scratch checkout for `lab book`: the real book and reference linked
/// in, and runs of its own.
fn edition_checkout() -> labkit::cleanup::TempDir {
    let dir = labtest::tempdir();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for part in ["book", "results"] {
        std::os::unix::fs::symlink(root.join(part), dir.path().join(part)).unwrap();
    }
    dir
}

/// A small run of fork-vs-thread into `checkout`, its programs those of
/// `bins` if given (each a wrapper of the real one); returns the run folder.
fn small_run(checkout: &Path, bins: Option<&Path>, extra: &[&str]) -> PathBuf {
    let mut cmd = common::lab();
    cmd.env("LAB_CHECKOUT", checkout);
    if let Some(bins) = bins {
        cmd.env("LAB_BIN_DIR", bins);
    }
    let tiny = ["--procs", "2", "--counts", "3", "--rounds", "3", "--vs-c"];
    let out =
        cmd.args(["run", "fork-vs-thread"]).args(tiny).args(extra).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("lab: results written to "))
        .unwrap_or_else(|| panic!("no 'results written to' line in: {err}"));
    // NAME or NAME/VARIANT: the run is above.
    let up = if extra.contains(&"--variant") { 2 } else { 1 };
    Path::new(line).ancestors().nth(up).unwrap().to_path_buf()
}

/// `lab run fork-vs-thread ARGS` (the quick grid) into `checkout`.
fn quick_run(checkout: &Path, args: &[&str]) -> PathBuf {
    let out = common::lab()
        .env("LAB_CHECKOUT", checkout)
        .args(["run", "fork-vs-thread"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("lab: results written to "))
        .unwrap_or_else(|| panic!("no 'results written to' line in: {err}"));
    // NAME/cpu0: the run is two folders up.
    let target = Path::new(line);
    let up = if args.contains(&"--variant") { 2 } else { 1 };
    target.ancestors().nth(up).unwrap().to_path_buf()
}

/// `lab book ARGS` in `checkout`: the folder of the edition it printed,
/// and what it said on stderr.
fn edition(checkout: &Path, args: &[&str]) -> (PathBuf, String) {
    let out = common::lab()
        .env("LAB_CHECKOUT", checkout)
        .arg("book")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let index = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(index.ends_with("index.html") && index.is_file(), "{}", index.display());
    (index.parent().unwrap().to_path_buf(), err)
}

fn unescape(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Each `<span class="CLASS" data-figure="FOLDER POINTER [DECIMALS]">TEXT`
/// of `html`: (the attribute, the text, and the book's figure that follows
/// it, for a figure of the run).
fn figures(html: &str, class: &str) -> Vec<(String, String, Option<String>)> {
    spans(html, class, "figure")
}

/// [`figures`], of the attribute `data-KIND`.
fn spans(
    html: &str,
    class: &str,
    kind: &str,
) -> Vec<(String, String, Option<String>)> {
    let open = format!("<span class=\"{class}\" data-{kind}=\"");
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        rest = &rest[at + open.len()..];
        let (attr, after) = rest.split_once("\">").unwrap();
        let (text, after) = after.split_once("</span>").unwrap();
        let book = after
            .strip_prefix("<span class=\"lab-book\"> (book: ")
            .and_then(|b| b.split_once(")</span>"))
            .map(|(b, _)| unescape(b));
        found.push((unescape(attr), unescape(text), book));
        rest = after;
    }
    found
}

/// A figure as the book prints it: a number to DECIMALS, a string as it
/// is, an interval as "LO to HI", nothing as "-".
fn printed(value: &serde_json::Value, decimals: Option<usize>) -> String {
    use serde_json::Value;
    match (value, decimals) {
        (Value::Number(n), Some(d)) => format!("{:.d$}", n.as_f64().unwrap()),
        (Value::String(s), _) => s.clone(),
        (Value::Array(e), Some(d)) if e.len() == 2 => format!(
            "{:.d$} to {:.d$}",
            e[0].as_f64().unwrap(),
            e[1].as_f64().unwrap()
        ),
        (Value::Null, _) => "-".into(),
        (other, _) => other.to_string(),
    }
}

/// The value the attribute `FOLDER POINTER [DECIMALS]` names in `run`.
fn value_of(run: &Path, attr: &str) -> String {
    let mut words = attr.split(' ');
    let (folder, pointer) = (words.next().unwrap(), words.next().unwrap());
    let decimals = words.next().map(|d| d.parse().unwrap());
    let experiment = folder.split('/').next().unwrap();
    let json =
        common::read_json(run.join(folder).join(format!("{experiment}.json")));
    printed(lab::book::select(&json, pointer).unwrap(), decimals)
}

#[test]
fn your_edition_prints_your_runs_figures_beside_the_books_and_names_what_it_lacks() {
    let checkout = edition_checkout();
    // A real quick run, on one CPU as the chapter's figures are. It
    // measures, so one at a time ([`labtest::serial`]); building editions
    // of it measures nothing. One round asked is two, each figure's value
    // and interval made from them; too few for a verdict (three), so no
    // claim of it is too close to call and `lab run` makes nothing again
    // (at three rounds a close claim remade the grid with nine: 7 s became
    // 56 s).
    let one_cpu = ["--rounds", "1", "--cpus", "0", "--variant", "cpu0", "--vs-c"];
    let run = {
        let _serial = labtest::serial();
        quick_run(checkout.path(), &one_cpu)
    };
    let (book, _) = edition(checkout.path(), &[]);
    assert_eq!(book, run.join("book"));
    let reference = lab::book::reference_for(&checkout.path().join("book")).unwrap();
    let page = std::fs::read_to_string(book.join("fork-vs-thread.html")).unwrap();
    let mine = figures(&page, "lab-yours");
    assert!(mine.len() >= 5, "only {} of the run's figures", mine.len());
    for (attr, text, beside) in &mine {
        assert_eq!(*text, value_of(&run, attr), "{attr}");
        let theirs = value_of(&reference, attr);
        let beside =
            beside.as_deref().unwrap_or_else(|| panic!("{attr}: no book's"));
        assert!(beside == theirs || (beside == "same" && theirs == *text), "{attr}");
    }
    // Its headline figures: the run's, to their decimals.
    let headlines = spans(&page, "lab-yours", "headline");
    assert!(!headlines.is_empty());
    for (attr, text, _) in &headlines {
        let [folder, key, d] = attr.split(' ').collect::<Vec<_>>()[..] else {
            panic!()
        };
        let json = common::read_json(run.join(folder).join("fork-vs-thread.json"));
        let value = json["headline"][key]["value"].as_f64().unwrap();
        let d: usize = d.parse().unwrap();
        assert!(text.starts_with(&format!("{value:.d$}")), "{attr}: {text}");
    }
    // The two-CPU results this run lacks: the book's, labelled, and the
    // command that measures them.
    let theirs = figures(&page, "lab-book-only");
    assert!(theirs.iter().any(|(attr, _, _)| attr.starts_with("fork-vs-thread ")));
    for (attr, text, _) in &theirs {
        let value = value_of(&reference, attr);
        assert_eq!(
            *text,
            format!("{value} (the book's; your run did not measure it)")
        );
    }
    assert!(
        page.contains("<code>lab run fork-vs-thread --vs-c --rounds 12 --full"),
        "no command"
    );
    // A chapter of an experiment the run did not make: the book's
    // figures only, and the command.
    let other = std::fs::read_to_string(book.join("create-destroy.html")).unwrap();
    assert!(figures(&other, "lab-yours").is_empty());
    assert!(!figures(&other, "lab-book-only").is_empty());
    assert!(other.contains("<code>lab run create-destroy"), "no command");
    // Its opening names the settings that differ: fewer rounds here.
    assert!(page.contains("Its settings differ from the book"), "no settings");
    // A second edition replaces the first.
    let (again, _) = edition(checkout.path(), &[]);
    assert_eq!(again, book);
}

#[test]
fn your_edition_marks_every_sentence_and_verdict_your_run_contradicts() {
    let checkout = edition_checkout();
    // A real run whose processes take as long as its threads: its
    // figure for printing-same set to equal times in every round (a real
    // run's times would make the verdict hang on the machine's load), so
    // printing-same holds where the book's reference says it no longer
    // does; its verdicts written again from it.
    let run = small_run(checkout.path(), None, &["--cpus", "0"]);
    let json = run.join("fork-vs-thread/fork-vs-thread.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let figure = lab::report::Figure::new(
        "fork.c's time over thread.c's: each round's median over every setting",
        "x",
        lab::report::Method::Median,
        vec![0.99, 1.0, 1.01],
    );
    doc["headline"]["fork_over_thread_c"] = serde_json::to_value(figure).unwrap();
    std::fs::write(&json, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    lab::claims::write(&run).unwrap();
    let rows = lab::claims::evaluate(&run).unwrap();
    let mine = rows.iter().find(|r| r.claim.id == "printing-same").unwrap();
    assert_eq!(mine.verdict.word(), "holds", "the synthetic run's verdict");
    let (book, _) = edition(checkout.path(), &[]);
    let page = std::fs::read_to_string(book.join("fork-vs-thread.html")).unwrap();
    assert!(
        page.contains(
            "class=\"lab-verdict lab-differs\" data-verdict=\"printing-same\""
        ),
        "the verdict is not marked"
    );
    assert!(page.contains("on your run, holds; the book's: no longer holds"));
    // Every sentence of the book that rests on a condition this run
    // contradicts is marked, on every page.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let mut contradicted = 0;
    let run_source = lab::edition::Source::new(&run);
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let html = book.join(path.with_extension("html").file_name().unwrap());
        let Ok(html) = std::fs::read_to_string(&html) else { continue };
        for (at, _) in text.match_indices("{{#rests-on ") {
            let rest = &text[at + "{{#rests-on ".len()..];
            let condition = &rest[..rest.find("}}").unwrap()];
            let parsed = lab::edition::Condition::parse(condition).unwrap();
            if parsed.on(&run_source, &rows).unwrap().0 == Some(false) {
                contradicted += 1;
                let mark = format!(
                    "<span class=\"lab-contradicted\" data-rests-on=\"{}\">",
                    condition.replace('"', "&quot;")
                );
                assert!(
                    html.contains(&mark),
                    "{}: {condition} not marked",
                    path.display()
                );
            }
        }
    }
    assert!(contradicted >= 1, "no sentence of the book rests on printing-same");
}

#[test]
fn a_class_edition_counts_the_runs_and_names_the_one_that_does_not_read() {
    let checkout = edition_checkout();
    let class = labtest::tempdir();
    let mut runs = Vec::new();
    // The runs measure, so one at a time; building editions measures nothing.
    let serial = labtest::serial();
    for i in 0..2 {
        let run =
            small_run(checkout.path(), None, &["--cpus", "0", "--variant", "cpu0"]);
        // Named by its place: a run folder's name is the second it began,
        // which the next run may reuse once this one has moved.
        let into = class.path().join(format!("run-{i}"));
        std::fs::rename(&run, &into).unwrap();
        runs.push(into);
    }
    drop(serial);
    // A third whose results are cut off halfway.
    let broken = class.path().join("broken-run");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&runs[0])
        .arg(&broken)
        .status()
        .unwrap();
    assert!(copied.success());
    let json = broken.join("fork-vs-thread/cpu0/fork-vs-thread.json");
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::write(&json, &text[..text.len() / 2]).unwrap();
    let dir = class.path().to_str().unwrap();
    let (book, err) = edition(checkout.path(), &[dir]);
    assert_eq!(book, class.path().join("book"));
    assert!(err.contains("left out") && err.contains("broken-run"), "{err}");
    let page = std::fs::read_to_string(book.join("fork-vs-thread.html")).unwrap();
    assert!(page.contains("broken-run"), "the page does not name the run left out");
    let counted = spans(&page, "lab-yours", "headline");
    assert!(!counted.is_empty(), "no headline figure of the two runs");
    for (attr, text, _) in counted {
        let [folder, key, d] = attr.split(' ').collect::<Vec<_>>()[..] else {
            panic!()
        };
        let mut values: Vec<f64> = runs
            .iter()
            .map(|r| {
                let json =
                    common::read_json(r.join(folder).join("fork-vs-thread.json"));
                json["headline"][key]["value"].as_f64().unwrap()
            })
            .collect();
        values.sort_by(f64::total_cmp);
        let d: usize = d.parse().unwrap();
        let median = (values[0] + values[1]) / 2.0;
        let want = format!(
            "{median:.d$} (median of 2 of 2 runs; range {:.d$} to {:.d$})",
            values[0], values[1]
        );
        assert_eq!(text, want, "{attr}");
    }
    assert!(page.contains("Across the class's 2 runs"), "no verdict tally");
    // Built again, the first edition in the folder is no run of the class.
    let (_, again) = edition(checkout.path(), &[dir]);
    let earlier = format!("left out {}", class.path().join("book").display());
    assert!(again.contains("broken-run") && !again.contains(&earlier), "{again}");
}

#[test]
fn lab_book_refuses_a_place_it_may_not_write_with_one_line() {
    let checkout = edition_checkout();
    let full = labtest::tempdir();
    std::fs::write(full.path().join("notes.txt"), "mine\n").unwrap();
    let reference = lab::book::reference_for(&checkout.path().join("book")).unwrap();
    let cases: [(Vec<String>, &str); 5] = [
        (vec!["--out".into(), "results/x".into()], "only the reference run"),
        (vec!["no-such-run".into()], "no run 'no-such-run'"),
        // The reference is no run of yours: its edition needs --out.
        (vec![reference.display().to_string()], "give --out DIR"),
        // A folder of the reader's that holds other files is never emptied.
        (
            vec![
                reference.display().to_string(),
                "--out".into(),
                full.path().display().to_string(),
            ],
            "not empty, and no edition",
        ),
        (vec!["--bogus".into()], "unexpected argument"),
    ];
    for (args, says) in cases {
        let line = labtest::usage_error(
            "lab",
            common::lab_std()
                .env("LAB_CHECKOUT", checkout.path())
                .arg("book")
                .args(&args),
        );
        assert!(line.contains(says), "lab book {args:?}: {line}");
    }
    assert_eq!(
        std::fs::read_to_string(full.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
}
