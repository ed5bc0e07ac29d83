//! Nothing left behind: SIGINT, SIGTERM and SIGHUP to the runner or to a
//! program parent, to its pid alone or to its whole process group, stop
//! and reap every process the run made, remove its temporary directories
//! and end with one line and exit status 128 + N. A parent killed outright
//! takes its children with it (`PR_SET_PDEATHSIG`), and a worker that dies
//! mid-run is an error that names it.
//!
//! Each test waits for an observable state (the program's children in
//! `/proc`) before it signals, never for a fixed time. This test process
//! makes itself a child subreaper, so a process that outlived its parent
//! would be handed to it and show up in `waitpid(-1)`: each test runs in a
//! process of its own ([`labtest::alone`]), where no other test's children
//! are.

use crate::common;

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use labkit::children;
use labtest::{become_subreaper, no_child_left};

const DEADLINE: Duration = Duration::from_secs(30);

/// A program under test; if the test fails half-way, its whole group is
/// killed and reaped so that it cannot disturb the next test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: killpg only sends a signal, to the group we made.
            unsafe { libc::killpg(self.0.id() as i32, libc::SIGKILL) };
            let _ = self.0.wait();
        }
        // Whatever of its tree was handed to this subreaper (the programs
        // lab runs are in groups of their own): kill and reap it.
        let me = std::process::id() as i32;
        for child in children::of(me).unwrap_or_default() {
            // SAFETY: kill and waitpid on our own child.
            unsafe {
                libc::kill(child.pid, libc::SIGKILL);
                libc::waitpid(child.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Start `cmd` in a process group of its own (as a shell starts a job),
/// stdin and stdout to /dev/null, stderr read on a thread.
fn start(cmd: &mut Command) -> (Running, std::thread::JoinHandle<String>) {
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    (Running(child), stderr)
}

/// Poll until `ready` returns something, or fail after the deadline.
fn wait_until<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = ready() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pids of `program`'s children once there are at least `n`.
fn children_of(program: &mut Running, n: usize) -> Vec<i32> {
    let pid = program.id() as i32;
    wait_until(&format!("{n} children of {pid}"), || {
        if let Some(status) = program.try_wait().unwrap() {
            panic!("the program ended before it was interrupted: {status}");
        }
        let kids: Vec<i32> =
            children::of(pid).unwrap().iter().map(|c| c.pid).collect();
        (kids.len() >= n).then_some(kids)
    })
}

/// Wait for `child` to end (failing the test after the deadline).
fn finish(child: &mut Child) -> ExitStatus {
    wait_until("the program to exit", || child.try_wait().unwrap())
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill only sends a signal.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// Every process whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else { continue };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse().ok()) == Some(pgid) {
            found.push(pid);
        }
    }
    found
}

/// No process of the tree is left: none of `pids` exists, no process is
/// in any of `groups`, and nothing was handed to this subreaper.
fn assert_nothing_left(pids: &[i32], groups: &[i32]) {
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} is still there"
        );
    }
    for &g in groups {
        assert_eq!(group_members(g), Vec::<i32>::new(), "group {g} is not empty");
    }
    no_child_left();
}

fn one_line(stderr: &str) -> &str {
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        stderr.lines().filter(|l| l.contains("interrupted")).count() == 1,
        "one interrupt line: {stderr}"
    );
    last
}

/// `interrupt_tests! { interrupt: name: case, ...; ... }`: one test per
/// line `name: case, ...;`, interrupting each case in turn with
/// `interrupt` ([`interrupt_lab`], [`interrupt_program`]).
macro_rules! interrupt_tests {
    ($interrupt:ident: $($name:ident: $($case:expr),+;)+) => {$(
        #[test]
        fn $name() {
            if !labtest::alone() {
                return;
            }
            let _serial = labtest::serial();
            $($interrupt(&$case);)+
        }
    )+};
}

// ---------------------------------------------------------------- runner

/// Is `pid` a program (not lab itself, as a child is between fork and
/// exec) whose `/proc/<pid>/cmdline` holds the argument `arg`?
fn has_arg(pid: i32, arg: &str) -> bool {
    let comm =
        std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    // Not lab, nor its guard (a fork of lab, with lab's arguments).
    !comm.trim().starts_with("lab")
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
}

/// `lab run EXPERIMENT ARGS`, interrupted by a signal once a program it
/// runs has made children of its own, and the line it must end with. The
/// flags are false by default.
#[derive(Default)]
struct LabCase {
    experiment: &'static str,
    args: &'static [&'static str],
    /// The program to wait for: the one run with this argument, once it
    /// has `grandchildren` children.
    marker: &'static str,
    grandchildren: usize,
    sig: i32,
    /// To lab's process group, as the terminal's Ctrl-C is, or its pid.
    to_group: bool,
    /// The results go to `--out DIR`, which holds an earlier results
    /// file; else to a new run folder under `runs/` of a scratch checkout
    /// (`LAB_CHECKOUT`), beside an earlier run.
    own_out: bool,
    /// The program blocks the signals itself, to take them on a thread of
    /// its own (the broker), so its blocked set is not checked.
    blocks_signals_itself: bool,
    /// Its last line on stderr ([`labtest::shape`]: `#` a number,
    /// `*` any text), where `{tmp}` is the TMPDIR it was given.
    says: &'static str,
}

/// Run `case` with TMPDIR of its own, interrupt it, and check that it
/// ended with exit status 128 + the signal and one interrupt line, the one
/// it `says`, with the earlier results intact and nothing else left.
fn interrupt_lab(case: &LabCase) {
    let LabCase { experiment, args, marker, grandchildren, sig, .. } = *case;
    let (to_group, own_out) = (case.to_group, case.own_out);
    become_subreaper();
    let tmp = labtest::tempdir();
    let out = labtest::tempdir();
    let earlier = if own_out {
        out.path().join("earlier.json")
    } else {
        let dir = out.path().join("runs/2000-01-01-000000-earlier").join(experiment);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("earlier.json")
    };
    std::fs::write(&earlier, "{\"kept\": true}\n").unwrap();
    let mut cmd = common::lab_std();
    cmd.env("TMPDIR", tmp.path());
    cmd.args(["run", experiment]).args(args);
    if own_out {
        cmd.arg("--out").arg(out.path());
    } else {
        cmd.env("LAB_CHECKOUT", out.path());
    }
    let (mut lab, stderr) = start(&mut cmd);
    let lab_pid = lab.id() as i32;
    // The program lab started, once it has made its own children.
    let (program, kids) = wait_until("the program's children", || {
        if let Some(status) = lab.try_wait().unwrap() {
            panic!("lab ended before it was interrupted: {status}");
        }
        children::of(lab_pid).unwrap().iter().find_map(|c| {
            if !has_arg(c.pid, marker) {
                return None;
            }
            let kids: Vec<i32> =
                children::of(c.pid).unwrap().iter().map(|k| k.pid).collect();
            (kids.len() >= grandchildren).then_some((c.pid, kids))
        })
    });
    // The program starts with no signal blocked (what lab does with the
    // signals must not leak into it); a program that blocks them itself,
    // to take them on a thread of its own (the broker), is not checked.
    if !case.blocks_signals_itself {
        let status =
            std::fs::read_to_string(format!("/proc/{program}/status")).unwrap();
        let blocked = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
        assert_eq!(blocked.split_whitespace().nth(1), Some("0000000000000000"));
    }
    if to_group {
        // SAFETY: killpg only sends a signal, to the group we made.
        assert_eq!(unsafe { libc::killpg(lab_pid, sig) }, 0);
    } else {
        signal(lab_pid, sig);
    }
    let status = finish(&mut lab);
    let stderr = stderr.join().unwrap();
    let mut tree = kids;
    tree.push(program);
    assert_nothing_left(&tree, &[program, lab_pid]);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    assert_eq!(
        std::fs::read_to_string(&earlier).unwrap(),
        "{\"kept\": true}\n",
        "earlier results are intact"
    );
    if own_out {
        let names: Vec<_> =
            std::fs::read_dir(out.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "only the earlier file: {names:?}");
    } else {
        let runs: Vec<_> =
            std::fs::read_dir(out.path().join("runs")).unwrap().flatten().collect();
        assert_eq!(runs.len(), 1, "only the earlier run: {runs:?}");
    }
    assert_eq!(status.code(), Some(128 + sig), "{stderr}");
    let says = case.says.replace("{tmp}", &tmp.path().display().to_string());
    let line = one_line(&stderr);
    assert!(labtest::shape(line, &says), "{line:?} is not {says:?}");
}

/// fork-vs-thread with 3 workers that print for a long while.
const FORK_VS_THREAD_LONG: &[&str] =
    &["--procs", "3", "--counts", "10000000", "--rounds", "1"];

/// mq-sweep's thread-pool broker at one point, for ten minutes.
const MQ_SWEEP_FOR_TEN_MINUTES: &[&str] = &[
    "--brokers",
    "lab",
    "--threads",
    "1",
    "--no-event-loop",
    "--duration",
    "600",
    "--rounds",
    "1",
    "--switch-cost-us",
    "1",
];

interrupt_tests! {
    interrupt_lab:
    // ... and the run folder being written, which was this run's only one.
    sigint_to_lab_stops_fork_vs_thread_and_removes_its_directory: LabCase {
        experiment: "fork-vs-thread",
        args: FORK_VS_THREAD_LONG,
        marker: "10000000",
        grandchildren: 3,
        sig: libc::SIGINT,
        says: "lab: interrupted by SIGINT; stopped 1 program, removed \
               {tmp}/lab-fork-vs-thread-*, */.fork-vs-thread.partial-*",
        ..Default::default()
    };
    sigterm_to_the_group_stops_ctx_switch_and_its_program: LabCase {
        experiment: "ctx-switch",
        args: &[
            "--no-perf",
            "--modes",
            "processes",
            "--pins",
            "none",
            "--rounds",
            "1",
            "-n",
            "100000000",
        ],
        marker: "100000000",
        sig: libc::SIGTERM,
        to_group: true,
        own_out: true,
        says: "lab: interrupted by SIGTERM; stopped 1 program, \
               no temporary directory to remove",
        ..Default::default()
    };
    // pipe-speed reads each program's report from an unnamed temporary
    // file (bins::run_json): there is no directory to leave behind.
    sighup_to_lab_stops_pipe_speed_and_its_program: LabCase {
        experiment: "pipe-speed",
        args: &["--blocks", "1", "--count", "100000000", "--rounds", "1"],
        marker: "100000000",
        sig: libc::SIGHUP,
        own_out: true,
        says: "lab: interrupted by SIGHUP; stopped 1 program, \
               no temporary directory to remove",
        ..Default::default()
    };
    // The broker is the program with --readers; the load generator may or
    // may not have started: either way nothing may be left.
    sigterm_to_lab_stops_mq_sweep_and_its_broker: LabCase {
        experiment: "mq-sweep",
        args: MQ_SWEEP_FOR_TEN_MINUTES,
        marker: "--readers",
        sig: libc::SIGTERM,
        blocks_signals_itself: true,
        says: "lab: interrupted by SIGTERM; stopped # program*, \
               removed */.mq-sweep.partial-*",
        ..Default::default()
    };
}

// ------------------------------------------------------ killed outright

/// `lab run EXPERIMENT ARGS` killed with SIGKILL, which it cannot catch,
/// once the program with `marker` has `grandchildren` children.
struct Killed {
    experiment: &'static str,
    args: &'static [&'static str],
    marker: &'static str,
    grandchildren: usize,
}

const KILLED: [Killed; 3] = [
    Killed {
        experiment: "fork-vs-thread",
        args: FORK_VS_THREAD_LONG,
        marker: "10000000",
        grandchildren: 3,
    },
    // The broker's reader threads are no children: wait for the broker.
    Killed {
        experiment: "mq-sweep",
        args: MQ_SWEEP_FOR_TEN_MINUTES,
        marker: "--readers",
        grandchildren: 0,
    },
    // A prefork server's pool members are the runner's grandchildren.
    Killed {
        experiment: "server-designs",
        args: &["--designs", "prefork", "--rounds", "5", "--loops", "100000"],
        marker: "prefork",
        grandchildren: 3,
    },
];

/// Start `case` in a scratch checkout with a TMPDIR of its own, beside an
/// earlier run; wait for its program; return lab, its stderr, the
/// program's tree, and the scratch folders.
fn start_killed(
    case: &Killed,
) -> (
    Running,
    std::thread::JoinHandle<String>,
    Vec<i32>,
    [labkit::cleanup::TempDir; 2],
) {
    let tmp = labtest::tempdir();
    let checkout = labtest::tempdir();
    let earlier =
        checkout.path().join("runs/2000-01-01-000000-earlier/fork-vs-thread");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("fork-vs-thread.json"), "{}\n").unwrap();
    let mut cmd = common::lab_std();
    cmd.env("TMPDIR", tmp.path()).env("LAB_CHECKOUT", checkout.path());
    cmd.args(["run", case.experiment]).args(case.args);
    let (mut lab, stderr) = start(&mut cmd);
    let lab_pid = lab.id() as i32;
    let tree = wait_until("the program's children", || {
        if let Some(status) = lab.try_wait().unwrap() {
            panic!("lab ended before it was killed: {status}");
        }
        children::of(lab_pid).unwrap().iter().find_map(|c| {
            if !has_arg(c.pid, case.marker) {
                return None;
            }
            let mut tree: Vec<i32> =
                children::of(c.pid).unwrap().iter().map(|k| k.pid).collect();
            (tree.len() >= case.grandchildren).then(|| {
                tree.push(c.pid);
                tree
            })
        })
    });
    (lab, stderr, tree, [tmp, checkout])
}

/// The run folders under `checkout`'s `runs/`, and the entries of `tmp`.
fn leftovers(tmp: &Path, checkout: &Path) -> (Vec<String>, Vec<String>) {
    let names = |dir: &Path| -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    (names(&checkout.join("runs")), names(tmp))
}

#[test]
fn a_kill_9_of_lab_leaves_no_program_and_no_file_of_the_run() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    for case in &KILLED {
        let (mut lab, stderr, tree, [tmp, checkout]) = start_killed(case);
        let lab_pid = lab.id() as i32;
        signal(lab_pid, libc::SIGKILL);
        let status = finish(&mut lab);
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{}", case.experiment);
        // The guard ends once it has cleaned up; its line is the last.
        let stderr = stderr.join().unwrap();
        wait_until("the guard to end", || {
            let kids = children::of(std::process::id() as i32).unwrap();
            let gone = kids.iter().all(|c| {
                let comm = std::fs::read_to_string(format!("/proc/{}/comm", c.pid));
                comm.unwrap_or_default().trim() != "lab-guard" || c.state == 'Z'
            });
            gone.then_some(())
        });
        // Reap what was handed to this subreaper: the guard, and the
        // programs the death signal killed.
        while let Ok(status) =
            nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG))
        {
            if status == nix::sys::wait::WaitStatus::StillAlive {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let what = case.experiment;
        assert_nothing_left(&tree, &[tree[tree.len() - 1], lab_pid]);
        let (runs, tmp_left) = leftovers(tmp.path(), checkout.path());
        assert_eq!(runs, ["2000-01-01-000000-earlier"], "{what}: {stderr}");
        assert_eq!(tmp_left, Vec::<String>::new(), "{what}: {stderr}");
        let line = stderr.lines().last().unwrap_or("");
        assert!(
            labtest::shape(
                line,
                "lab: the runner died without cleaning up (killed?); its guard \
                 stopped # program group* and removed *"
            ),
            "{what}: {line:?}"
        );
    }
}

#[test]
fn lab_reaps_its_guard_on_every_way_out() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    let checkout = labtest::tempdir();
    // --help, a usage error, a failure, a success: the guard is reaped
    // by lab itself, never handed to this subreaper.
    for (args, code) in [
        (&["--help"][..], 0),
        (&["run", "fork-vs-thread", "--help"], 0),
        (&["run", "fork-vs-thread", "--bogus"], 2),
        (&["compare", "/"], 2),
        (&["verdicts"], 2),
        (&["list"], 0),
    ] {
        let out = common::lab_std()
            .env("LAB_CHECKOUT", checkout.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        no_child_left();
    }
}

#[test]
fn the_next_run_removes_what_a_run_killed_with_its_guard_left() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    let case = &KILLED[0];
    let (mut lab, stderr, tree, [tmp, checkout]) = start_killed(case);
    let lab_pid = lab.id() as i32;
    // The guard first (as `pkill -9 lab` would), then lab: nothing cleans
    // up but the kernel's death signal, which ends the programs.
    let guard = children::of(lab_pid)
        .unwrap()
        .into_iter()
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{}/comm", c.pid))
                .is_ok_and(|n| n.trim() == "lab-guard")
        })
        .expect("lab has a guard");
    signal(guard.pid, libc::SIGKILL);
    signal(lab_pid, libc::SIGKILL);
    finish(&mut lab);
    let _ = stderr.join().unwrap();
    wait_until("the programs to end", || {
        let alive = tree.iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
        });
        (!alive).then_some(())
    });
    while let Ok(s) =
        nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG))
    {
        if s == nix::sys::wait::WaitStatus::StillAlive {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // Left behind: the run folder with its staging folder, the log's
    // temporary directory.
    let (runs, tmp_left) = leftovers(tmp.path(), checkout.path());
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(tmp_left.len(), 1, "{tmp_left:?}");
    assert!(tmp_left[0].starts_with("lab-fork-vs-thread-"), "{tmp_left:?}");
    // A live process's temporary directory, marked and locked: kept.
    let live = tmp.path().join("lab-live-test");
    std::fs::create_dir(&live).unwrap();
    let held = std::fs::File::open(&live).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&held);
    // SAFETY: flock on a descriptor we own.
    let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
    assert_eq!(locked, 0);
    std::fs::write(live.join(labkit::cleanup::LOCK_MARK), "").unwrap();
    // An unmarked one is never judged.
    std::fs::create_dir(tmp.path().join("lab-unmarked")).unwrap();

    let out = common::lab_std()
        .env("TMPDIR", tmp.path())
        .env("LAB_CHECKOUT", checkout.path())
        .arg("compare")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert!(
        labtest::shape(
            first,
            "lab: removed what dead runs left behind: */runs/*/.fork-vs-thread.\
             partial-#, */runs/*, {tmp}/lab-fork-vs-thread-*"
                .replace("{tmp}", &tmp.path().display().to_string())
                .as_str()
        ),
        "{first:?}"
    );
    // The dead run was no finished run: `lab compare` finds none of the
    // reader's, not the killed one.
    let (runs, mut tmp_left) = leftovers(tmp.path(), checkout.path());
    assert_eq!(runs, ["2000-01-01-000000-earlier"]);
    tmp_left.sort();
    assert_eq!(tmp_left, ["lab-live-test", "lab-unmarked"]);
    drop(held);
    no_child_left();
}

// ------------------------------------------------------- program parents

/// A program parent interrupted mid-run, and the one line it must end
/// with.
struct Case {
    program: &'static str,
    args: &'static [&'static str],
    /// Children it has made before the signal is sent.
    children: usize,
    sig: i32,
    /// To its process group, as the terminal's Ctrl-C is, or its pid alone.
    to_group: bool,
    /// Stopped (SIGSTOP) around the signal, so that it is caught mid-run
    /// however fast it is.
    freeze: bool,
    /// Its stderr, where each `#` is a number ([`labtest::shape`]).
    says: &'static str,
}

/// Run the program, wait for its children, signal it as `case` says, let
/// it go on, and check that it ended with exit status 128 + the signal,
/// saying `case.says`, with nothing of it left.
fn interrupt_program(case: &Case) {
    become_subreaper();
    let path = common::bin_dir().join(case.program);
    let (mut child, stderr) = start(Command::new(path).args(case.args));
    let pid = child.id() as i32;
    let kids = children_of(&mut child, case.children);
    if case.freeze {
        signal(pid, libc::SIGSTOP);
    }
    if case.to_group {
        // SAFETY: killpg only sends a signal, to the group we made.
        assert_eq!(unsafe { libc::killpg(pid, case.sig) }, 0);
    } else {
        signal(pid, case.sig);
    }
    if case.freeze {
        signal(pid, libc::SIGCONT);
    }
    let status = finish(&mut child);
    let stderr = stderr.join().unwrap();
    assert_nothing_left(&kids, &[pid]);
    assert_eq!(status.code(), Some(128 + case.sig), "{}: {stderr}", case.program);
    assert!(labtest::shape(&stderr, case.says), "{stderr:?} is not {:?}", case.says);
}

/// fork, with SIGTERM to its pid; the group test changes the signal.
const FORK: Case = Case {
    program: "fork",
    args: &["--procs", "4", "--count", "100000000", "--log", "/dev/null"],
    children: 4,
    sig: libc::SIGTERM,
    to_group: false,
    freeze: false,
    says: "fork: interrupted by SIGTERM; passed it on to the 4 children and \
           reaped them\n",
};

/// forkcreat in its `--reap sigchld` mode; the `wait` mode is the same.
const FORKCREAT: Case = Case {
    program: "forkcreat",
    args: &["-n", "100000000", "--reap", "sigchld"],
    children: 1,
    sig: libc::SIGINT,
    to_group: false,
    freeze: true,
    says: "forkcreat: interrupted by SIGINT; stopped after # forks; reaped all #\n",
};

interrupt_tests! {
    interrupt_program:
    sigterm_to_fork_is_passed_on_to_its_children: FORK;
    sigint_to_the_fork_group_is_one_line_and_exit_130: Case {
        sig: libc::SIGINT,
        to_group: true,
        says: "fork: interrupted by SIGINT; passed it on to the 4 children and \
               reaped them\n",
        ..FORK
    };
    sighup_to_stacklimit_forks_reaps_the_children: Case {
        program: "stacklimit",
        args: &["forks", "--max", "100000"],
        children: 2,
        sig: libc::SIGHUP,
        to_group: false,
        freeze: true,
        says: "stacklimit: interrupted by SIGHUP; passed it on to the # children \
               and reaped them\n",
    };
    // Enough workers that the signal lands while they are still being made,
    // long before the last check for it.
    sigterm_to_footprint_procs_reaps_the_workers: Case {
        program: "footprint",
        args: &["--kind", "procs", "--workers", "1000"],
        children: 2,
        sig: libc::SIGTERM,
        to_group: false,
        freeze: true,
        says: "footprint: interrupted by SIGTERM; passed it on to the # workers \
               and reaped them\n",
    };
    sigint_to_forkcreat_and_creattime_reaps_every_child:
        FORKCREAT,
        Case { args: &["-n", "100000000", "--reap", "wait"], ..FORKCREAT },
        Case {
            program: "creattime",
            args: &["100000"],
            sig: libc::SIGTERM,
            says: "creattime: interrupted by SIGTERM; reaped all # children, \
                   joined all # threads\n",
            ..FORKCREAT
        };
}

#[test]
fn children_of_a_parent_killed_outright_die_with_it() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    let path = common::bin_dir().join("fork");
    let args = ["--procs", "3", "--count", "100000000", "--log", "/dev/null"];
    let (mut parent, _stderr) = start(Command::new(path).args(args));
    let pid = parent.id() as i32;
    let kids = children_of(&mut parent, 3);
    signal(pid, libc::SIGKILL);
    assert_eq!(finish(&mut parent).signal(), Some(libc::SIGKILL));
    // The children are handed to this subreaper; each must end, not run
    // on through its 10^8 lines: killed by its death signal, or, if the
    // parent died before the child had asked for one, by its own check
    // (exit status 1).
    for kid in kids {
        let mut status = 0;
        wait_until(&format!("child {kid} to die"), || {
            // SAFETY: a valid pointer to a local.
            let r = unsafe { libc::waitpid(kid, &mut status, libc::WNOHANG) };
            (r == kid).then_some(())
        });
        let killed =
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL;
        let left = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 1;
        assert!(killed || left, "child {kid}: status {status:#x}");
    }
    assert_nothing_left(&[], &[pid]);
}

#[test]
fn a_footprint_worker_killed_mid_run_is_named_and_the_rest_reaped() {
    if !labtest::alone() {
        return;
    }
    let _serial = labtest::serial();
    become_subreaper();
    let path = common::bin_dir().join("footprint");
    let args = ["--kind", "procs", "--workers", "4", "--touch", "64M"];
    let (mut parent, stderr) = start(Command::new(path).args(args));
    let pid = parent.id() as i32;
    let first = children_of(&mut parent, 1)[0];
    signal(first, libc::SIGKILL);
    let status = finish(&mut parent);
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // Before it reported (the usual case: it was still touching pages) or
    // after: either way the dead worker is named.
    let named = format!("(pid {first}) was killed by SIGKILL");
    assert!(stderr.contains(&named), "{stderr:?} does not name {first}");
    assert!(stderr.starts_with("footprint: "), "{stderr}");
    assert_nothing_left(&[first], &[pid]);
}
