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
/// stops the build; the pages of a part are no experiments.
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
    assert!(
        text.lines().any(|l| l.starts_with("# Summary")),
        "book/src/SUMMARY.md has no `# Summary` heading, after which its chapters begin"
    );
    let chapters: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("# Summary"))
        .skip(1)
        .take_while(|l| !l.starts_with("# "))
        .filter_map(|l| l.strip_prefix("- ["))
        .filter_map(|l| {
            l.split("](").nth(1)?.strip_suffix(".md)").map(str::to_string)
        })
        .collect();
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
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("experiments.rs");
    std::fs::write(dest, out).expect("write experiments.rs");
}
