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
//!
//! Every run folder the lab makes holds a manifest, `run.json` ([`Manifest`]):
//! what is not a lab run is never judged or written into. The process that
//! writes a run holds an `flock` on the run folder for as long as it lives;
//! the kernel drops it when the process dies, `kill -9` included. So the
//! next run tells a dead run from a live one, and [`sweep`] removes what a
//! dead one left behind (its staging folders, a run folder with no finished
//! experiment, its temporary directories) and never a live run's files. A
//! run whose manifest has no end is unfinished: never "your latest run".

use labkit::cleanup::DirLock;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::checkout::root as checkout;
pub use crate::checkout::{results_root, runs_root};
use crate::document::Document;
// This process's command, as a manifest records it: `lab ARGS`.
use crate::results::command_line as this_command;
use labkit::{Error, Result};

/// The manifest's file name in a run folder.
pub const MANIFEST: &str = "run.json";

/// What makes a folder a lab run: written when the run starts, given its
/// end when the run is over.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The manifest's format; its presence marks a lab run.
    pub lab_run: u32,
    /// `run` (a reader's own, under runs/) or `reference` (results/).
    pub kind: String,
    /// The command that started it.
    pub command: String,
    /// The commands that put results into it since `command`, in order:
    /// each `lab run NAME --reference` into a reference folder, listed as
    /// its first results are committed ([`Pending::commit`]), so that one
    /// that fails adds nothing. `lab reference`, which makes the
    /// folder again whole, empties it ([`begin_reference`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// The lab's version.
    pub lab_version: String,
    pub started: String,
    /// When it was finished; `None` while it runs, or if it died.
    pub ended: Option<String>,
    /// The experiments that failed in it (`lab run all` goes on past them).
    #[serde(default)]
    pub failed: Vec<String>,
    /// The results folders it holds (`NAME`, `NAME/VARIANT`), each recorded
    /// as it is committed ([`Pending::commit`]); `None` in a manifest from
    /// before they were recorded, whose run is scanned instead
    /// ([`experiments_in`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folders: Option<Vec<String>>,
    /// The rules its verdicts were judged by, stored in the run folder
    /// (`crate::claims::store_rules`); none in a run judged before they
    /// were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Rules>,
}

/// The rules a run's verdicts were judged by: the file in the run folder
/// that holds them, and its SHA-256 (hex), so that a hand edit shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    pub file: String,
    pub sha256: String,
}

impl Manifest {
    /// The manifest of `run`: `None` when it has none; an error naming the
    /// file when it is there but is not a manifest.
    pub fn read(run: &Path) -> Result<Option<Manifest>> {
        let path = run.join(MANIFEST);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::failed(format!("{}: not a run manifest: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display(), e)),
        }
    }

    fn write(&self, run: &Path) -> Result<()> {
        crate::results::write_json(&run.join(MANIFEST), self)
    }
}

/// Record in `run`'s manifest the rules its verdicts were judged by. A
/// folder with no manifest (`--out`'s) has nowhere to record them.
pub fn record_rules(run: &Path, rules: Rules) -> Result<()> {
    let Some(mut manifest) = Manifest::read(run)? else { return Ok(()) };
    if manifest.rules.as_ref() != Some(&rules) {
        manifest.rules = Some(rules);
        manifest.write(run)?;
    }
    Ok(())
}

/// Record in `run`'s manifest that it holds results folder `folder`: a
/// manifest that has no list yet (one from before they were recorded)
/// starts from what the run holds.
fn record_folder(run: &Path, folder: &str) -> Result<()> {
    let Some(mut manifest) = Manifest::read(run)? else { return Ok(()) };
    let had = manifest.folders.is_some();
    let list = manifest.folders.get_or_insert_with(|| scan(run));
    let new = !list.iter().any(|f| f == folder);
    if new {
        list.push(folder.to_string());
    }
    if new || !had { manifest.write(run) } else { Ok(()) }
}

/// How this process's command goes into the manifest of a folder another
/// command made, once its first results are in place ([`joined`]): until
/// then a command that fails changes nothing there.
enum Join {
    /// Listed under `added`; the folder's first command, started when
    /// this one was, if it holds no results yet (its first command failed).
    Add { started: String },
    /// `lab reference`: the folder is made again whole, so its manifest
    /// starts again, at this start ([`begin_reference`]).
    Restart { started: String },
}

/// The run folders this process claimed and has put no results into yet.
static JOINING: Mutex<Vec<(PathBuf, Join)>> = Mutex::new(Vec::new());

fn joining() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Join)>> {
    JOINING.lock().unwrap_or_else(|e| e.into_inner())
}

/// This process's first results are in place in `run`, which already held
/// `before` results folders: its manifest takes this command, as
/// [`Join`] says, and is no longer ended. Later results change nothing.
fn joined(run: &Path, before: usize) -> Result<()> {
    let mut list = joining();
    let Some(k) = list.iter().position(|(dir, _)| dir == run) else { return Ok(()) };
    let (_, join) = list.remove(k);
    drop(list);
    let Some(mut manifest) = Manifest::read(run)? else { return Ok(()) };
    match join {
        Join::Restart { started } => {
            manifest.command = this_command();
            manifest.started = started;
            manifest.added.clear();
            manifest.failed.clear();
        }
        // Its first command left nothing: this one made it.
        Join::Add { started } if before == 0 => {
            manifest.command = this_command();
            manifest.started = started;
            manifest.added.clear();
        }
        Join::Add { .. } => manifest.added.push(this_command()),
    }
    manifest.ended = None;
    manifest.write(run)
}

/// The run folders this process writes, locked for as long as it lives: a
/// static, since the lock must outlive every value (it is the process's
/// mark of life), and the kernel releases it however the process ends.
static HELD: Mutex<Vec<(PathBuf, DirLock)>> = Mutex::new(Vec::new());

/// Take the run folder `dir`'s lock without waiting: `Ok(None)` when a
/// live process holds it.
fn try_lock(dir: &Path) -> Result<Option<DirLock>> {
    labkit::cleanup::try_lock_dir(dir).map_err(|e| Error::io(dir.display(), e))
}

/// Is a live process writing the run `dir` (its lock is held)?
pub fn is_live(dir: &Path) -> bool {
    matches!(try_lock(dir), Ok(None))
}

/// Lock `run` for the life of this process and give it a manifest if it
/// has none (a reference folder that several commands fill keeps its
/// first, and lists the others in `added`). A run another live process is
/// writing is refused.
fn claim(run: &Path, kind: &str) -> Result<()> {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    // This process may hold it already: a reference made again with more
    // rounds. (A second flock of ours would conflict with our own.)
    let again = held.iter().any(|(dir, _)| dir == run);
    if !again {
        let lock = try_lock(run)?.ok_or_else(|| {
            Error::usage(format!(
                "{}: another lab process is writing this run; wait for it to end",
                run.display()
            ))
        })?;
        held.push((run.to_path_buf(), lock));
    }
    drop(held);
    let mut manifest = Manifest::read(run)?.unwrap_or_else(|| Manifest {
        lab_run: 1,
        kind: kind.into(),
        command: String::new(),
        added: vec![],
        lab_version: env!("CARGO_PKG_VERSION").into(),
        started: String::new(),
        ended: None,
        failed: vec![],
        // What the folder holds already (nothing, unless a lab from before
        // manifests wrote it).
        folders: Some(scan(run)),
        rules: None,
    });
    // A folder another command made takes this one when its first results
    // are in place ([`joined`]); a new one takes it now.
    if manifest.command.is_empty() {
        manifest.command = this_command();
        manifest.started = crate::machine::utc_now();
        manifest.ended = None;
        manifest.write(run)?;
    } else if !again {
        let started = crate::machine::utc_now();
        joining().push((run.to_path_buf(), Join::Add { started }));
    }
    Ok(())
}

/// Mark `run` finished, with the experiments that failed in it.
pub fn finish(run: &Path, failed: &[&str]) -> Result<()> {
    let Some(mut manifest) = Manifest::read(run)? else { return Ok(()) };
    manifest.ended = Some(crate::machine::utc_now());
    manifest.failed = failed.iter().map(|f| f.to_string()).collect();
    manifest.write(run)
}

/// Is `dir` a lab run: a folder with a manifest, or (made before the lab
/// wrote manifests) one that holds an experiment's results?
pub fn is_run(dir: &Path) -> Result<bool> {
    let manifest = Manifest::read(dir)
        .map_err(|e| Error::usage(format!("not a lab run that can be read: {e}")))?;
    Ok(manifest.is_some() || !experiments_in(dir).is_empty())
}

/// Is `run` finished: its manifest has an end (a run made before the lab
/// wrote manifests counts as finished when it holds results)? A reference
/// is made by several commands, each of which puts its experiment in
/// place whole: one that holds results and that no process is writing is
/// finished, whatever its manifest's end says.
pub fn is_finished(run: &Path) -> bool {
    finished(run, &Manifest::read(run))
}

/// [`is_finished`], of `run` with its manifest as read.
fn finished(run: &Path, manifest: &Result<Option<Manifest>>) -> bool {
    match manifest {
        Ok(Some(m)) if m.kind == "reference" => {
            m.ended.is_some() || (!is_live(run) && !experiments_in(run).is_empty())
        }
        Ok(Some(m)) => m.ended.is_some(),
        Ok(None) => !experiments_in(run).is_empty(),
        Err(_) => false,
    }
}

/// Is `run` a reference (its manifest says so)?
pub fn is_reference(run: &Path) -> bool {
    Manifest::read(run).ok().flatten().is_some_and(|m| m.kind == "reference")
}

/// The finished results folders of a run, `NAME` and `NAME/VARIANT`: as
/// its manifest lists them, in the order they were committed (those whose
/// results file is there); for a run whose manifest has no list (made
/// before the lab recorded them, like an older reference), what the folder
/// holds ([`scan`]). What the lab's experiments are today plays no part: a
/// run lists what it was made with.
pub fn experiments_in(run: &Path) -> Vec<String> {
    match Manifest::read(run) {
        Ok(Some(Manifest { folders: Some(list), .. })) => list
            .into_iter()
            .filter(|f| crate::document::file_of(run, f).is_file())
            .collect(),
        _ => scan(run),
    }
}

/// The results folders found in `run`: each `NAME/NAME.json` and
/// `NAME/SUB/NAME.json` (hidden folders, a staging one, left out), by
/// name.
fn scan(run: &Path) -> Vec<String> {
    let folders = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|d| d.ok())
            .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|d| d.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    };
    let mut found = Vec::new();
    for name in folders(run) {
        let dir = run.join(&name);
        if dir.join(format!("{name}.json")).is_file() {
            found.push(name.clone());
        }
        for sub in folders(&dir) {
            if dir.join(&sub).join(format!("{name}.json")).is_file() {
                found.push(format!("{name}/{sub}"));
            }
        }
    }
    found
}

/// The commits the results of `run` were made from, each once, sorted.
pub fn commits_of(run: &Path) -> Vec<String> {
    let mut commits: Vec<String> = experiments_in(run)
        .iter()
        .filter_map(|folder| {
            let doc = Document::read_folder(run, folder).ok()??;
            Some(doc.header().ok()?.machine.commit)
        })
        .collect();
    commits.sort();
    commits.dedup();
    commits
}

/// How far the checkout has moved on from the commits `run` was made
/// from: "made from commit abc (5 commits that touch crates/ since)", the
/// range when its experiments were made from several; `None` when its
/// results name no commit this checkout knows (or it is not a checkout).
pub fn commits_behind(run: &Path) -> Option<String> {
    let dir = checkout();
    let commits = commits_of(run);
    let mut behind: Vec<usize> = Vec::new();
    for commit in &commits {
        let clean = commit.trim_end_matches("-dirty");
        let range = format!("{clean}..HEAD");
        let n = crate::machine::git(
            &dir,
            &["rev-list", "--count", &range, "--", "crates"],
        )?;
        behind.push(n.parse().ok()?);
    }
    let (lo, hi) = (*behind.iter().min()?, *behind.iter().max()?);
    let count = if lo == hi { lo.to_string() } else { format!("{lo} to {hi}") };
    let made = if commits.len() == 1 {
        format!("commit {}", commits[0])
    } else {
        format!("{} commits ({})", commits.len(), commits.join(", "))
    };
    let (commit, touch, lie) = if hi == 1 {
        ("commit", "touches", "lies")
    } else {
        ("commits", "touch", "lie")
    };
    Some(format!(
        "{} was made from {made}; {count} {commit} that {touch} crates/ {lie} between \
         it and this checkout",
        run.display()
    ))
}

/// Remove what dead runs left behind, and say what: staging folders and
/// half-swapped results in the run folders of `runs/` whose writer is
/// gone, the reader's run folders that hold no finished experiment, and the
/// temporary directories of dead processes. A live run's files are never
/// touched (its lock is held), and nothing under `results/` is: only the
/// reference command tidies that ([`reference_run`]).
pub fn sweep() -> Vec<PathBuf> {
    let mut removed = sweep_root(&runs_root(), true);
    removed.extend(supervisor::remove_dead_tempdirs());
    removed
}

/// [`sweep`]'s work in the run folders of `root`.
fn sweep_root(root: &Path, reader_runs: bool) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for run in dated_runs(root) {
        sweep_run(&run, reader_runs, &mut removed);
    }
    removed
}

fn sweep_run(run: &Path, reader_run: bool, removed: &mut Vec<PathBuf>) {
    let manifest = Manifest::read(run).ok().flatten();
    // Held while we look, so the run cannot start again meanwhile.
    let _lock = match try_lock(run) {
        Ok(Some(lock)) => lock,
        _ => return, // live, or unreadable: not ours to judge
    };
    let mut dirs = vec![run.to_path_buf()];
    dirs.extend(
        std::fs::read_dir(run)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| e.file_name().to_str().is_some_and(|n| !n.starts_with('.')))
            .map(|e| e.path()),
    );
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") && entry.file_type().is_ok_and(|t| t.is_file())
            {
                // A file killed half-written (write_file's temporary name).
                if std::fs::remove_file(entry.path()).is_ok() {
                    removed.push(entry.path());
                }
                continue;
            }
            let Some(leaf) = name.strip_prefix('.') else { continue };
            let path = entry.path();
            let stale = if let Some((_, pid)) = leaf.rsplit_once(".partial-") {
                // A run with no manifest (an older lab's) has no lock: its
                // staging folder is stale when its process is gone.
                manifest.is_some() || !pid_alive(pid)
            } else if let Some(target) = leaf.strip_suffix(".old") {
                // A commit killed between its two renames: the old results
                // go back if the new ones never arrived.
                let into = dir.join(target);
                if !into.exists() && std::fs::rename(&path, &into).is_ok() {
                    continue;
                }
                manifest.is_some()
            } else {
                false
            };
            if stale && std::fs::remove_dir_all(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    let unfinished = manifest.as_ref().is_some_and(|m| m.ended.is_none());
    if reader_run
        && unfinished
        && experiments_in(run).is_empty()
        && std::fs::remove_dir_all(run).is_ok()
    {
        removed.push(run.to_path_buf());
    }
}

/// Is process `pid` (as a folder name spells it) alive?
fn pid_alive(pid: &str) -> bool {
    pid.parse::<u32>().is_ok_and(|p| Path::new(&format!("/proc/{p}")).exists())
}

/// [`sweep`], and one line on stderr when it removed anything.
pub fn sweep_and_say() {
    say_removed(&sweep());
}

fn say_removed(removed: &[PathBuf]) {
    if !removed.is_empty() {
        let shown: Vec<String> =
            removed.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "lab: removed what {} left behind: {}",
            if removed.len() == 1 { "a dead run" } else { "dead runs" },
            shown.join(", ")
        );
    }
}

/// The reference run the book shows ([`reference_in`] `results/`).
pub fn reference() -> Option<PathBuf> {
    reference_in(&results_root())
}

/// The reference in `results`: the newest finished `<date>-<host>/` folder
/// that `lab reference` made whole (names sort by date), or, where none
/// was, the newest finished one. A newer folder passed over (being
/// written, its manifest damaged, no results, one experiment's
/// `--reference` alone) is named on stderr with the reason.
pub fn reference_in(results: &Path) -> Option<PathBuf> {
    // Newest first, each with its manifest, read once.
    let runs: Vec<_> = dated_runs(results)
        .into_iter()
        .rev()
        .map(|run| {
            let manifest = Manifest::read(&run);
            (run, manifest)
        })
        .collect();
    let whole = |m: &Result<Option<Manifest>>| {
        let made_by = |m: &Manifest| {
            m.command.split_whitespace().take(2).eq(["lab", "reference"])
        };
        matches!(m, Ok(Some(m)) if made_by(m))
    };
    let any_whole = runs.iter().any(|(run, m)| finished(run, m) && whole(m));
    for (run, manifest) in &runs {
        let why = match manifest {
            Err(e) => format!("its manifest is damaged ({e})"),
            _ if !finished(run, manifest) && is_live(run) => {
                "a lab process is still writing it".into()
            }
            _ if !finished(run, manifest) => "it holds no results".into(),
            Ok(Some(m)) if any_whole && !whole(manifest) => format!(
                "made by `{}`, not `lab reference`: set LAB_RUN_ID to the \
                 reference's folder to add an experiment to it",
                m.command
            ),
            _ => return Some(run.clone()),
        };
        eprintln!("lab: passed over the reference {}: {why}", run.display());
    }
    None
}

/// The reader's latest run: the newest finished run under `runs/` that
/// reads. Every newer run passed over (still running, cut short, a
/// damaged manifest or results file) is named on stderr with the reason.
pub fn latest() -> Option<PathBuf> {
    latest_where(&|_| Ok(()))
}

/// [`latest`], passing over too a run one of whose results files `check`
/// finds wrong (a layer above this one reads what this one cannot: a
/// headline figure). Each file is read once.
pub fn latest_where(check: &Check) -> Option<PathBuf> {
    let mut runs = dated_runs(&runs_root());
    while let Some(run) = runs.pop() {
        match unreadable(&run, check) {
            None => return Some(run),
            Some(why) => eprintln!("lab: passed over {}: {why}", run.display()),
        }
    }
    None
}

/// What a caller checks of a results file beyond its header.
pub type Check = dyn Fn(&Document) -> std::result::Result<(), String>;

/// Why `run` cannot be taken as a finished run, if it cannot: still
/// being written, never finished, a manifest or a results file that does
/// not read (its header, or what `check` says), a results file its
/// manifest lists gone, no results.
fn unreadable(run: &Path, check: &Check) -> Option<String> {
    let manifest = match Manifest::read(run) {
        Ok(m) => m,
        Err(e) => return Some(format!("its manifest is damaged ({e})")),
    };
    if is_live(run) {
        return Some("a lab process is still writing it".into());
    }
    if manifest.as_ref().is_some_and(|m| m.ended.is_none()) {
        return Some("it never finished (cut short, or killed)".into());
    }
    if let Some(gone) =
        manifest.as_ref().and_then(|m| gone(run, m).into_iter().next())
    {
        return Some(format!("a results file is missing ({gone})"));
    }
    let found = experiments_in(run);
    if found.is_empty() {
        return Some("it holds no results".into());
    }
    for folder in found {
        let read = Document::read_folder(run, &folder).map_err(|e| e.to_string());
        let checked = read.and_then(|doc| {
            let Some(doc) = doc else { return Ok(()) };
            doc.header().map_err(|e| e.to_string())?;
            check(&doc).map_err(|e| format!("{folder}: {e}"))
        });
        if let Err(e) = checked {
            return Some(format!("a results file is damaged ({e})"));
        }
    }
    None
}

/// The results files `run`'s manifest lists as in place but that are not
/// there (deleted since), each `FOLDER/NAME.json`: a damaged run. A
/// folder the run names as failed, or a run still being written, has
/// none missing.
pub fn missing_results(run: &Path) -> Vec<String> {
    match Manifest::read(run) {
        Ok(Some(m)) if !is_live(run) => gone(run, &m),
        _ => vec![],
    }
}

/// [`missing_results`], of the manifest `m` read.
fn gone(run: &Path, m: &Manifest) -> Vec<String> {
    let listed = m.folders.iter().flatten().filter(|f| !m.failed.contains(f));
    let files = listed.map(|f| crate::document::file_of(run, f));
    let gone = files.filter(|file| !file.is_file());
    gone.map(|file| file.strip_prefix(run).unwrap_or(&file).display().to_string())
        .collect()
}

/// The run folders in `root` (folders named by date), oldest first.
fn dated_runs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut runs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.file_name().to_str().is_some_and(is_run_name))
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs
}

/// A run folder's name starts with its date: `2026-12-01-...`.
fn is_run_name(name: &str) -> bool {
    let b = name.as_bytes();
    let number = |r: std::ops::Range<usize>| {
        std::str::from_utf8(&b[r]).ok().and_then(|t| t.parse::<u32>().ok())
    };
    b.len() > 11
        && b[..11].iter().enumerate().all(|(i, c)| match i {
            4 | 7 | 10 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
        && number(5..7).is_some_and(|m| (1..=12).contains(&m))
        && number(8..10).is_some_and(|d| (1..=31).contains(&d))
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
    let root = crate::checkout::runs_folder()?;
    std::fs::create_dir_all(&root).map_err(|e| Error::io(root.display(), e))?;
    let (date, time) = date_time();
    let base = format!("{date}-{time}-{}", host());
    for n in 1..1000 {
        let name = if n == 1 { base.clone() } else { format!("{base}-{n}") };
        let dir = root.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                // Locked before the manifest exists: a sweep sees a manifest
                // only in a folder whose writer can be told apart.
                claim(&dir, "run")?;
                *MADE.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.clone());
                return Ok(dir);
            }
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
    let name = match std::env::var_os("LAB_RUN_ID") {
        Some(id) if !id.is_empty() => {
            let word = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
            match id.to_str() {
                Some(id)
                    if is_run_name(id)
                        && id.len() <= 255
                        && id.chars().all(word) =>
                {
                    id.to_string()
                }
                _ => {
                    return Err(Error::usage(format!(
                        "LAB_RUN_ID {id:?} must be a folder name starting with a \
                         date, like 2026-12-01-myhost (at most 255 letters, digits, \
                         - _ .)"
                    )));
                }
            }
        }
        _ => format!("{}-{}", date_time().0, host()),
    };
    // Only the reference command tidies what a dead one left in results/.
    say_removed(&sweep_root(&results_root(), false));
    let dir = results_root().join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
    claim(&dir, "reference")?;
    Ok(dir)
}

/// `lab reference`'s folder ([`reference_run`]), which it makes again
/// whole: its manifest starts again, at this start, once the first results
/// are in place, where a command that remakes one experiment keeps the
/// folder's first start.
pub fn begin_reference() -> Result<PathBuf> {
    let started = crate::machine::utc_now();
    let run = reference_run()?;
    let mut list = joining();
    list.retain(|(dir, _)| dir != &run);
    list.push((run.clone(), Join::Restart { started }));
    Ok(run)
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

/// The run folder this process made ([`new_run`]), for an interrupt to
/// remove if nothing in it finished ([`remove_unfinished_run`]).
static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// After an interrupt: the run folder this process made, removed if no
/// experiment in it finished (`lab run all` stopped in its first step), as
/// a failed `lab run NAME` leaves nothing. A folder with finished results
/// stays. Returns what it removed.
pub fn remove_unfinished_run() -> Vec<PathBuf> {
    let made = MADE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match made {
        Some(run) if forget_if_empty(&run) && std::fs::remove_dir(&run).is_ok() => {
            vec![run]
        }
        _ => vec![],
    }
}

/// Remove the manifest of `run` if no experiment in it finished: a
/// manifest alone is not a run. Says whether it did.
fn forget_if_empty(run: &Path) -> bool {
    if !run.is_dir() || !experiments_in(run).is_empty() {
        return false;
    }
    let _ = std::fs::remove_file(run.join(MANIFEST));
    labkit::cleanup::keep_if_killed(run);
    true
}

/// An experiment being written: its staging folder and where it goes.
#[derive(Debug)]
pub struct Pending {
    pub staging: PathBuf,
    pub target: PathBuf,
    /// The run folder it belongs to (for the then-and-now table).
    pub run: PathBuf,
    /// This experiment made the run folder (`lab run NAME`): a failure
    /// removes the folder with it. Under `lab run all`, or for the
    /// reference, the folder is someone else's to keep or remove.
    pub owns_run: bool,
}

/// The experiment this process is writing now; the runner commits it when
/// the experiment returns. A static because a signal path needs it: the
/// interrupt, on a thread of its own, removes it (`lab`'s main) and must
/// find it whatever the main thread is doing.
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// Start writing an experiment into `target` inside `run`: make a hidden
/// staging folder beside the target and return it.
pub fn stage(run: &Path, target: &Path, owns_run: bool) -> Result<PathBuf> {
    let parent = target.parent().expect("a target inside a run folder");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent.display(), e))?;
    let leaf = target.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let staging = parent.join(format!(".{leaf}.partial-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .map_err(|e| Error::io(staging.display(), e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| Error::io(staging.display(), e))?;
    // A runner killed outright: its guard removes the staging folder.
    labkit::cleanup::remove_if_killed(&staging);
    let pending = Pending {
        staging: staging.clone(),
        target: target.to_path_buf(),
        run: run.to_path_buf(),
        owns_run,
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
        // Listed in the run's manifest first: a listed folder whose results
        // never arrive (the rename failed, the runner died) is passed over
        // when the list is read, where results in place but unlisted would
        // be lost to it.
        let before = experiments_in(&self.run).len();
        if let Ok(folder) = self.target.strip_prefix(&self.run) {
            record_folder(&self.run, &folder.to_string_lossy())?;
        }
        self.commit_staging()?;
        labkit::cleanup::keep_if_killed(&self.staging);
        joined(&self.run, before)
    }

    fn commit_staging(&self) -> Result<()> {
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
        labkit::cleanup::keep_if_killed(&self.staging);
        // A run folder this experiment made and that holds nothing finished
        // goes too: its manifest alone is not a run.
        if self.owns_run {
            forget_if_empty(&self.run);
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
        // A date, then a dash.
        assert!(!is_run_name("2026-01-05x-y"));
        assert!(!is_run_name("2026-99-99-vm"));
        assert!(!is_run_name("2026-12-00-vm"));
    }

    /// A run folder with an unfinished manifest and a staging folder.
    fn unfinished(run: &Path) -> PathBuf {
        std::fs::create_dir_all(run).unwrap();
        let m = Manifest {
            lab_run: 1,
            kind: "run".into(),
            command: "lab run demo".into(),
            added: vec![],
            lab_version: "0".into(),
            started: "2026-01-01T00:00:00Z".into(),
            ended: None,
            failed: vec![],
            // Listing nothing: the run is scanned, as an older one is.
            folders: None,
            rules: None,
        };
        m.write(run).unwrap();
        let staging = run.join(".demo.partial-1");
        std::fs::create_dir(&staging).unwrap();
        staging
    }

    /// The run folder `ref` under `root`, as [`unfinished`] makes it, its
    /// manifest then changed by `edit`.
    fn edited(root: &Path, edit: impl FnOnce(&mut Manifest)) -> PathBuf {
        let run = root.join("ref");
        unfinished(&run);
        let mut m = Manifest::read(&run).unwrap().unwrap();
        edit(&mut m);
        m.write(&run).unwrap();
        run
    }

    #[test]
    fn a_reference_made_again_whole_starts_its_manifest_again() {
        let root = labtest::tempdir();
        let run = edited(root.path(), |m| {
            (m.ended, m.failed) =
                (Some("2026-01-01T06:00:00Z".into()), vec!["x".into()]);
            m.added = vec!["lab run demo --reference".into()];
        });
        let before = Manifest::read(&run).unwrap().unwrap();
        // `lab reference` claims it: nothing changes until its first
        // results are in place (a `lab reference` that fails first changes
        // nothing).
        let started = "2026-02-02T00:00:00Z".to_string();
        joining().push((run.clone(), Join::Restart { started: started.clone() }));
        let now = || Manifest::read(&run).unwrap().unwrap();
        assert_eq!(now().command, before.command);
        joined(&run, 1).unwrap();
        let m = now();
        assert_eq!(
            (m.started.as_str(), m.ended, m.failed),
            (started.as_str(), None, vec![])
        );
        // Its command is this one's, with nothing added since.
        assert_eq!((m.command, m.added), (this_command(), vec![]));
        // Later results change nothing more.
        let m = now();
        joined(&run, 2).unwrap();
        assert_eq!(now().command, m.command);
    }

    #[test]
    fn a_command_that_adds_to_a_run_keeps_its_first_command_and_is_listed() {
        // A reference folder `lab reference` made (another process), which
        // this process adds to, as `lab run toy --reference` does.
        let root = labtest::tempdir();
        let run = edited(root.path(), |m| {
            (m.kind, m.command) = ("reference".into(), "lab reference".into());
            m.ended = Some("2026-01-01T06:00:00Z".into());
        });
        let before = Manifest::read(&run).unwrap().unwrap();
        claim(&run, "reference").unwrap();
        let now = || Manifest::read(&run).unwrap().unwrap();
        // Nothing changes until its first results are in place: a command
        // that fails adds nothing, and leaves the folder ended.
        assert_eq!((now().added, now().ended), (vec![], before.ended.clone()));
        joined(&run, 1).unwrap();
        let m = now();
        assert_eq!(
            (m.command.as_str(), m.added, m.started, m.ended),
            ("lab reference", vec![this_command()], before.started, None)
        );
        // Claimed again by the same process (rounds added), more results:
        // listed once.
        claim(&run, "reference").unwrap();
        joined(&run, 2).unwrap();
        assert_eq!(now().added.len(), 1);
        // A new folder takes this command as its first, with nothing added.
        let new = root.path().join("new");
        std::fs::create_dir(&new).unwrap();
        claim(&new, "run").unwrap();
        let m = Manifest::read(&new).unwrap().unwrap();
        assert_eq!((m.command, m.added), (this_command(), vec![]));
    }

    #[test]
    fn a_command_whose_first_came_to_nothing_is_the_folders_first() {
        // A reference folder whose first command failed: a manifest and no
        // results. The next command to put results in made it.
        let root = labtest::tempdir();
        let run = edited(root.path(), |m| {
            m.command = "lab run demo --reference --rounds 2".into();
        });
        claim(&run, "reference").unwrap();
        joined(&run, 0).unwrap();
        let m = Manifest::read(&run).unwrap().unwrap();
        assert_eq!((m.command, m.added), (this_command(), vec![]));
        assert_ne!(m.started, "2026-01-01T00:00:00Z");
    }

    #[test]
    fn a_process_may_claim_its_own_run_again() {
        // As a reference made again with more rounds does; another process
        // is still refused (is_live: the lock is held).
        let root = labtest::tempdir();
        let run = root.path().join("ref");
        std::fs::create_dir(&run).unwrap();
        claim(&run, "reference").unwrap();
        claim(&run, "reference").unwrap();
        assert!(is_live(&run));
    }

    #[test]
    fn a_reference_no_one_is_writing_is_finished() {
        let root = labtest::tempdir();
        let run = root.path().join("2026-01-01-ref");
        unfinished(&run);
        let mut m = Manifest::read(&run).unwrap().unwrap();
        m.kind = "reference".into();
        m.write(&run).unwrap();
        // No results yet: not finished.
        assert!(!is_finished(&run));
        let demo = run.join("fork-vs-thread");
        std::fs::create_dir(&demo).unwrap();
        std::fs::write(demo.join("fork-vs-thread.json"), "{}").unwrap();
        assert!(is_finished(&run) && is_reference(&run));
        // While a process writes it, it is not.
        let held = try_lock(&run).unwrap().unwrap();
        assert!(!is_finished(&run));
        drop(held);
        assert!(is_finished(&run));
    }

    #[test]
    fn a_sweep_removes_a_dead_run_and_never_touches_a_live_one() {
        let root = labtest::tempdir();
        let (live, dead) = (root.path().join("live"), root.path().join("dead"));
        let live_staging = unfinished(&live);
        let dead_staging = unfinished(&dead);
        // The live run's writer holds its lock (here, this test).
        let held = try_lock(&live).unwrap().expect("a free lock");
        assert!(is_live(&live) && !is_live(&dead));
        let mut removed = Vec::new();
        sweep_run(&live, true, &mut removed);
        assert!(removed.is_empty() && live_staging.is_dir());
        sweep_run(&dead, true, &mut removed);
        // Its staging folder, then the run, which held nothing finished.
        assert_eq!(removed, [dead_staging, dead.clone()]);
        assert!(!dead.exists());
        drop(held);
        // A dead reference keeps its folder (its results are committed);
        // only the staging folder goes.
        let mut removed = Vec::new();
        sweep_run(&live, false, &mut removed);
        assert_eq!(removed, [live_staging]);
        assert!(live.join(MANIFEST).is_file());
        // A commit killed between its renames: the old results come back.
        std::fs::write(live.join("run.json.tmp"), "{").unwrap();
        let mut removed = Vec::new();
        sweep_run(&live, false, &mut removed);
        assert_eq!(removed, [live.join("run.json.tmp")]);
        let old = live.join(".demo.old");
        std::fs::create_dir(&old).unwrap();
        sweep_run(&live, false, &mut removed);
        assert!(live.join("demo").is_dir() && !old.exists());
    }

    #[test]
    fn a_commit_that_fails_puts_the_old_results_back() {
        // Both stage through the one pending experiment: one at a time.
        let _serial = labtest::serial();
        let run = labtest::tempdir();
        let target = target(run.path(), "demo", None);
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("demo.json"), "old").unwrap();
        let staging = stage(run.path(), &target, false).unwrap();
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
    fn a_run_lists_the_folders_its_manifest_records_and_an_older_one_what_it_holds()
    {
        // Both stage through the one pending experiment: one at a time.
        let _serial = labtest::serial();
        let root = labtest::tempdir();
        let results = |run: &Path, folder: &str| {
            let file = crate::document::file_of(run, folder);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, "{}").unwrap();
        };
        // A manifest from before the list: the folder is scanned, whatever
        // the experiments are called (none of these is one of the lab's).
        let old = root.path().join("2026-01-01-old");
        unfinished(&old);
        results(&old, "toy");
        results(&old, "toy/v1");
        results(&old, "bee/cpu0");
        std::fs::create_dir_all(old.join("notes")).unwrap();
        assert_eq!(experiments_in(&old), ["bee/cpu0", "toy", "toy/v1"]);
        // Committing into it starts the list from what it holds.
        let zed = target(&old, "zed", None);
        let staging = stage(&old, &zed, false).unwrap();
        std::fs::write(staging.join("zed.json"), "{}").unwrap();
        pending().take().unwrap().commit().unwrap();
        let listed = Manifest::read(&old).unwrap().unwrap().folders.unwrap();
        assert_eq!(listed, ["bee/cpu0", "toy", "toy/v1", "zed"]);
        // A run that lists its folders: those, in the order committed, each
        // whose results are there; a folder copied in is none of its own.
        let run = root.path().join("2026-01-02-new");
        std::fs::create_dir(&run).unwrap();
        claim(&run, "run").unwrap();
        for folder in ["zed", "toy/cpu0", "toy"] {
            let (name, variant) = match folder.split_once('/') {
                Some((n, v)) => (n, Some(v)),
                None => (folder, None),
            };
            let into = target(&run, name, variant);
            let staging = stage(&run, &into, false).unwrap();
            std::fs::write(staging.join(format!("{name}.json")), "{}").unwrap();
            pending().take().unwrap().commit().unwrap();
        }
        results(&run, "stray");
        assert_eq!(experiments_in(&run), ["zed", "toy/cpu0", "toy"]);
        std::fs::remove_dir_all(run.join("zed")).unwrap();
        assert_eq!(experiments_in(&run), ["toy/cpu0", "toy"]);
    }

    #[test]
    fn commit_replaces_a_target_and_keeps_its_sub_runs() {
        // Both stage through the one pending experiment: one at a time.
        let _serial = labtest::serial();
        let run = labtest::tempdir();
        let target = target(run.path(), "demo", None);
        std::fs::create_dir_all(target.join("cpu0")).unwrap();
        std::fs::write(target.join("demo.json"), "old").unwrap();
        std::fs::write(target.join("cpu0/demo.json"), "sub").unwrap();
        let staging = stage(run.path(), &target, false).unwrap();
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
