//! Record which compiler built the lab, for the machine facts of results;
//! and derive the runner's list of experiments, so that adding one takes
//! its module and its chapter, not a registration besides.
use std::path::Path;
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LAB_RUSTC={}", version.trim());
    println!("cargo:rerun-if-env-changed=RUSTC");
    experiments();
}

/// `$OUT_DIR/experiments.rs`: a `pub mod` for every module in
/// src/experiments/ (a `NAME.rs` or a `NAME/mod.rs`), then `ALL`, the
/// experiments whose chapter `book/src/SUMMARY.md` lists at its top level
/// (`- [Title](NAME.md)`) before its first part title (a `# ` line after
/// `# Summary`, such as the appendix's), in the book's order, and `EXTRA`,
/// the modules the book has no chapter for. A chapter without a module
/// stops the build; the pages of a part are no experiments. Also the book's
/// main path as read here, for the tests: `OPENING`, the pages before the
/// chapters, and `CHAPTERS`, each experiment's pages. This is the lab's one
/// reader of SUMMARY.md ([`summary`]).
fn experiments() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("src/experiments");
    let summary = root.join("book/src/SUMMARY.md");
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-changed={}", summary.display());
    let mut modules: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(&dir)
        .expect("src/experiments/")
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = e.file_name().into_string().ok()?;
            if path.is_dir() && path.join("mod.rs").is_file() {
                Some((name, path.join("mod.rs")))
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "mod").then(|| (stem.to_string(), path.clone()))
            }
        })
        .collect();
    modules.sort();
    let text = std::fs::read_to_string(&summary).expect("book/src/SUMMARY.md");
    let (opening, pages) = self::summary(&text);
    let chapters: Vec<String> = pages.iter().map(|(name, _)| name.clone()).collect();
    let module_of = |chapter: &str| chapter.replace('-', "_");
    for chapter in &chapters {
        if !modules.iter().any(|(m, _)| *m == module_of(chapter)) {
            panic!(
                "book/src/SUMMARY.md lists the chapter {chapter}.md, but src/experiments/ has \
                 no module {} for it",
                module_of(chapter)
            );
        }
    }
    let mut out = String::new();
    for (name, path) in &modules {
        out.push_str(&format!(
            "#[path = {:?}]\npub mod {name};\n",
            path.display().to_string()
        ));
    }
    let list = |names: Vec<&str>| -> String {
        names.iter().map(|m| format!("    {m}::EXPERIMENT,\n")).collect()
    };
    let all: Vec<String> = chapters.iter().map(|c| module_of(c)).collect();
    let extra: Vec<&str> = modules
        .iter()
        .map(|(m, _)| m.as_str())
        .filter(|m| !all.iter().any(|a| a == m))
        .collect();
    out.push_str(&format!(
        "/// Every experiment, in the book's order (`book/src/SUMMARY.md`).\n\
         pub const ALL: &[Experiment] = &[\n{}];\n",
        list(all.iter().map(String::as_str).collect())
    ));
    out.push_str(&format!(
        "/// What `lab run` runs besides the articles' experiments: the modules\n\
         /// with no chapter of their own (the controls, which the methodology\n\
         /// page shows).\n\
         pub const EXTRA: &[Experiment] = &[\n{}];\n",
        list(extra)
    ));
    out.push_str(&format!(
        "/// The pages of the book's main path before the experiments' chapters\n\
         /// (introduction, getting started, methodology), as SUMMARY.md lists\n\
         /// them (build.rs, its one reader).\n\
         pub const OPENING: &[&str] = &{opening:?};\n"
    ));
    let pages: String = pages
        .iter()
        .map(|(name, pages)| format!("    ({name:?}, &{pages:?}),\n"))
        .collect();
    out.push_str(&format!(
        "/// Each experiment's pages in the book's order (that of `ALL`): its\n\
         /// name, then its chapter and the sub-pages SUMMARY.md lists under it.\n\
         pub const CHAPTERS: &[(&str, &[&str])] = &[\n{pages}];\n"
    ));
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("experiments.rs");
    std::fs::write(dest, out).expect("write experiments.rs");
}

/// SUMMARY.md's main path: the pages before the experiments' chapters
/// (`[Title](page.md)` after `# Summary`), then each chapter listed at the
/// top level (`- [Title](NAME.md)`) with the sub-pages listed under it
/// (`  - [Title](page.md)`), up to its first part title (a `# ` line, such
/// as the appendix's) or separator (`---`).
fn summary(text: &str) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    assert!(
        text.lines().any(|l| l.starts_with("# Summary")),
        "book/src/SUMMARY.md has no `# Summary` heading, after which its chapters begin"
    );
    let page = |line: &str| -> Option<String> {
        let target = line.split("](").nth(1)?;
        Some(target.split(')').next()?.to_string())
    };
    let (mut opening, mut chapters) =
        (Vec::new(), Vec::<(String, Vec<String>)>::new());
    let lines = text.lines().skip_while(|l| !l.starts_with("# Summary")).skip(1);
    for line in lines.take_while(|l| !l.starts_with("# ") && l.trim() != "---") {
        if let Some(rest) = line.strip_prefix("- [") {
            let page = page(rest).expect("a chapter's line: - [Title](NAME.md)");
            let name = page.strip_suffix(".md").expect("a chapter is a .md file");
            chapters.push((name.to_string(), vec![page.clone()]));
        } else if let Some(rest) = line.strip_prefix("  - [") {
            let (_, pages) =
                chapters.last_mut().expect("a sub-page under a chapter");
            pages.push(page(rest).expect("a sub-page's line: - [Title](page.md)"));
        } else if let Some(rest) = line.strip_prefix('[') {
            opening
                .push(page(rest).expect("an opening page's line: [Title](page.md)"));
        }
    }
    (opening, chapters)
}
