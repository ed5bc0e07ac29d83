//! Results files: one JSON object per run, with the machine and the exact
//! command, written whole (to a temporary name, then renamed) so that an
//! interrupted run never leaves half a file behind.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use labkit::error::{Error, Result};

/// What every results file starts with.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    pub experiment: String,
    /// The command line that produced the file, to re-run it.
    pub command: String,
    pub machine: Machine,
    /// The runner's settings for this run (absent in files written before
    /// they were recorded).
    #[serde(default)]
    pub settings: Settings,
    /// What else the machine was doing meanwhile (absent in files written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::machine::Load>,
}

/// How a run was made: what `lab compare` names when two runs differ.
#[derive(
    Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Settings {
    /// Rounds per setting.
    pub rounds: u32,
    /// The articles' complete grid (`--full`) or the quick one.
    pub full: bool,
    /// The `--cpus` list the run was confined to, if any.
    pub cpus: Option<String>,
    /// The CPUs the runner was allowed to use (`Cpus_allowed_list`).
    pub cpus_allowed: String,
    /// How many CPUs that is.
    pub cpu_count: usize,
    /// The sub-run's name (`--variant`), if any.
    pub variant: Option<String>,
    /// Written by the reference command, from a clean commit.
    pub reference: bool,
    /// What else the experiment chose and ran with, by name (`--quick`,
    /// loops, the ladder's blocks): what `lab compare` must name when two
    /// runs differ in it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub used: std::collections::BTreeMap<String, String>,
}

impl Settings {
    /// These flags' settings, with what the experiment itself recorded
    /// (`chosen`, its header's) over them: the rounds it really ran, when
    /// it chose them (`--quick` runs one), and every setting it used.
    pub fn ran(mut self, chosen: &Settings) -> Settings {
        if chosen.rounds != 0 {
            self.rounds = chosen.rounds;
        }
        self.used.extend(chosen.used.clone());
        self
    }

    /// Record a setting the experiment used.
    pub fn used(&mut self, name: &str, value: impl ToString) {
        self.used.insert(name.to_string(), value.to_string());
    }
}

/// This process's command as a reader would type it again: `lab ARGS`,
/// a word with a space or another character the shell reads quoted
/// (`--cpus '0, 1'`), one that is not UTF-8 with U+FFFD in its place.
pub fn command_line() -> String {
    command_of(std::env::args_os().skip(1))
}

/// `lab` and `args`, each quoted where the shell needs it.
fn command_of(args: impl IntoIterator<Item = std::ffi::OsString>) -> String {
    format!("lab {}", shell_words(args))
}

/// `args` as one line a shell reads back as the same words: each quoted
/// where the shell needs it, U+FFFD for what is not UTF-8. The one form of
/// a command line in the lab's messages and results.
pub fn shell_words(args: impl IntoIterator<Item = std::ffi::OsString>) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c);
    let word = |w: std::ffi::OsString| {
        let w = w.to_string_lossy().into_owned();
        if !w.is_empty() && w.chars().all(plain) {
            w
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    let words: Vec<String> = args.into_iter().map(word).collect();
    words.join(" ")
}

impl Header {
    pub fn new(experiment: &str) -> Header {
        Header {
            experiment: experiment.to_string(),
            command: command_line(),
            machine: Machine::capture(),
            settings: Settings::default(),
            load: None,
        }
    }
}

/// Write `text` to `path` whole, creating its directory.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| {
        // A full disk: no half-written file is left behind.
        let _ = std::fs::remove_file(&tmp);
        Error::io(tmp.display(), e)
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path.display(), e)
    })
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::failed(format!("cannot encode results: {e}")))?;
    text.push('\n');
    write_file(path, &text)
}

/// Check that `dir` (given as `flag`, e.g. `--out`) may be written
/// ([`crate::checkout::may_write`]: never `results/` or a tracked file),
/// and can be created and written, before an experiment spends minutes
/// measuring, so a bad `--out` fails at once. What it creates to find out,
/// it removes: a run that fails later leaves nothing behind.
pub fn check_writable(dir: &Path, flag: &str) -> Result<()> {
    crate::checkout::may_write(dir, flag)?;
    // Made here to try it, and removed again.
    let made = first_missing(dir);
    let checked = try_writing(dir);
    if let Some(made) = made {
        let _ = std::fs::remove_dir_all(made);
    }
    checked
}

/// The first folder of `dir`'s path that does not exist yet (`dir` itself,
/// or one of its parents): what creating `dir` makes.
fn first_missing(dir: &Path) -> Option<PathBuf> {
    let mut made = None;
    let mut up = Some(dir);
    while let Some(d) = up.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        made = Some(d.to_path_buf());
        up = d.parent();
    }
    made
}

fn try_writing(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        // create_dir_all reports EEXIST for a path that is a file (or a
        // device, like /dev/full): say what is wrong with it instead.
        if dir.exists() && !dir.is_dir() {
            Error::io(
                dir.display(),
                std::io::Error::from_raw_os_error(libc::ENOTDIR),
            )
        } else {
            Error::io(dir.display(), e)
        }
    })?;
    let probe = dir.join(".lab-write-test");
    let written =
        std::fs::write(&probe, b"").map_err(|e| Error::io(dir.display(), e));
    let _ = std::fs::remove_file(&probe);
    written
}

/// Write `files` (name and contents) into `dir` whole, or not at all. Every
/// file is written beside its place first (`NAME.tmp`), and only when all
/// are written are they renamed into place: on an error (a full disk) the
/// temporaries are removed, and `dir` too if this call made it, while the
/// files an earlier run left there stay as they were.
pub fn write_all(dir: &Path, files: &[(String, String)]) -> Result<()> {
    let made = first_missing(dir);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
    let tmp = |name: &str| dir.join(format!("{name}.tmp"));
    let undo = |written: &[PathBuf]| {
        for t in written {
            let _ = std::fs::remove_file(t);
        }
        if let Some(made) = &made {
            // Only what this call made, now empty: nothing of anyone's.
            let mut d = Some(dir);
            while let Some(here) = d.filter(|h| h.starts_with(made)) {
                let _ = std::fs::remove_dir(here);
                d = here.parent();
            }
        }
    };
    let mut written = Vec::new();
    for (name, text) in files {
        let path = tmp(name);
        if let Err(e) = std::fs::write(&path, text) {
            written.push(path.clone());
            undo(&written);
            return Err(Error::io(path.display(), e));
        }
        written.push(path);
    }
    for (name, _) in files {
        let (from, to) = (tmp(name), dir.join(name));
        if let Err(e) = std::fs::rename(&from, &to) {
            // Not for want of space: a rename takes none. What is in place
            // already stays; the rest is removed.
            let left: Vec<PathBuf> =
                written.into_iter().filter(|t| t.exists()).collect();
            undo(&left);
            return Err(Error::io(to.display(), e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_recorded_as_the_shell_would_take_it_again() {
        use std::os::unix::ffi::OsStringExt;
        let words = ["run", "x", "--cpus", "0, 1", "it's", "", "0-1,3"];
        let mut args: Vec<std::ffi::OsString> =
            words.iter().map(Into::into).collect();
        args.push(std::ffi::OsString::from_vec(b"/tmp/x\xff".to_vec()));
        assert_eq!(
            command_of(args.into_iter()),
            "lab run x --cpus '0, 1' 'it'\\''s' '' 0-1,3 '/tmp/x\u{fffd}'"
        );
    }

    #[test]
    fn json_round_trips_and_leaves_no_temporary() {
        let dir = labtest::tempdir();
        let path = dir.path().join("sub/run.json");
        let header = Header::new("demo");
        write_json(&path, &header).unwrap();
        let back: Header =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.experiment, "demo");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_keeps_the_earlier_files_and_leaves_no_temporary() {
        let dir = labtest::tempdir();
        let earlier = [("a.json".to_string(), "old a".to_string())];
        write_all(dir.path(), &earlier).unwrap();
        // The second file cannot be written: its name is a folder's.
        std::fs::create_dir(dir.path().join("b.svg.tmp")).unwrap();
        let files = [
            ("a.json".to_string(), "new a".to_string()),
            ("b.svg".to_string(), "new b".to_string()),
        ];
        let err = write_all(dir.path(), &files).unwrap_err();
        assert!(err.message.contains("b.svg.tmp"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.json")).unwrap(),
            "old a"
        );
        assert!(!dir.path().join("a.json.tmp").exists(), "no temporary left");
        assert!(!dir.path().join("b.svg").exists());
    }

    #[test]
    fn unwritable_places_fail_with_the_path() {
        let dir = labtest::tempdir();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"").unwrap();
        let err = check_writable(&file.join("below"), "--out").unwrap_err();
        assert!(err.message.contains("plain/below"), "{err}");
        assert!(err.message.contains("ENOTDIR"), "{err}");
    }
}
