//! Failures a user can cause, each one line on stderr with the documented
//! exit status, never a panic, an abort or a segfault: tiny stacks, a low
//! address-space limit, a full stdout or log, bad flags, a bad `--out`, a
//! failing `--exec` or `--perf`.

use crate::common;

use std::os::unix::process::ExitStatusExt;

use labkit::limited::Limits;
use std::process::{Command, Output, Stdio};

/// `name` (a program of the workspace, or `lab`) under `limits`, in the
/// child only ([`labkit::limited::apply`]). The environment is emptied:
/// with a 16 KiB stack limit the dynamic loader itself, before any code of
/// ours runs, does not always fit beside a few KiB of environment (a C
/// program whose main only returns 0 crashes there too), and that is not
/// what is tested.
fn limited(name: &str, limits: Limits) -> Command {
    let mut cmd = Command::new(common::bin_dir().join(name));
    cmd.env_clear().env("LAB_BIN_DIR", common::bin_dir()).stdin(Stdio::null());
    labkit::limited::apply(&mut cmd, limits);
    cmd
}

/// The 16 KiB stack limit of the tiny-stack tests.
const TINY_STACK: Limits =
    Limits { stack: Some(16 << 10), address_space: None, nproc: None, user: None };

fn plain(name: &str) -> Command {
    let mut cmd = Command::new(common::bin_dir().join(name));
    cmd.env("LAB_BIN_DIR", common::bin_dir()).stdin(Stdio::null());
    cmd
}

/// The one line on stderr, after checking the exit status and that it is
/// one line and no crash.
fn one_line(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.signal(), None, "killed: {stderr}");
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr.trim_end().to_string()
}

const PROGRAMS: [&str; 12] = [
    "creattime",
    "ctxswitch",
    "footprint",
    "fork",
    "forkcreat",
    "pipespeed2",
    "pipespeed2t",
    "pthreadcreat",
    "spawn-methods",
    "stacklimit",
    "thread",
    "lab",
];

#[test]
fn every_binary_starts_under_a_16_kib_stack_limit() {
    for name in PROGRAMS {
        let out = limited(name, TINY_STACK).arg("--help").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name} --help: {:?} {stderr}", out.status);
    }
}

#[test]
fn fork_and_thread_run_under_a_16_kib_stack_limit() {
    let _serial = labtest::serial();
    // thread's workers get glibc's default stack: the 16 KiB limit itself.
    for (name, flag) in [("fork", "--procs"), ("thread", "--threads")] {
        let out = limited(name, TINY_STACK)
            .args([flag, "3", "--count", "5", "--log", "/dev/null"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {:?} {stderr}", out.status);
        assert!(out.stdout.ends_with(b"Okay\n"));
    }
}

#[test]
fn thread_with_the_smallest_stack_it_accepts_works() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let log = dir.path().join("log");
    let out = plain("thread")
        .args(["--threads", "4", "--count", "50", "--stack-size", "16K", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let data = std::fs::read(&log).unwrap();
    let text = labkit::lines::payload(None);
    assert_eq!(labkit::lines::check_log(&data, &text, 4, 50), Ok(()));
    let out = plain("thread").args(["--stack-size", "15K"]).output().unwrap();
    assert!(one_line(&out, 2).starts_with("thread: invalid value '15K'"));
}

#[test]
fn pipespeed2t_names_the_size_it_could_not_allocate() {
    let out = limited(
        "pipespeed2t",
        Limits { address_space: Some(512 << 20), ..Limits::default() },
    )
    .args(["2", "1G"])
    .output()
    .unwrap();
    assert_eq!(
        one_line(&out, 1),
        "pipespeed2t: cannot allocate two 1G buffers (the block and the one it is \
         read into): Cannot allocate memory (ENOMEM); nothing was started"
    );
}

#[test]
fn a_full_stdout_or_log_names_which_one_failed() {
    let _serial = labtest::serial();
    let dir = labtest::tempdir();
    let log = dir.path().join("log");
    let full = || std::fs::File::options().write(true).open("/dev/full").unwrap();
    for (name, flag, what) in
        [("fork", "--procs", "children"), ("thread", "--threads", "threads")]
    {
        let out = plain(name)
            .args([flag, "2", "--count", "5", "--log"])
            .arg(&log)
            .stdout(full())
            .output()
            .unwrap();
        let line = one_line(&out, 1);
        assert!(
            line.starts_with(&format!("{name}: 2 of 2 {what} failed; first")),
            "{line}"
        );
        assert!(
            line.ends_with(
                "could not write stdout: No space left on device (ENOSPC)"
            ),
            "{line}"
        );
        let out = plain(name)
            .args([flag, "2", "--count", "5", "--log", "/dev/full"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let line = one_line(&out, 1);
        assert!(
            line.ends_with(
                "could not write the log: No space left on device (ENOSPC)"
            ),
            "{line}"
        );
    }
}

#[test]
fn the_examples_fail_with_a_line_when_stdout_is_full() {
    for name in ["fork_wait", "thread_join"] {
        let path = common::bin_dir().join("examples").join(name);
        if !path.is_file() {
            labtest::skipped(&format!(
                "{} is not built (cargo test builds it)",
                path.display()
            ));
            continue;
        }
        let full = std::fs::File::options().write(true).open("/dev/full").unwrap();
        let out = Command::new(path).arg("3").stdout(full).output().unwrap();
        assert_eq!(
            one_line(&out, 1),
            format!(
                "{name}: cannot write to stdout: No space left on device (os error 28)"
            )
        );
    }
}

#[test]
fn usage_errors_are_one_line_with_exit_2() {
    let out = plain("fork").args(["--procs", "x"]).output().unwrap();
    assert_eq!(
        one_line(&out, 2),
        "fork: invalid value 'x' for '--procs <PROCS>': invalid digit found in \
         string; see 'fork --help'"
    );
    let out =
        plain("lab").args(["run", "fork-vs-thread", "--bogus"]).output().unwrap();
    assert_eq!(
        one_line(&out, 2),
        "lab run fork-vs-thread: unexpected argument '--bogus' found; see 'lab run \
         fork-vs-thread --help'"
    );
    let out = plain("lab").arg("bogus").output().unwrap();
    assert_eq!(
        one_line(&out, 2),
        "lab: unrecognized subcommand 'bogus'; see 'lab --help'"
    );
    // A list that names a value twice, in one list or in two: every
    // experiment's lists are refused alike.
    for (experiment, args, twice) in [
        (
            "fork-vs-thread",
            &["--procs", "2,2", "--counts", "3"][..],
            "--procs names 2",
        ),
        ("mq-sweep", &["--threads", "1", "--threads", "1"], "--threads names 1"),
        ("ctx-switch", &["--modes", "threads,threads"], "--modes names threads"),
    ] {
        let out =
            plain("lab").args(["run", experiment]).args(args).output().unwrap();
        assert_eq!(
            one_line(&out, 2),
            format!("lab: {twice} twice; see 'lab run {experiment} --help'")
        );
    }
    // A negative number is a bad value of its flag, not an unknown flag.
    let out = plain("lab")
        .args(["run", "fork-vs-thread", "--procs", "-1", "--counts", "3"])
        .output()
        .unwrap();
    assert_eq!(
        one_line(&out, 2),
        "lab run fork-vs-thread: invalid value '-1' for '--procs <PROCS>': -1 is \
         not in 1..=100000; see 'lab run fork-vs-thread --help'"
    );
    let out = plain("lab")
        .args(["run", "fork-vs-thread", "--console", "--json"])
        .output()
        .unwrap();
    assert!(
        one_line(&out, 2)
            .contains("the argument '--console' cannot be used with '--json'"),
        "{out:?}"
    );
}

#[test]
fn an_out_that_is_not_a_directory_says_so() {
    let out = plain("lab")
        .args(["run", "fork-vs-thread", "--out", "/dev/full"])
        .output()
        .unwrap();
    assert_eq!(one_line(&out, 1), "lab: /dev/full: Not a directory (ENOTDIR)");
}

#[test]
fn an_out_on_a_full_disk_leaves_nothing_and_still_prints_the_tables() {
    use std::os::unix::process::CommandExt;
    // A disk that is full for this run: files larger than 2 KiB fail with
    // EFBIG (RLIMIT_FSIZE, SIGXFSZ ignored), as a full disk fails with
    // ENOSPC. The programs' own small reports and logs still fit.
    let dir = labtest::tempdir();
    let out_dir = dir.path().join("new/out");
    let mut cmd = plain("lab");
    cmd.args(["run", "fork-vs-thread", "--procs", "2", "--counts", "3"]);
    cmd.args(["--rounds", "1", "--out"]).arg(&out_dir);
    // SAFETY: signal and setrlimit are async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit { rlim_cur: 2048, rlim_max: 2048 };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let out = cmd.output().unwrap();
    let line = one_line(&out, 1);
    assert!(
        line.starts_with(&format!(
            "lab: {}/fork-vs-thread.json.tmp: ",
            out_dir.display()
        )) && line.ends_with("(EFBIG)"),
        "{line}"
    );
    // The tables were shown all the same.
    let tables = String::from_utf8_lossy(&out.stdout);
    assert!(tables.starts_with("Measured with `lab run fork-vs-thread"), "{tables}");
    assert!(tables.contains("fork"), "{tables}");
    // Nothing is left: not the half-written file, not the folders made.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_perf_that_fails_is_named_with_its_first_line_of_error() {
    // A distribution's wrapper for another kernel: several lines, the last
    // a bare package name.
    let bin = labtest::tempdir();
    let perf = bin.path().join("perf");
    labtest::write_executable(
        &perf,
        "#!/bin/sh\n[ \"$1\" = --version ] && exit 1\n\
         echo 'WARNING: perf not found for kernel 6.99' >&2\necho >&2\n\
         echo '  You may need to install the following packages:' >&2\n\
         echo '    linux-perf-6.99' >&2\nexit 2\n",
    );
    let path =
        format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap());
    let out_dir = labtest::tempdir();
    let out = plain("lab")
        .env("PATH", path)
        .args(["run", "ctx-switch", "--modes", "threads", "--pins", "none"])
        .args(["--rounds", "1", "-n", "100", "--json", "--out"])
        .arg(out_dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let saved: serde_json::Value = common::printed_json(&out.stdout);
    let note = saved["perf"]["note"].as_str().unwrap();
    assert_eq!(
        note,
        "`perf bench sched pipe -l 10` exited with status 2: WARNING: perf not \
         found for kernel 6.99",
        "{stderr}"
    );
    assert!(stderr.contains(&format!("running without perf: {note}")), "{stderr}");
}

#[test]
fn spawn_methods_says_why_exec_failed() {
    let _serial = labtest::serial();
    let out_dir = labtest::tempdir();
    let run = |exec: &std::path::Path| {
        plain("lab")
            .args(["run", "spawn-methods", "--exec"])
            .arg(exec)
            .arg("--out")
            .arg(out_dir.path())
            .output()
            .unwrap()
    };
    let dir = labtest::tempdir();
    let script = dir.path().join("fails");
    labtest::write_executable(
        &script,
        "#!/bin/sh\necho 'no, not today' >&2\nexit 3\n",
    );
    assert_eq!(
        one_line(&run(&script), 2),
        format!(
            "lab: --exec {}: the program must exit 0 when run with no arguments; it \
             exited with status 3: no, not today",
            script.display()
        )
    );
    let plain_file = dir.path().join("not-executable");
    std::fs::write(&plain_file, "data").unwrap();
    let line = one_line(&run(&plain_file), 2);
    assert!(line.ends_with("cannot execute: Permission denied (EACCES)"), "{line}");
}

#[test]
fn ctx_switch_perf_given_must_run_and_cpu_pairs_are_separated() {
    let _serial = labtest::serial();
    let out_dir = labtest::tempdir();
    let out = plain("lab")
        .args(["run", "ctx-switch", "--perf", "/nonexistent/perf", "--out"])
        .arg(out_dir.path())
        .output()
        .unwrap();
    let line = one_line(&out, 1);
    assert!(
        line.starts_with("lab: --perf: /nonexistent/perf cannot run: No such file"),
        "{line}"
    );
    let out = plain("lab")
        .args(["run", "ctx-switch", "--perf", "perf", "--no-perf"])
        .output()
        .unwrap();
    one_line(&out, 2);
    // Unpinned, the CPUs each round ended on read "A-B".
    let args = [
        "--no-perf",
        "--modes",
        "threads",
        "--pins",
        "none",
        "--rounds",
        "2",
        "-n",
        "200",
    ];
    let out = plain("lab")
        .args(["run", "ctx-switch"])
        .args(args)
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tables = String::from_utf8(out.stdout).unwrap();
    let row = tables.lines().find(|l| l.contains("| none")).expect("a none row");
    let cell = row.split('|').find(|c| c.trim().starts_with("ended ")).unwrap();
    let pairs: Vec<&str> = cell.trim()["ended ".len()..].split(' ').collect();
    assert_eq!(pairs.len(), 2, "{cell}");
    for pair in pairs {
        let (a, b) = pair.split_once('-').unwrap_or_else(|| panic!("{cell}"));
        assert!(a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok(), "{cell}");
    }
}
