//! The runner itself: listing, unknown names, usage.

use crate::common;

use crate::common::lab;

#[test]
fn list_names_every_experiment() {
    let out = lab().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // One line per experiment, in the book's order: its name, then what
    // it is about.
    let lines: Vec<&str> = text.lines().collect();
    let every: Vec<_> = lab::experiments::every().collect();
    assert_eq!(lines.len(), every.len(), "{text}");
    for (line, experiment) in lines.iter().zip(every) {
        let (name, about) = line.split_once(' ').unwrap();
        assert_eq!((name, about.trim()), (experiment.name, experiment.about));
    }
}

#[test]
fn an_unknown_experiment_exits_2_listing_the_known_ones() {
    labtest::run(lab().args(["run", "fork-vs-threads"]))
        .code(2)
        .stdout_is("")
        .stderr_starts_with("lab: unknown experiment 'fork-vs-threads'")
        .stderr_has("fork-vs-thread");
}

#[test]
fn bad_usage_exits_2() {
    // No subcommand: one line that names the choices, exit 2.
    let err = common::lab_refuses(&[]);
    assert!(err.starts_with("lab: a subcommand is required (list, run, "), "{err}");
    assert!(err.ends_with("); see 'lab --help'"), "{err}");
    let err = common::lab_refuses(&["walk"]);
    assert_eq!(err, "lab: unrecognized subcommand 'walk'; see 'lab --help'");
    common::bad_flags_exit_2(
        "fork-vs-thread",
        &[
            &["--rounds", "0"],
            &["--procs", "4"],
            &["--full", "--procs", "4", "--counts", "1"],
        ],
    );
    // The conflict names both flags.
    let full = ["run", "fork-vs-thread", "--full", "--procs", "4", "--counts", "1"];
    let err =
        labtest::usage_error("lab run fork-vs-thread", common::lab_std().args(full));
    assert!(err.contains("'--full'") && err.contains("'--procs"), "{err}");
}

#[test]
fn help_reaches_the_runner_and_each_experiment() {
    labtest::run(lab().args(["run", "--help"]))
        .success()
        .stdout_has("Usage: lab run NAME")
        .stdout_has("fork-vs-thread");
    for experiment in lab::experiments::ALL {
        labtest::run(lab().args(["run", experiment.name, "--help"]))
            .success()
            .stdout_has(&format!("Usage: lab run {}", experiment.name));
    }
}

/// `lab --help` gives every command a line of its own: a doc comment put
/// above the wrong variant once gave `book` the text of `compare`, and
/// `compare` none.
#[test]
fn every_command_is_described_once() {
    let described = |out: &str| {
        let Some(commands) = out.split("Commands:").nth(1) else { return false };
        let commands = commands.split("\n\n").next().unwrap_or_default();
        let about = |name: &str| {
            let line = commands
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name))?;
            Some(line.trim_start()[name.len()..].trim().to_string())
        };
        let every =
            ["list", "run", "verdicts", "reference", "test", "book", "compare"]
                .iter()
                .all(|name| about(name).is_some_and(|a| !a.is_empty()));
        let book = about("book").unwrap_or_default();
        every && book.contains("edition") && !book.contains("Put a run beside")
    };
    labtest::run(lab().arg("--help"))
        .success()
        .stdout_that("every command described, each by its own text", described);
}

/// The experiments a list names, sorted.
fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names.dedup();
    names
}

/// The experiments CONTRIBUTING.md says a new one is added to, checked
/// against `ALL`: the justfile's reference recipe runs each one, the book
/// has a chapter for each in SUMMARY.md, and every claim with a rule names
/// one of them. A place forgotten fails here.
#[test]
fn the_lists_of_experiments_agree() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let all =
        sorted(lab::experiments::ALL.iter().map(|e| e.name.to_string()).collect());
    let read = |file: &str| std::fs::read_to_string(root.join(file)).unwrap();

    // The justfile's results recipe is `cargo lab reference`, whose steps
    // come from the experiments themselves (schedule::reference_plan).
    let justfile = read("justfile");
    let recipe = justfile.split("\nresults:").nth(1).expect("a results recipe");
    let recipe = recipe.split("\n\n").next().unwrap_or(recipe);
    assert!(
        recipe.contains("cargo lab reference"),
        "the justfile's results recipe: {recipe}"
    );
    let mut reference: Vec<String> = lab::schedule::reference_plan()
        .iter()
        .map(|s| s.plan.experiment.name.to_string())
        .collect();
    reference.dedup();
    let every =
        sorted(lab::experiments::every().map(|e| e.name.to_string()).collect());
    assert_eq!(sorted(reference), every, "the reference's experiments");

    // The experiments' chapters, in the book's order, are the ones build.rs
    // read from SUMMARY.md (its one reader): `ALL` follows them.
    let chapters: Vec<&str> =
        lab::experiments::CHAPTERS.iter().map(|(name, _)| *name).collect();
    let names: Vec<&str> = lab::experiments::ALL.iter().map(|e| e.name).collect();
    assert_eq!(chapters, names, "ALL is in the order of SUMMARY.md's chapters");
    // And build.rs read what mdBook reads: its own parser's prefix chapters
    // are the opening pages, and its numbered chapters up to the first part
    // title (the appendix's) are the experiments' chapters, each with the
    // pages nested under it.
    use mdbook_summary::SummaryItem;
    let book = mdbook_summary::parse_summary(&read("book/src/SUMMARY.md")).unwrap();
    let location = |item: &SummaryItem| match item {
        SummaryItem::Link(link) => {
            link.location.as_ref().map(|l| l.display().to_string())
        }
        _ => None,
    };
    let opening: Vec<String> =
        book.prefix_chapters.iter().filter_map(location).collect();
    assert_eq!(opening, lab::experiments::OPENING, "the pages before the chapters");
    let mut mdbook = Vec::new();
    for item in &book.numbered_chapters {
        match item {
            SummaryItem::Link(link) => {
                let nested = link.nested_items.iter().filter_map(location);
                let pages: Vec<String> =
                    location(item).into_iter().chain(nested).collect();
                mdbook.push(pages);
            }
            SummaryItem::PartTitle(_) => break,
            _ => {}
        }
    }
    let ours: Vec<Vec<String>> = lab::experiments::CHAPTERS
        .iter()
        .map(|(_, pages)| pages.iter().map(|p| p.to_string()).collect())
        .collect();
    assert_eq!(ours, mdbook, "each experiment's pages, as mdBook reads SUMMARY.md");
    // Every page is there, and each experiment's chapter is its name.
    for (name, pages) in lab::experiments::CHAPTERS {
        assert_eq!(pages[0], format!("{name}.md"));
        for page in lab::experiments::OPENING.iter().chain(*pages) {
            assert!(root.join("book/src").join(page).is_file(), "{page}");
        }
    }

    // Every claim that is judged names a registered experiment.
    for claim in lab::claims::all() {
        if let Some((experiment, _)) = claim.figure_ref() {
            assert!(
                all.iter().any(|e| e == experiment),
                "{}: {experiment}",
                claim.id
            );
        }
    }
}

/// The layering CONTRIBUTING.md describes: no crate but the runner takes
/// the supervisor (signals, the guard, the sweep of dead runs), and no
/// crate takes labtest (the tests' helpers) but as a dev-dependency, so
/// that a program builds from labkit and what it needs itself.
#[test]
fn no_program_links_the_supervisor_or_the_tests_helpers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = 0;
    for dir in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let manifest = dir.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        crates += 1;
        let toml: toml::Table = toml::from_str(&text).unwrap();
        let normal = toml.get("dependencies").and_then(|d| d.as_table());
        for banned in ["supervisor", "labtest"] {
            assert!(
                normal.is_none_or(|d| !d.contains_key(banned)),
                "{} depends on {banned}",
                manifest.display()
            );
        }
    }
    assert!(crates > 10, "only {crates} crates found");
    let toml: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap())
            .unwrap();
    assert!(toml["dependencies"].as_table().unwrap().contains_key("supervisor"));
    assert!(!toml["dependencies"].as_table().unwrap().contains_key("labtest"));
}

/// A library whose unit tests Cargo does not build (`[lib] test = false`,
/// to spare a test binary that would run nothing) has no unit test: a
/// `#[test]` added to it would never run.
#[test]
fn a_library_without_a_test_binary_has_no_unit_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    fn sources(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let mut untested = 0;
    for dir in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(dir.path().join("Cargo.toml")) else {
            continue;
        };
        let toml: toml::Table = toml::from_str(&text).unwrap();
        let lib = toml.get("lib").and_then(|l| l.as_table());
        if lib.and_then(|l| l.get("test")).and_then(|t| t.as_bool()) != Some(false) {
            continue;
        }
        untested += 1;
        let mut found = Vec::new();
        sources(&dir.path().join("src"), &mut found);
        for file in found {
            let code = std::fs::read_to_string(&file).unwrap();
            assert!(
                !code.contains("#[test]") && !code.contains("#[cfg(test)]"),
                "{} has unit tests, which its [lib] test = false never runs",
                file.display()
            );
        }
    }
    assert!(untested > 0, "no library without a test binary: is the scan broken?");
}
