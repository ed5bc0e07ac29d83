//! Where results go. Two kinds, never mixed:
//!
//! - a reader's own runs: `runs/<date>-<time>-<host>/NAME/` in the checkout,
//!   git-ignored, a new folder for every `lab run` (or one for a whole
//!   `lab run all`), so that earlier runs are kept and two runs at once each
//!   get their own;
//! - the reference run that the book shows: `results/<date>-<host>/NAME/`,
//!   written only by `lab run NAME --reference` (`just results`), which
//!   refuses a checkout with uncommitted changes.
//!
//! An experiment writes into a hidden staging folder beside its target
//! (`.NAME.partial-<pid>`); only a finished run is renamed into place, so an
//! interrupted one never looks like a whole one to `lab compare`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::results::checkout;
use labkit::{Error, Result};

/// The folder of the reader's own runs.
pub fn runs_root() -> PathBuf {
    checkout().join("runs")
}

/// The folder of the committed reference runs.
pub fn results_root() -> PathBuf {
    checkout().join("results")
}

/// The reference run the book shows: the newest `results/<date>-<host>/`
/// folder (names sort by date).
pub fn reference() -> Option<PathBuf> {
    newest(&results_root())
}

/// The reader's latest run: the newest folder under `runs/`.
pub fn latest() -> Option<PathBuf> {
    newest(&runs_root())
}

fn newest(root: &Path) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.file_name().to_str().is_some_and(is_run_name))
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs.pop()
}

/// A run folder's name starts with its date: `2026-12-01-...`.
fn is_run_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 11
        && b[..10].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// This machine's name as a folder-name word.
fn host() -> String {
    let name = nix::sys::utsname::uname()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_default();
    let word: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let word = word.trim_matches('-');
    if word.is_empty() { "host".into() } else { word.into() }
}

/// `2026-12-01` and `101500` from the current UTC time.
fn date_time() -> (String, String) {
    let now = crate::machine::utc_now(); // 2026-12-01T10:15:00Z
    (now[..10].to_string(), now[11..19].replace(':', ""))
}

/// A new, empty run folder `runs/<date>-<time>-<host>`; a second run in the
/// same second gets `-2`, `-3`, ... (`mkdir` decides, so two runs started
/// together never share one).
pub fn new_run() -> Result<PathBuf> {
    let root = runs_root();
    std::fs::create_dir_all(&root).map_err(|e| Error::io(root.display(), e))?;
    let (date, time) = date_time();
    let base = format!("{date}-{time}-{}", host());
    for n in 1..1000 {
        let name = if n == 1 { base.clone() } else { format!("{base}-{n}") };
        let dir = root.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(dir.display(), e)),
        }
    }
    Err(Error::failed(format!("{}: no free run folder name", root.display())))
}

/// The reference folder this command writes: `LAB_RUN_ID` when set (so
/// that `just results` puts every experiment in one folder even across
/// midnight), else `results/<date>-<host>`.
pub fn reference_run() -> Result<PathBuf> {
    let dirty = crate::machine::uncommitted(&checkout()).ok_or_else(|| {
        Error::usage(format!(
            "--reference needs the lab's git checkout; {} is not one",
            checkout().display()
        ))
    })?;
    if !dirty.is_empty() {
        let shown: Vec<&str> = dirty.iter().take(5).map(|l| l.trim()).collect();
        return Err(Error::usage(format!(
            "--reference refuses a checkout with uncommitted changes ({}{}): \
             commit them first, so the reference names a clean commit",
            shown.join(", "),
            if dirty.len() > 5 { ", ..." } else { "" }
        )));
    }
    let name = match std::env::var("LAB_RUN_ID") {
        Ok(id) if !id.is_empty() => {
            if !is_run_name(&id) || id.contains('/') {
                return Err(Error::usage(format!(
                    "LAB_RUN_ID '{id}' must be a folder name starting with a \
                     date, like 2026-12-01-myhost"
                )));
            }
            id
        }
        _ => format!("{}-{}", date_time().0, host()),
    };
    let dir = results_root().join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
    Ok(dir)
}

/// Where one experiment's files go inside a run: `RUN/NAME` or, for a
/// sub-run such as `--variant cpu0`, `RUN/NAME/cpu0`.
pub fn target(run: &Path, experiment: &str, variant: Option<&str>) -> PathBuf {
    let dir = run.join(experiment);
    match variant {
        Some(v) => dir.join(v),
        None => dir,
    }
}

/// The results file of `experiment` that another experiment may build on
/// (mq-sweep takes its switch cost from ctx-switch): the one in the run
/// being written, else the reference run's.
pub fn earlier_result(experiment: &str) -> Option<PathBuf> {
    let file = format!("{experiment}.json");
    let shared = PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|p| p.run.clone());
    shared
        .into_iter()
        .chain(reference())
        .map(|run| run.join(experiment).join(&file))
        .find(|path| path.is_file())
}

/// An experiment being written: its staging folder and where it goes.
#[derive(Debug)]
pub struct Pending {
    pub staging: PathBuf,
    pub target: PathBuf,
    /// The run folder it belongs to (for the then-and-now table).
    pub run: PathBuf,
}

/// The experiment this process is writing now; the runner finishes it
/// when the experiment returns (and an interrupt removes it).
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// Start writing an experiment into `target` inside `run`: make a hidden
/// staging folder beside the target and return it.
pub fn stage(run: &Path, target: &Path) -> Result<PathBuf> {
    let parent = target.parent().expect("a target inside a run folder");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent.display(), e))?;
    let leaf = target.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let staging = parent.join(format!(".{leaf}.partial-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .map_err(|e| Error::io(staging.display(), e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| Error::io(staging.display(), e))?;
    let pending = Pending {
        staging: staging.clone(),
        target: target.to_path_buf(),
        run: run.to_path_buf(),
    };
    *PENDING.lock().unwrap_or_else(|e| e.into_inner()) = Some(pending);
    Ok(staging)
}

/// The experiment being written, held: the runner commits or discards it,
/// and an interrupt removes it, each holding this lock throughout, so
/// neither sees it half done by the other (a run interrupted just as it
/// failed would otherwise leave its run folder behind).
pub fn pending() -> std::sync::MutexGuard<'static, Option<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pending {
    /// Rename the finished staging folder into place. A target that
    /// exists (the reference re-run for one experiment) is replaced; its
    /// sub-runs (`NAME/cpu0`, ...) move into the new one. If the new
    /// folder cannot be put in place, the old one is put back.
    pub fn commit(&self) -> Result<()> {
        let err = |p: &Path, e| Error::io(p.display(), e);
        if !self.target.exists() {
            return std::fs::rename(&self.staging, &self.target)
                .map_err(|e| err(&self.target, e));
        }
        let old = self.staging.with_extension("old");
        std::fs::rename(&self.target, &old).map_err(|e| err(&self.target, e))?;
        if let Err(e) = std::fs::rename(&self.staging, &self.target) {
            // The results that were there go back: a failed commit loses
            // nothing that was committed before.
            let _ = std::fs::rename(&old, &self.target);
            return Err(err(&self.target, e));
        }
        for entry in std::fs::read_dir(&old).map_err(|e| err(&old, e))? {
            let entry = entry.map_err(|e| err(&old, e))?;
            let into = self.target.join(entry.file_name());
            if entry.file_type().is_ok_and(|t| t.is_dir()) && !into.exists() {
                std::fs::rename(entry.path(), &into).map_err(|e| err(&into, e))?;
            }
        }
        std::fs::remove_dir_all(&old).map_err(|e| err(&old, e))
    }

    /// Remove the unfinished staging folder, and the reader's run folders
    /// around it that this leaves empty (a failed or interrupted run leaves
    /// nothing; finished results and reference folders stay). Returns what
    /// it removed.
    pub fn discard(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        if std::fs::remove_dir_all(&self.staging).is_ok() {
            removed.push(self.staging.clone());
        }
        let root = runs_root();
        let mut dir = self.staging.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&root) && *d != root) {
            // remove_dir removes only an empty folder.
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            removed.push(d.to_path_buf());
            dir = d.parent();
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_start_with_a_date() {
        assert!(is_run_name("2026-12-01-vm"));
        assert!(is_run_name("2026-12-01-101500-vm-2"));
        assert!(!is_run_name(".fork.partial-12"));
        assert!(!is_run_name("2026-12-01"));
        assert!(!is_run_name("fork-vs-thread"));
    }

    #[test]
    fn a_commit_that_fails_puts_the_old_results_back() {
        // Both stage through the one pending experiment: one at a time.
        let _serial = labkit::testing::serial();
        let run = tempfile::tempdir().unwrap();
        let target = target(run.path(), "demo", None);
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("demo.json"), "old").unwrap();
        let staging = stage(run.path(), &target).unwrap();
        let pending = pending().take().unwrap();
        // The new results cannot be renamed into place: they are gone.
        std::fs::remove_dir(&staging).unwrap();
        assert!(pending.commit().is_err());
        assert_eq!(
            std::fs::read_to_string(target.join("demo.json")).unwrap(),
            "old"
        );
    }

    #[test]
    fn commit_replaces_a_target_and_keeps_its_sub_runs() {
        // Both stage through the one pending experiment: one at a time.
        let _serial = labkit::testing::serial();
        let run = tempfile::tempdir().unwrap();
        let target = target(run.path(), "demo", None);
        std::fs::create_dir_all(target.join("cpu0")).unwrap();
        std::fs::write(target.join("demo.json"), "old").unwrap();
        std::fs::write(target.join("cpu0/demo.json"), "sub").unwrap();
        let staging = stage(run.path(), &target).unwrap();
        assert!(staging.file_name().unwrap().to_str().unwrap().starts_with('.'));
        std::fs::write(staging.join("demo.json"), "new").unwrap();
        let pending = pending().take().unwrap();
        pending.commit().unwrap();
        let read = |p: &str| std::fs::read_to_string(target.join(p)).unwrap();
        assert_eq!(read("demo.json"), "new");
        assert_eq!(read("cpu0/demo.json"), "sub");
        let names: Vec<_> = std::fs::read_dir(run.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("demo")], "no leftovers");
    }
}
