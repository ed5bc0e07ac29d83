//! The load generator against a broker, or against none: its failures, its
//! rate, hostile consumers beside it, and successive loads.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use labkit::limited::{Limits, NOBODY};
use mq::load::LoadReport;
use mq::protocol::{self, HELLO_RECV, HELLO_SEND, Stamp};

use crate::common::*;

/// A thread that publishes to `queue` until its connection is shut down;
/// returns how many messages it wrote whole.
fn flood(
    addr: &str,
    sender: u32,
    queue: u16,
) -> (TcpStream, std::thread::JoinHandle<u64>) {
    let mut s = connect(addr, Some(protocol::hello(HELLO_SEND, 0)));
    let handle = s.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for seq in 0.. {
            buf.clear();
            Stamp { sender, seq, sent_ns: 0 }.publish(queue, 1024, &mut buf);
            if s.write_all(&buf).is_err() {
                return seq;
            }
        }
        unreachable!()
    });
    (handle, t)
}

fn hostile_consumers_beside_normal_traffic(mode: &[&str]) {
    // Queues 0 and 1 for `load`; queue 2 has no receiver at all and 12
    // senders, and the only receiver of queue 3 never reads.
    let b = broker(
        &[mode, &["--queues", "4", "--capacity", "16", "--drain", "0.5"]].concat(),
    );
    let absent: Vec<_> = (0..12).map(|i| flood(&b.addr, 900 + i, 2)).collect();
    let _deaf = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 3)));
    let (slow, t3) = flood(&b.addr, 999, 3);
    let mut total = 0;
    for run in 0..2 {
        let (out, r) = load(
            &b.addr,
            &["--senders", "4", "--receivers", "2", "--queues", "2"]
                .into_iter()
                .chain(["--drain", "3", "--duration", "0.3"])
                .collect::<Vec<_>>(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}: {err}");
        let r = r.unwrap();
        assert!(r.sent > 0, "run {run}: nothing sent");
        assert_eq!((r.received, r.lost, r.duplicated), (r.sent, 0, 0), "run {run}");
        total += r.sent;
    }
    slow.shutdown(Shutdown::Both).unwrap();
    let mut flooded = t3.join().unwrap();
    for (s, t) in absent {
        s.shutdown(Shutdown::Both).unwrap();
        flooded += t.join().unwrap();
    }
    let (stats, err) = stop(b, "TERM");
    let (s_in, s_out) = (stats.messages_in, stats.messages_out);
    // What the broker took from the flooders waits (queue 2: no receiver;
    // queue 3: a receiver that does not read); all of load's got out.
    assert!(s_in > total && s_in <= total + flooded, "{stats:?}");
    assert!(s_out >= total, "{stats:?} {err}");
}

fn successive_loads(mode: &[&str], runs: usize) {
    let b = broker(&[mode, &["--queues", "3"]].concat());
    let mut total = 0;
    for run in 0..runs {
        let (out, r) = load(
            &b.addr,
            &[
                "--senders",
                "6",
                "--receivers",
                "5",
                "--queues",
                "3",
                "--duration",
                "0.3",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {} of {runs}: {err}", run + 1);
        let r = r.unwrap();
        assert!(r.sent > 0);
        assert_eq!(r.received, r.sent, "run {} of {runs}", run + 1);
        total += r.sent;
    }
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_in, total, "{err}");
    assert_eq!(stats.messages_out, total, "{err}");
    assert_eq!(stats.closed_bad, 0, "{err}");
}

/// Run `load` (0.5 s + 0.5 s drain) against `addr`. The deadline only
/// guards the test run against a hang (load gives up by itself after 1 s).
fn load_must_end(addr: &str) -> (Option<i32>, String, Option<LoadReport>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_load"));
    cmd.args(["--addr", addr, "--json", "--senders", "2", "--receivers", "2"])
        .args(["--queues", "2"])
        .args(["--size", "4096", "--duration", "0.5", "--drain", "0.5"]);
    let hang = Duration::from_secs(120);
    let out = labkit::limited::run(&mut cmd, Limits::default(), hang).unwrap();
    assert!(!out.timed_out, "load hung: {}", out.stderr);
    let report =
        (!out.stdout.is_empty()).then(|| labtest::json(out.stdout.as_bytes()));
    (out.status.code(), out.stderr, report)
}

#[test]
fn no_broker_is_a_failure_not_a_panic() {
    // A socket bound to a port but not listening: the port stays ours, and
    // a connect to it is refused.
    let (_bound, port) = bound_not_listening();
    let (code, err) = exit_code(
        env!("CARGO_BIN_EXE_load"),
        &["--addr", &format!("127.0.0.1:{port}")],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("load: cannot connect") && err.contains("ECONNREFUSED"),
        "{err}"
    );
    let (code, err) =
        exit_code(env!("CARGO_BIN_EXE_broker"), &["--listen", "192.0.2.1:80"]);
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
}

#[test]
fn a_broker_killed_mid_run_fails_the_load_cleanly() {
    let mut b = broker(&["-r", "2", "-w", "2", "-d", "2"]);
    let fds =
        || std::fs::read_dir(format!("/proc/{}/fd", b.child.id())).unwrap().count();
    let before = fds();
    let mut load = Command::new(env!("CARGO_BIN_EXE_load"))
        .args(["--addr", &b.addr, "--senders", "4", "--receivers", "4"])
        .args(["--size", "64", "--duration", "2", "--drain", "0.5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the broker once it holds all eight of load's connections.
    while fds() < before + 8 {
        assert!(load.try_wait().unwrap().is_none(), "load ended first");
        std::thread::yield_now();
    }
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let err = labtest::failed("load", &load.wait_with_output().unwrap());
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_rate_caps_what_the_senders_offer() {
    let b = broker(&["--event-loop"]);
    let (out, r) =
        load(&b.addr, &["--senders", "4", "--receivers", "4", "--rate", "1000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = r.unwrap();
    assert_eq!(r.rate, 1000.0);
    assert!(r.sent > 0);
    assert_eq!((r.received, r.lost, r.duplicated), (r.sent, 0, 0));
    let (stats, _) = stop(b, "TERM");
    assert_eq!(stats.messages_in, r.sent);
}

#[test]
fn a_thread_that_cannot_start_is_reported_and_the_rest_joined() {
    // RLIMIT_NPROC counts threads, but not for root: run as nobody.
    labtest::require!(labtest::is_root(), "needs root to run the broker as nobody");
    // nobody must be able to reach the binary: a copy in an open directory.
    let broker = env!("CARGO_BIN_EXE_broker");
    let Some(copy) = labtest::copy_for_nobody(broker) else { return };
    let limits = Limits { nproc: Some(30), user: Some(NOBODY), ..Limits::default() };
    let mut cmd = copy.command();
    let out = labkit::limited::apply(&mut cmd, limits)
        .args(["--readers", "100"])
        .output()
        .unwrap();
    let err = labtest::failed("broker", &out);
    assert!(err.starts_with("broker: cannot start reader "), "{err}");
    assert!(err.contains(" of 100: ") && err.contains("EAGAIN"), "{err}");
    assert!(err.contains("; stopped the "), "{err}");
}

with_both_designs! {
    slow_and_absent_consumers_hold_back_only_their_queues:
        hostile_consumers_beside_normal_traffic(["-r", "2", "-w", "2", "-d", "2"]);
    two_and_three_loads_against_one_broker:
        two_and_three_loads(["-r", "2", "-w", "2", "-d", "3"]);
}

fn two_and_three_loads(mode: &[&str]) {
    successive_loads(mode, 2);
    successive_loads(mode, 3);
}

#[test]
fn load_gives_up_on_a_broker_that_never_reads() {
    // Accepts every connection and never reads a byte.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    let (code, err, r) = load_must_end(&addr);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("load: timed out: 2 of 2 senders"), "{err}");
    let r = r.unwrap();
    assert_eq!(r.timed_out, 2, "{r:?}");
    assert!(r.unsent > 0, "{r:?}");
    assert_eq!(r.received, 0, "{r:?}");
    assert_eq!(r.lost, r.sent, "{r:?}");
}

#[test]
fn load_gives_up_on_a_stopped_broker() {
    // --drain: what load left unfinished need not be waited for at the end.
    let b = broker(&["-r", "1", "-w", "1", "-d", "1", "--drain", "0.2"]);
    let pid = b.child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let (code, err, _) = load_must_end(&b.addr);
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("load: timed out: "), "{err}");
    stop(b, "TERM");
}
