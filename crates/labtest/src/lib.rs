//! What the lab's tests share, a crate of its own so that `labkit` holds
//! only what the programs need at run time; every crate of the workspace
//! takes it as a dev-dependency. A skip that says why, is counted, and fails
//! under CI unless it was expected; the checks a skip rests on (root, a
//! tool on `PATH`); a program's JSON output, parsed into its type (the
//! report of a run that succeeded); and the checks several programs' tests
//! make: the usage contract, a failed run's one line, `--help`, a server's
//! announced address, the workers' lines and a log that cannot be opened,
//! a creation loop's failure, no child left behind (as a subreaper).
//!
//! A test that cannot run here (no root, no `perf`, no C compiler) calls
//! [`skipped`] with the reason and returns. The reason is printed (past the
//! harness's capture) and, when `LAB_SKIP_LOG` names a file, appended to
//! it, so that `lab test` (the README's test command) and `.ci/run` end
//! with how many tests skipped and why. Under `CI=true` a skip whose reason is not on
//! [`ALLOWED`] fails the test instead: CI installs what the tests need, so
//! a skip there means something is missing.

/// Reasons (prefixes) that may skip under `CI=true`. Empty: CI runs as
/// root with every tool the tests need installed by `.ci/run`.
pub const ALLOWED: &[&str] = &[];

/// Record that the calling test skips, and why; the test then returns.
/// Panics under `CI=true` unless `reason` starts with one of [`ALLOWED`].
pub fn skipped(reason: &str) {
    use std::io::Write;
    // Straight to stderr, past the test harness's capture (which takes
    // only `eprintln!`): a skip shows in a plain `cargo test` too.
    let _ = std::io::stderr().write_all(format!("skipped: {reason}\n").as_bytes());
    if let Some(log) = std::env::var_os("LAB_SKIP_LOG") {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
        if let Ok(mut file) = file {
            // libtest names each test's thread after the test.
            let test = std::thread::current().name().unwrap_or("?").to_string();
            let _ = writeln!(file, "{test}: {reason}");
        }
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci && !ALLOWED.iter().any(|a| reason.starts_with(a)) {
        panic!(
            "a test skipped under CI=true, which installs what tests need: {reason}"
        );
    }
}

/// Skip the calling test with a reason unless `$cond` holds:
/// `labtest::require!(have_tool("cc"), "no C compiler (cc)");`
#[macro_export]
macro_rules! require {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            $crate::skipped(&format!($($why)+));
            return;
        }
    };
}

/// Run the calling test alone among those of its test binary that call
/// this too: tests that fork, count children or take the CPUs hold it for
/// their whole run (`let _serial = labtest::serial();`). A test
/// that panicked while holding it does not block the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The variable that tells a test binary started by [`alone`] which test
/// it is to run, the one that started it.
const ALONE: &str = "LABTEST_ALONE";

/// Run the calling test in a process of its own: `if !labtest::alone() {
/// return; }` first thing in a test that needs its process to itself. The
/// test binary runs again with only this test (`NAME --exact`), and
/// `alone` is true there: the test goes on. Here it is false once that
/// process has passed (it panics with its output if not), and holds
/// [`serial`] meanwhile, as the test would.
///
/// A test binary's tests run on threads of one process, so what belongs
/// to the process is shared: its children, and whatever becomes its child.
/// A test that makes the process a [`become_subreaper`], waits for any
/// child (`waitpid(-1)`, [`no_child_left`]) or counts the process's
/// children cannot share it with tests that start programs, which is every
/// other test: it would reap their children from under them, or find them.
pub fn alone() -> bool {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or_default().to_string();
    if std::env::var_os(ALONE).is_some_and(|t| t == test.as_str()) {
        return true;
    }
    let _serial = serial();
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(&exe)
        .args([test.as_str(), "--exact", "--test-threads=1"])
        .env(ALONE, &test)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    // What it said past the harness's capture (its skips), said here.
    let _ = std::io::stderr().write_all(&out.stderr);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("test result: ok. 1 passed"),
        "{test}, in a process of its own: {}\n{said}",
        out.status
    );
    false
}

/// Make this test process a child subreaper: a process that outlives its
/// parent (a child a program left behind) is handed to it, where
/// [`no_child_left`] finds it.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a process flag.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(r, 0, "prctl: {}", std::io::Error::last_os_error());
}

/// This test process has no child, running or ended: none of its own
/// left unreaped, and none handed to it as a [`become_subreaper`].
pub fn no_child_left() {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        Err(nix::errno::Errno::ECHILD) => {}
        other => panic!("a child was left behind: {other:?}"),
    }
}

/// Does `text` have the shape `pattern`, where each `#` in the pattern
/// stands for a number (`12`, `0.25`), each `*` for any text (a path, a
/// plural's `s`), and everything else is literal?
/// `shape("20 forks in 0.013 s\n", "20 forks in # s\n")` is true.
pub fn shape(text: &str, pattern: &str) -> bool {
    let Some((head, tail)) = pattern.split_once('*') else {
        return after(text, pattern) == Some("");
    };
    let Some(rest) = after(text, head) else { return false };
    (0..=rest.len())
        .filter(|&i| rest.is_char_boundary(i))
        .any(|i| shape(&rest[i..], tail))
}

/// What follows the start of `text` that has the shape `pattern` (no `*`
/// in it), if it starts so: [`shape`]'s numbers and literals.
fn after<'t>(text: &'t str, pattern: &str) -> Option<&'t str> {
    let mut rest = text;
    for (i, part) in pattern.split('#').enumerate() {
        if i > 0 {
            let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.');
            let end = digits.unwrap_or(rest.len());
            if end == 0 || !rest[..end].chars().any(|c| c.is_ascii_digit()) {
                return None;
            }
            rest = &rest[end..];
        }
        rest = rest.strip_prefix(part)?;
    }
    Some(rest)
}

/// A test's scratch directory, `<tmp>/test-XXXXXX` (honouring `TMPDIR`),
/// removed when dropped: the lab's one temporary-directory type
/// ([`labkit::cleanup::TempDir`]), under a name the lab's sweep of dead
/// runs' directories never judges.
pub fn tempdir() -> labkit::cleanup::TempDir {
    labkit::cleanup::tempdir("test-").expect("cannot create a temporary directory")
}

/// Is this test running as root (needed to become [`labkit::limited::NOBODY`]
/// or to raise a limit)?
pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// `program` copied where [`labkit::limited::NOBODY`] can run it
/// ([`labkit::limited::copy_for`]: a checkout in root's 0700 home is closed
/// to nobody), for a test that runs it as nobody: start it with
/// [`labkit::limited::Copied::command`]. `None` when no such copy can be
/// made: the test is [`skipped`] with the one line that says why.
pub fn copy_for_nobody(
    program: impl AsRef<std::path::Path>,
) -> Option<labkit::limited::Copied> {
    match labkit::limited::copy_for(labkit::limited::NOBODY, program.as_ref()) {
        Ok(copy) => Some(copy),
        Err(refused) => {
            skipped(&refused.message);
            None
        }
    }
}

/// Write an executable file, `contents` (a `#!/bin/sh` script, say) at
/// `path`, mode 0755, from a child process: this one never has it open.
///
/// A file a process holds open for writing cannot be run: `execve` fails
/// with ETXTBSY ("Text file busy"). Written here, with `std::fs::write`,
/// the descriptor would be shared, for as long as it is open, by any child
/// that another test's thread forks meanwhile, until that child execs or
/// exits; the script would then fail to start now and then, however soon
/// after it was closed it ran. A child process's descriptors are its own.
pub fn write_executable(path: impl AsRef<std::path::Path>, contents: &str) {
    use std::io::Write;
    let path = path.as_ref();
    let mut sh = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = sh.stdin.take().unwrap();
    stdin.write_all(contents.as_bytes()).unwrap();
    drop(stdin);
    let status = sh.wait().unwrap();
    assert!(status.success(), "cannot write {}: {status}", path.display());
}

/// Copy the program `from` to `to`, mode 0755, from a child process
/// (`cp`), for the reason [`write_executable`] gives.
pub fn copy_executable(
    from: impl AsRef<std::path::Path>,
    to: impl AsRef<std::path::Path>,
) {
    let (from, to) = (from.as_ref(), to.as_ref());
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cannot copy {} to {}", from.display(), to.display());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Is `tool` an executable file on `PATH` (`perf`, `cc`, `setpriv`)?
pub fn have_tool(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A command run to its end, for checks made in a chain:
/// `labtest::run(cmd.arg("--help")).success().stdout_has("Usage")`. Each
/// check panics with the command, its status, stdout and stderr.
#[derive(Debug)]
pub struct Ran {
    /// What it printed and how it ended.
    pub output: std::process::Output,
    what: String,
}

/// Run `cmd` to its end (stdin from /dev/null, stdout and stderr captured)
/// for [`Ran`]'s checks.
#[track_caller]
pub fn run(cmd: &mut std::process::Command) -> Ran {
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Ran { output, what: format!("{cmd:?}") }
}

/// [`run`], which fails if `cmd` has not ended after `limit`: it is killed.
#[track_caller]
pub fn run_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> Ran {
    let output = output_within(cmd, limit);
    Ran { output, what: format!("{cmd:?}") }
}

/// `cmd.output()`, for a program whose failure would be to hang: killed,
/// and the test failed, if it has not ended after `limit`.
#[track_caller]
pub fn output_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout =
        drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr =
        drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} had not ended after {limit:?}: killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    std::process::Output { status, stdout, stderr }
}

impl Ran {
    #[track_caller]
    fn check(self, holds: bool, what: &str) -> Self {
        let out = &self.output;
        assert!(
            holds,
            "{}: {what}\nstatus: {}\nstdout: {}\nstderr: {}",
            self.what,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// It exited 0.
    #[track_caller]
    pub fn success(self) -> Self {
        let ok = self.output.status.success();
        self.check(ok, "did not succeed")
    }

    /// It exited with `code`.
    #[track_caller]
    pub fn code(self, code: i32) -> Self {
        let ended = self.output.status.code();
        self.check(ended == Some(code), &format!("did not exit {code}"))
    }

    /// Its stdout is exactly `text`.
    #[track_caller]
    pub fn stdout_is(self, text: &str) -> Self {
        let holds = self.stdout() == text;
        self.check(holds, &format!("stdout is not {text:?}"))
    }

    /// Its stdout holds `text`.
    #[track_caller]
    pub fn stdout_has(self, text: &str) -> Self {
        let holds = self.stdout().contains(text);
        self.check(holds, &format!("stdout does not hold {text:?}"))
    }

    /// Its stderr holds `text`.
    #[track_caller]
    pub fn stderr_has(self, text: &str) -> Self {
        let holds = self.stderr().contains(text);
        self.check(holds, &format!("stderr does not hold {text:?}"))
    }

    /// Its stderr starts with `text`.
    #[track_caller]
    pub fn stderr_starts_with(self, text: &str) -> Self {
        let holds = self.stderr().starts_with(text);
        self.check(holds, &format!("stderr does not start with {text:?}"))
    }

    /// `holds` is true of its stdout (`what` says what it checks).
    #[track_caller]
    pub fn stdout_that(self, what: &str, holds: impl Fn(&str) -> bool) -> Self {
        let holds = holds(&self.stdout());
        self.check(holds, &format!("stdout: not {what}"))
    }

    /// `holds` is true of its stderr (`what` says what it checks).
    #[track_caller]
    pub fn stderr_that(self, what: &str, holds: impl Fn(&str) -> bool) -> Self {
        let holds = holds(&self.stderr());
        self.check(holds, &format!("stderr: not {what}"))
    }
}

/// A program's `--json` output, parsed into `T` (its report type, or
/// `serde_json::Value`); panics with what was printed when it is not one
/// JSON object of that type.
pub fn json<T: serde::de::DeserializeOwned>(stdout: &[u8]) -> T {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!("not the expected JSON ({e}): {}", String::from_utf8_lossy(stdout))
    })
}

/// A run that succeeded (`out`): its `--json` report, parsed into `T`
/// ([`json`]). Panics with its stderr when it did not succeed.
#[track_caller]
pub fn report<T: serde::de::DeserializeOwned>(out: &std::process::Output) -> T {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    json(&out.stdout)
}

/// A command line's words as text: what a program crate's `args()` says,
/// to compare with the words a test expects.
pub fn words(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<String> {
    args.into_iter().map(|a| a.into_string().expect("UTF-8 words")).collect()
}

/// [`words`] joined by spaces, for a test that expects a whole line.
pub fn line(args: impl IntoIterator<Item = std::ffi::OsString>) -> String {
    words(args).join(" ")
}

/// The options `O` that `program ARGS` parses into, as the program would
/// read them (`O::try_parse_from`). Only the last step is generic: clap's
/// parsing is compiled once, here, not again in every test that calls it.
pub fn parse<O: clap::Parser>(
    program: &str,
    args: &[&str],
) -> Result<O, clap::Error> {
    let args = args.iter().map(std::ffi::OsString::from).collect();
    let mut cmd = O::command();
    let mut matches = matches(&mut cmd, program, args)?;
    O::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

fn matches(
    cmd: &mut clap::Command,
    program: &str,
    args: Vec<std::ffi::OsString>,
) -> Result<clap::ArgMatches, clap::Error> {
    cmd.try_get_matches_from_mut(std::iter::once(program.into()).chain(args))
}

/// The options a program would read from `program ARGS`, `args` being
/// what `o.args()` says: they must be `o` again. Panics with the words
/// when they do not parse or parse into other options.
#[track_caller]
pub fn parses_back<O>(program: &str, o: &O, args: Vec<std::ffi::OsString>)
where
    O: clap::Parser + PartialEq + std::fmt::Debug,
{
    let words = words(args);
    let text: Vec<&str> = words.iter().map(String::as_str).collect();
    match parse::<O>(program, &text) {
        Ok(back) => assert_eq!(&back, o, "{program} {words:?}"),
        Err(e) => panic!("{program} {words:?} does not parse: {e}"),
    }
}

/// The lab's usage contract for arguments a program cannot parse, for each
/// of `cases`: `program ARGS` (the path of a program binary) is refused
/// ([`usage_error`]) with `NAME: what is wrong; see 'NAME --help'`, NAME
/// being the binary's file name, as [`labkit::cli::parse`] prints it.
pub fn usage_errors(program: impl AsRef<std::path::Path>, cases: &[&[&str]]) {
    let program = program.as_ref();
    let name = program.file_name().unwrap_or_default().to_string_lossy();
    usage_errors_as(&name, || std::process::Command::new(program), cases);
}

/// [`usage_errors`] for a command that names itself `name` in these
/// messages (the runner's `lab run pipe-speed`), made by `command` once
/// per case, before the case's arguments are added.
pub fn usage_errors_as(
    name: &str,
    command: impl Fn() -> std::process::Command,
    cases: &[&[&str]],
) {
    let end = format!("; see '{name} --help'");
    for args in cases {
        let line = usage_error(name, command().args(*args));
        assert!(line.ends_with(&end), "{name} {args:?}: not '...{end}': {line}");
    }
}

/// Run `cmd`, which must refuse its arguments: exit status 2, nothing on
/// stdout, one line on stderr that starts with `NAME: `. Returns the line,
/// without its newline, for the caller to check what it says.
pub fn usage_error(name: &str, cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    let what = format!("{name} {:?}", cmd.get_args().collect::<Vec<_>>());
    let line = one_line_and_exit(&what, name, &out, 2);
    assert!(out.stdout.is_empty(), "{what}: stdout: {out:?}");
    line
}

/// A run of the program `name` that failed (`out`): exit status 1 and one
/// line on stderr, `NAME: what failed`, which is returned, without its
/// newline, for the caller to check what it says. Its stdout is the
/// caller's to check: a program may still print its `--json` report.
pub fn failed(name: &str, out: &std::process::Output) -> String {
    one_line_and_exit(name, name, out, 1)
}

/// `out` (the run of `what`) ended with exit status `code` and one line
/// on stderr that starts with `NAME: `: the line, without its newline.
fn one_line_and_exit(
    what: &str,
    name: &str,
    out: &std::process::Output,
    code: i32,
) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
    assert!(err.starts_with(&format!("{name}: ")), "{what}: {err}");
    err.trim_end_matches('\n').to_string()
}

/// `program --help` (the path of a program binary) exits 0 and its text
/// mentions each of `texts`: a flag, a default, the exit statuses.
pub fn help_mentions(program: impl AsRef<std::path::Path>, texts: &[&str]) {
    let program = program.as_ref();
    let out = std::process::Command::new(program).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{} --help: {out:?}", program.display());
    for text in texts {
        assert!(help.contains(text), "{text} missing from:\n{help}");
    }
}

/// Start a server (`cmd`, its stdin from /dev/null, stdout and stderr
/// piped) and read the address it announces as its first line
/// ([`labkit::cli::announce`]). Returns the child, the rest of its stdout,
/// and the address, trimmed: empty when it ended without one.
pub fn start_server(
    cmd: &mut std::process::Command,
) -> (std::process::Child, std::io::BufReader<std::process::ChildStdout>, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut addr = String::new();
    out.read_line(&mut addr).unwrap();
    (child, out, addr.trim().to_string())
}

/// `program ARGS --log LOG` (`fork`, `thread`; LOG in a new temporary
/// directory, [`labkit::cleanup::tempdir`]), whose workers each print
/// `count` lines of `line` bytes ([`labkit::lines::payload`]) to stdout and
/// to the log: it succeeds, stdout is every line, whole, then "Okay", and
/// the log holds the same lines ([`labkit::lines::check_log`]).
pub fn worker_lines_whole(
    program: impl AsRef<std::path::Path>,
    args: &[&str],
    line: Option<usize>,
    workers: u64,
    count: u64,
) {
    use labkit::lines::{check_log, payload};
    let dir = labkit::cleanup::tempdir("lab-worker-lines-").unwrap();
    let log = dir.path().join("log");
    let mut cmd = std::process::Command::new(program.as_ref());
    let out = cmd.args(args).arg("--log").arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = out.stdout.strip_suffix(b"Okay\n").expect("ends with Okay");
    let text = payload(line);
    assert_eq!(check_log(stdout, &text, workers, count), Ok(()), "stdout");
    let logged = std::fs::read(&log).unwrap();
    assert_eq!(check_log(&logged, &text, workers, count), Ok(()), "the log");
}

/// `program --log PATH` (`fork`, `thread`) with a PATH that cannot be
/// opened: in a directory that does not exist, and a directory. Each time
/// exit status 1, nothing on stdout, and one line naming the path and the
/// errno, before any worker was started.
pub fn log_cannot_be_opened(program: impl AsRef<std::path::Path>) {
    let program = program.as_ref();
    let name = program.file_name().unwrap_or_default().to_string_lossy();
    let missing = std::path::Path::new("/nonexistent-lab-dir/no/such/dir/log");
    let dir = std::env::temp_dir();
    for (log, errno) in [
        (missing, "No such file or directory (ENOENT)"),
        (dir.as_path(), "Is a directory (EISDIR)"),
    ] {
        let out = std::process::Command::new(program)
            .arg("--log")
            .arg(log)
            .output()
            .unwrap();
        assert_eq!(
            failed(&name, &out),
            format!(
                "{name}: cannot open log {}: {errno}; no worker was started",
                log.display()
            )
        );
        assert!(out.stdout.is_empty(), "{out:?}");
    }
}

/// A creation loop that failed part-way (`out`, of `fork` or `thread`):
/// it [`failed`] with the line `PROGRAM: created N of ...`. Returns N and
/// the line, without its newline.
pub fn created_before_failing(
    program: &str,
    out: &std::process::Output,
) -> (u64, String) {
    let stderr = failed(program, out);
    let created = stderr
        .strip_prefix(&format!("{program}: created "))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected message: {stderr}"));
    (created, stderr)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tools_are_found_on_path_and_json_parses_into_its_type() {
        assert!(super::have_tool("sh"));
        assert!(!super::have_tool("no-such-tool-anywhere"));
        let v: Vec<u32> = super::json(b"[1, 2]");
        assert_eq!(v, [1, 2]);
        let bad = std::panic::catch_unwind(|| super::json::<Vec<u32>>(b"oops"));
        assert!(bad.is_err());
    }

    #[test]
    fn the_usage_contract_holds_only_for_one_line_and_exit_2() {
        // `sh -c SCRIPT` stands for a program; `$0` is the case.
        let sh = |script: &'static str| {
            move || {
                let mut cmd = std::process::Command::new("sh");
                cmd.args(["-c", script]);
                cmd
            }
        };
        let good = "echo \"p: bad $0; see 'p --help'\" >&2; exit 2";
        super::usage_errors_as("p", sh(good), &[&["x"], &["y"]]);
        for bad in [
            "echo \"p: bad; see 'p --help'\" >&2; exit 1",
            "echo \"p: bad; see 'p --help'\" >&2; echo out; exit 2",
            "echo \"p: bad\" >&2; exit 2",
            "echo \"q: bad; see 'q --help'\" >&2; exit 2",
            "printf \"p: bad\\np: see 'p --help'\\n\" >&2; exit 2",
        ] {
            let check = || super::usage_errors_as("p", sh(bad), &[&["x"]]);
            assert!(std::panic::catch_unwind(check).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failure_is_exit_1_and_one_line_and_a_report_needs_success() {
        let sh = |script: &str| {
            let mut sh = std::process::Command::new("sh");
            sh.args(["-c", script]).output().unwrap()
        };
        let out = sh("echo '[3]'; echo 'p: boom; waited for 2' >&2; exit 1");
        assert_eq!(super::failed("p", &out), "p: boom; waited for 2");
        let report = || super::report::<Vec<u32>>(&out);
        assert!(std::panic::catch_unwind(report).is_err(), "it failed");
        let ok: Vec<u32> = super::report(&sh("echo '[3]'"));
        assert_eq!(ok, [3]);
        for bad in [
            "echo 'p: boom' >&2; exit 2",
            "echo 'p: boom' >&2",
            "printf 'p: boom\\np: again\\n' >&2; exit 1",
            "echo 'q: boom' >&2; exit 1",
        ] {
            let out = sh(bad);
            let check = || super::failed("p", &out);
            assert!(std::panic::catch_unwind(check).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_run_checks_its_status_and_output_and_a_hang_is_killed() {
        let sh = |script: &str| {
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", script]);
            cmd
        };
        super::run(&mut sh("echo out; echo err >&2"))
            .success()
            .stdout_is("out\n")
            .stdout_has("ou")
            .stderr_has("rr")
            .stderr_starts_with("err")
            .stdout_that("two lines", |o| o.lines().count() == 1)
            .stderr_that("err", |e| e == "err\n");
        super::run(&mut sh("exit 3")).code(3).stdout_is("");
        for bad in ["exit 1", "echo no"] {
            let check = || {
                super::run(&mut sh(bad)).success().stdout_has("yes");
            };
            assert!(std::panic::catch_unwind(check).is_err(), "{bad}");
        }
        let limit = std::time::Duration::from_millis(200);
        let hang = || super::output_within(&mut sh("sleep 30"), limit);
        assert!(std::panic::catch_unwind(hang).is_err());
        let quick = super::run_within(&mut sh("echo hi"), limit * 50);
        quick.success().stdout_is("hi\n");
    }

    #[test]
    fn executables_are_written_and_copied_whole_and_run() {
        let dir = super::tempdir();
        let script = dir.path().join("hi");
        super::write_executable(&script, "#!/bin/sh\necho \"hi $1\"\n");
        let out = std::process::Command::new(&script).arg("there").output().unwrap();
        assert_eq!(out.stdout, b"hi there\n");
        let copy = dir.path().join("copy");
        super::copy_executable(&script, &copy);
        let out = std::process::Command::new(&copy).output().unwrap();
        assert_eq!(out.stdout, b"hi \n");
    }

    #[test]
    fn shapes_match_numbers_where_the_pattern_says_so() {
        use super::shape;
        assert!(shape("7 in 0.25 s: 3 us\n", "# in # s: # us\n"));
        assert!(!shape("7 in x s: 3 us\n", "# in # s: # us\n"));
        assert!(!shape("7 in 0.25 s: 3 us\nmore", "# in # s: # us\n"));
        assert!(!shape("in . s", "in # s"), "a number has a digit");
        assert!(shape("created: 20, failed: 0", "created: 20, failed: 0"));
        let removed = "stopped # program*, removed /tmp/*/.x.partial-*";
        assert!(shape("stopped 2 programs, removed /tmp/a/b/.x.partial-1", removed));
        assert!(shape("stopped 1 program, removed /tmp/a/.x.partial-", removed));
        assert!(!shape("stopped 1 program, removed /tmp/.x.partial-1", removed));
        assert!(!shape("stopped 1 program, removed /var/a/.x.partial-1", removed));
    }
}
