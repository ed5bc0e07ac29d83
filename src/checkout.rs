//! The lab's checkout, found when the lab runs: where `runs/` and
//! `results/` live, whose commit a run records, and what a command may
//! write.
//!
//! The checkout is the tree the running binary sits in (`target/release/lab`
//! is in it), so a binary copied with its tree writes into its own tree;
//! `LAB_CHECKOUT` names another (the tests use scratch ones). Only the
//! reference command writes under `results/`: every folder a reader's
//! command writes into is checked by [`may_write`] first, which refuses
//! `results/`, a folder holding files git tracks, and, inside a lab
//! checkout, any place git does not ignore.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use labkit::{Error, Result};

/// The files that mark a folder as the lab's checkout.
const MARKS: [&str; 2] = ["Cargo.toml", "claims.toml"];

/// Does `dir` look like a checkout of the lab?
fn is_lab_checkout(dir: &Path) -> bool {
    MARKS.iter().all(|m| dir.join(m).is_file())
}

/// The lab checkout that holds the binary `exe`, if any.
fn tree_of(exe: &Path) -> Option<PathBuf> {
    exe.ancestors().skip(1).find(|d| is_lab_checkout(d)).map(Path::to_path_buf)
}

/// The checkout, or the one line that says why there is none.
fn find() -> std::result::Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("LAB_CHECKOUT").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return match std::fs::canonicalize(&dir) {
            Ok(real) if real.is_dir() => Ok(real),
            Ok(_) => Err(format!("LAB_CHECKOUT={}: not a folder", dir.display())),
            Err(e) => Err(format!(
                "LAB_CHECKOUT={}: {}",
                dir.display(),
                labkit::error::describe_io(&e)
            )),
        };
    }
    let exe =
        std::env::current_exe().and_then(std::fs::canonicalize).map_err(|e| {
            format!(
                "cannot find the lab's own path: {}",
                labkit::error::describe_io(&e)
            )
        })?;
    if let Some(dir) = tree_of(&exe) {
        return Ok(dir);
    }
    // `cargo run` with a target folder outside the tree: cargo names the
    // package's folder.
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) {
        if is_lab_checkout(&dir) {
            return Ok(std::fs::canonicalize(&dir).unwrap_or(dir));
        }
    }
    Err(format!(
        "cannot find the lab's checkout: {} is not inside one (a folder with {}); \
         set LAB_CHECKOUT to the checkout's folder",
        exe.display(),
        MARKS.join(" and ")
    ))
}

fn found() -> &'static std::result::Result<PathBuf, String> {
    static FOUND: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(find)
}

/// The checkout, or a usage error naming why there is none (`lab`'s
/// commands check it before anything else).
pub fn check() -> Result<PathBuf> {
    found().clone().map_err(Error::usage)
}

/// The lab's checkout ([`check`] has said there is one; without one, the
/// current folder, where nothing of the lab is found).
pub fn root() -> PathBuf {
    found().clone().unwrap_or_else(|_| PathBuf::from("."))
}

/// The lab's own sources (the C twins the experiments compile): the tree
/// this binary sits in, whatever `LAB_CHECKOUT` says about where runs go;
/// else the tree it was built from.
pub fn sources() -> PathBuf {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|exe| tree_of(&exe))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The folder of the reader's own runs.
pub fn runs_root() -> PathBuf {
    root().join("runs")
}

/// The folder of the committed reference runs.
pub fn results_root() -> PathBuf {
    root().join("results")
}

/// Where `path` really is, whether it exists yet or not: its nearest
/// existing folder with links resolved, and the rest of the path under it
/// (`results/new` from the checkout is `/…/results/new`).
pub fn real_path(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name())
        else {
            break;
        };
        rest.push(name);
        existing = parent;
    }
    let mut real = std::fs::canonicalize(existing).unwrap_or(existing.to_path_buf());
    for part in rest.iter().rev() {
        // `..` after a folder that does not exist: lexically, as the
        // kernel would once the folders are made.
        if *part == ".." {
            real.pop();
        } else if *part != "." {
            real.push(part);
        }
    }
    real
}

/// `git -C top ARGS`, as root too in a tree someone else owns: its exit
/// status and stdout, or `None` when git cannot say.
fn git(top: &Path, args: &[&std::ffi::OsStr]) -> Option<(bool, Vec<u8>)> {
    let out = Command::new("git")
        .arg("-c")
        .arg("safe.directory=*")
        .arg("-C")
        .arg(top)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    // 0 and 1 are answers (check-ignore: ignored, not ignored); 128 is an
    // error (not a git tree, no git).
    match out.status.code() {
        Some(0) => Some((true, out.stdout)),
        Some(1) => Some((false, out.stdout)),
        _ => None,
    }
}

/// The top of the git work tree that holds `real` (an absolute, resolved
/// path), if any.
fn work_tree(real: &Path) -> Option<PathBuf> {
    let existing = real.ancestors().find(|d| d.is_dir())?;
    let (ok, out) =
        git(existing, &["rev-parse".as_ref(), "--show-toplevel".as_ref()])?;
    let text = String::from_utf8(out).ok()?;
    let top = text.trim();
    (ok && !top.is_empty()).then(|| real_path(Path::new(top)))
}

/// May a reader's command write into folder `dir` (given on the command
/// line as `flag`, e.g. `--out`)? Refused, as a usage error naming the
/// folder: anything under the lab's `results/` (another checkout's too),
/// a folder that holds files git tracks, and inside a lab checkout any
/// place git does not ignore (`runs/` and `target/` are the places it
/// does), so that `git status` stays clean.
pub fn may_write(dir: &Path, flag: &str) -> Result<()> {
    let real = real_path(dir);
    let shown = if flag.is_empty() {
        dir.display().to_string()
    } else {
        format!("{flag} {}", dir.display())
    };
    let refuse = |why: String| Err(Error::usage(format!("{shown}: {why}")));
    let ours = real_path(&root());
    let tree = work_tree(&real);
    // The lab checkouts that hold this folder: ours, and the git tree's
    // when it is one (another clone of the lab).
    let mut checkouts = vec![ours.clone()];
    checkouts.extend(tree.clone().filter(|t| is_lab_checkout(t) && *t != ours));
    for checkout in &checkouts {
        if real.starts_with(checkout.join("results")) {
            return refuse(format!(
                "{} holds only the reference run, which only `lab reference` \
                 writes; give a folder elsewhere",
                checkout.join("results").display()
            ));
        }
    }
    let Some(top) = tree else {
        // No git tree (or no git): inside the lab's checkout only its
        // git-ignored folders may be written.
        if real.starts_with(&ours)
            && !["runs", "target"].iter().any(|d| real.starts_with(ours.join(d)))
        {
            return refuse(format!(
                "inside the lab's checkout {}, only runs/ and target/ are written",
                ours.display()
            ));
        }
        return Ok(());
    };
    let rel = real.strip_prefix(&top).unwrap_or(&real);
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let tracked = git(&top, &["ls-files".as_ref(), "--".as_ref(), rel.as_os_str()])
        .is_some_and(|(ok, out)| ok && !out.is_empty());
    if tracked {
        return refuse(format!(
            "holds files git tracks in {}; give a folder of its own",
            top.display()
        ));
    }
    if is_lab_checkout(&top) {
        let ignored = git(
            &top,
            &[
                "check-ignore".as_ref(),
                "-q".as_ref(),
                "--".as_ref(),
                rel.as_os_str(),
            ],
        )
        .is_some_and(|(ignored, _)| ignored);
        if !ignored {
            return refuse(format!(
                "inside the lab's checkout {}, where only folders git ignores \
                 (runs/, target/) are written; give one of those or a folder \
                 outside it",
                top.display()
            ));
        }
    }
    Ok(())
}

/// The reader's runs folder, checked: a `runs` that is not a folder, or
/// that leads where [`may_write`] refuses (a link into `results/`), is an
/// error that says so.
pub fn runs_folder() -> Result<PathBuf> {
    let runs = runs_root();
    match std::fs::metadata(&runs) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::usage(format!(
                "{} is not a folder: the lab keeps your runs there; move it away",
                runs.display()
            )));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io(runs.display(), e));
        }
        _ => {}
    }
    if runs.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink())
        && !runs.exists()
    {
        return Err(Error::usage(format!(
            "{} is a link to nothing: the lab keeps your runs there; remove it",
            runs.display()
        )));
    }
    may_write(&runs, "")?;
    Ok(runs)
}
