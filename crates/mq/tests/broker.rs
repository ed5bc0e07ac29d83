//! The broker and the load generator as whole processes: exactly-once
//! delivery, bad peers, back pressure, shutdown by signal, bad flags.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use labkit::limited::{Limits, NOBODY};
use mq::Stats;
use mq::load::LoadReport;
use mq::protocol::{self, HELLO_RECV, HELLO_SEND, LEN, Stamp};

struct Broker {
    child: Child,
    out: BufReader<ChildStdout>,
    addr: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn broker(args: &[&str]) -> Broker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = String::new();
    out.read_line(&mut addr).unwrap();
    assert!(addr.starts_with("127.0.0.1:"), "first line: {addr:?}");
    Broker { child, out, addr: addr.trim().to_string() }
}

/// Send `signal`, wait for the exit, return the stats (the broker's own
/// type, from its `--json` line) and stderr.
fn stop(mut b: Broker, signal: &str) -> (Stats, String) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &b.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    b.out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    if let Some(mut stderr) = b.child.stderr.take() {
        stderr.read_to_string(&mut err).unwrap();
    }
    let status = b.child.wait().unwrap();
    assert!(status.success(), "broker: {status}; stderr: {err}");
    let stats = labkit::testing::json(rest.lines().last().unwrap_or("").as_bytes());
    (stats, err)
}

/// Run `load` against `addr`; its report (the program's own type) when
/// it printed one.
fn load(addr: &str, args: &[&str]) -> (std::process::Output, Option<LoadReport>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_load"));
    cmd.args(["--addr", addr, "--json", "--size", "64"]);
    if !args.contains(&"--duration") {
        cmd.args(["--duration", "0.3"]);
    }
    let out = cmd.args(args).output().unwrap();
    let report =
        (!out.stdout.is_empty()).then(|| labkit::testing::json(&out.stdout));
    (out, report)
}

fn exactly_once(pools: &[&str], threads: usize) {
    let b = broker(&[pools, &["--queues", "3"]].concat());
    let (out, r) =
        load(&b.addr, &["--senders", "6", "--receivers", "5", "--queues", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = r.unwrap();
    assert_eq!((r.lost, r.duplicated, r.corrupt), (0, 0, 0));
    let sent = r.sent;
    assert!(sent > 0);
    assert_eq!(r.received, sent);
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_in, sent);
    assert_eq!(stats.messages_out, sent);
    assert_eq!(stats.connections, 11);
    assert_eq!(stats.closed_bad, 0, "{err}");
    assert_eq!(stats.threads_joined, threads);
}

#[test]
fn exactly_once_across_queues_with_thread_pools() {
    // acceptor + 2 readers + 3 deliverers + 2 writers
    exactly_once(&["--readers", "2", "--deliverers", "3", "--writers", "2"], 8);
}

#[test]
fn exactly_once_across_queues_with_the_event_loop() {
    exactly_once(&["--event-loop"], 0);
}

fn connect(addr: &str, hello: Option<Vec<u8>>) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    if let Some(h) = hello {
        s.write_all(&h).unwrap();
    }
    s
}

fn publish(s: &mut TcpStream, sender: u32, queue: u16, n: u64) {
    let mut buf = Vec::new();
    for seq in 0..n {
        Stamp { sender, seq, sent_ns: 0 }.publish(queue, 32, &mut buf);
    }
    s.write_all(&buf).unwrap();
}

/// Read `n` messages of `queue` and return their (sender, seq) pairs.
fn take(s: &mut TcpStream, queue: u16, n: usize) -> Vec<(u32, u64)> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    for _ in 0..n {
        let mut len = [0u8; LEN];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        let stamp = Stamp::check(&body, queue, 32).expect("an intact message");
        got.push((stamp.sender, stamp.seq));
    }
    got.sort();
    got
}

/// Abort a connection with a RST instead of a FIN.
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt on a socket we own, with a valid linger struct.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    drop(s);
}

fn bad_peers(mode: &[&str]) {
    let b = broker(&[mode, &["--queues", "2", "--max-frame", "4K"]].concat());
    let addr = b.addr.clone();
    let mut r0 = connect(&addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut r1 = connect(&addr, Some(protocol::hello(HELLO_RECV, 1)));
    let send = || connect(&addr, Some(protocol::hello(HELLO_SEND, 0)));

    // Oversized length after 5 good messages.
    let mut a = send();
    publish(&mut a, 1, 0, 5);
    a.write_all(&[0xff, 0xff, 0xff, 0xff, 3]).unwrap();
    // Truncated: 3 good messages, then half a frame and the end.
    let mut t = send();
    publish(&mut t, 2, 1, 3);
    t.write_all(&[0, 0, 0, 100, 3, 0, 1, 9, 9]).unwrap();
    t.shutdown(Shutdown::Write).unwrap();
    // Malformed kind after 2 good messages.
    let mut c = send();
    publish(&mut c, 3, 0, 2);
    c.write_all(&[0, 0, 0, 1, 9]).unwrap();
    // One good message, half a frame, then a reset, once the good one has
    // come through (with a's five and c's two, all for queue 0).
    let mut d = send();
    publish(&mut d, 4, 0, 1);
    d.write_all(&[0, 0, 0, 50, 3]).unwrap();
    let mut first0: Vec<(u32, u64)> = (0..5).map(|s| (1, s)).collect();
    first0.extend([(3, 0), (3, 1), (4, 0)]);
    assert_eq!(take(&mut r0, 0, first0.len()), first0);
    reset(d);
    // No hello; a queue that does not exist; a zero length.
    let mut e = connect(&addr, None);
    publish(&mut e, 5, 0, 1);
    let mut f = send();
    publish(&mut f, 6, 7, 1);
    let mut z = send();
    z.write_all(&[0, 0, 0, 0]).unwrap();
    // And a well-behaved sender afterwards.
    let mut h = send();
    publish(&mut h, 8, 0, 4);
    h.shutdown(Shutdown::Write).unwrap();

    let want0: Vec<(u32, u64)> = (0..4).map(|s| (8, s)).collect();
    assert_eq!(take(&mut r0, 0, want0.len()), want0);
    assert_eq!(take(&mut r1, 1, 3), vec![(2, 0), (2, 1), (2, 2)]);
    // The bad connections were closed by the broker: reads see the end.
    for mut s in [a, c, e, f, z] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8];
        assert!(matches!(s.read(&mut byte), Ok(0) | Err(_)));
    }
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats.messages_in, 15, "{err}");
    assert_eq!(stats.messages_out, 15);
    assert_eq!(stats.closed_bad, 7, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 7, "one line per bad connection:\n{err}");
    for needle in [
        "oversized frame: length 4294967295 > max 4096",
        "truncated frame",
        "unknown kind 9",
        "PUBLISH before HELLO_SEND",
        "no such queue 7",
        "length 0",
    ] {
        assert!(err.contains(needle), "no '{needle}' in:\n{err}");
    }
}

#[test]
fn bad_peers_close_only_their_connection_with_thread_pools() {
    bad_peers(&["-r", "2", "-w", "2", "-d", "2"]);
}

#[test]
fn bad_peers_close_only_their_connection_with_the_event_loop() {
    bad_peers(&["--event-loop"]);
}

fn tasks(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

fn shutdown_joins_everything(mode: &[&str], threads: usize, signal: &str) {
    let mut b = broker(mode);
    // A receiver, a sender in the middle of a frame, a silent connection.
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    publish(&mut s, 1, 0, 3);
    s.write_all(&[0, 0, 0, 40, 3]).unwrap();
    let _quiet = connect(&b.addr, None);
    // The three messages went through before the signal.
    assert_eq!(take(&mut r, 0, 3).len(), 3);
    // Every worker thread has started (the pools start before the broker
    // prints its address, but a loaded machine may still be creating the
    // last ones): wait for the count, bounded, rather than for a fixed time.
    // A broker that fails to start one ends instead.
    while tasks(b.child.id()) != threads + 1 {
        assert!(b.child.try_wait().unwrap().is_none(), "the broker ended");
        std::thread::yield_now();
    }
    let (stats, _) = stop(b, signal);
    assert_eq!(stats.threads_joined, threads);
    assert_eq!(stats.messages_in, 3);
    assert_eq!(stats.messages_out, 3);
}

#[test]
fn sigterm_joins_every_pool_thread() {
    shutdown_joins_everything(&["-r", "3", "-w", "2", "-d", "4"], 10, "TERM");
}

#[test]
fn sigint_stops_the_event_loop() {
    shutdown_joins_everything(&["--event-loop"], 0, "INT");
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`, `VmSize`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The state letter of thread `tid` of this process (`R`, `S`, ...).
fn thread_state(tid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"));
    // The state follows the command name, which is in parentheses.
    stat.ok()
        .and_then(|s| s.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()))
        .unwrap_or('?')
}

fn back_pressure(mode: &[&str]) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::SeqCst};
    let b = broker(&[mode, &["--capacity", "4", "--outbox", "2"]].concat());
    let pid = b.child.id();
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    // 64 MiB of messages, far more than the socket buffers and the queues.
    const N: u64 = 4096;
    let (tid, written) = (Arc::new(AtomicI32::new(0)), Arc::new(AtomicU64::new(0)));
    let (me, done) = (tid.clone(), written.clone());
    let sender = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        me.store(unsafe { libc::gettid() }, SeqCst);
        let mut buf = Vec::new();
        for seq in 0..N {
            buf.clear();
            Stamp { sender: 1, seq, sent_ns: 0 }.publish(0, 16 << 10, &mut buf);
            s.write_all(&buf).unwrap();
            done.store(seq + 1, SeqCst);
        }
        s.shutdown(Shutdown::Write).unwrap();
    });
    // The receiver reads nothing until the sender is stopped in write(2),
    // past what the broker's queue and outbox hold (an event, not a time):
    // the broker has stopped reading it, as it must.
    loop {
        let t = tid.load(SeqCst);
        let n = written.load(SeqCst);
        assert!(!sender.is_finished(), "all {N} messages went in unread");
        if t != 0 && n > 6 && thread_state(t) == 'S' && written.load(SeqCst) == n {
            break;
        }
        std::thread::yield_now();
    }
    let rss_kib = status_kib(pid, "VmRSS");
    assert!(rss_kib < 32 << 10, "broker RSS {rss_kib} KiB while a receiver stalls");
    r.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut body = vec![0u8; 3 + (16 << 10)];
    for seq in 0..N {
        let mut len = [0u8; LEN];
        r.read_exact(&mut len).unwrap();
        r.read_exact(&mut body).unwrap();
        let stamp = Stamp::check(&body, 0, 16 << 10).unwrap();
        assert_eq!(stamp.seq, seq, "one sender, one receiver: in order");
    }
    sender.join().unwrap();
    // The broker never held more than a few MiB of the 64 sent through it.
    let peak_kib = status_kib(pid, "VmHWM");
    assert!(peak_kib < 32 << 10, "broker peak RSS {peak_kib} KiB");
    let (stats, _) = stop(b, "TERM");
    assert_eq!(stats.messages_out, N);
}

#[test]
fn a_stalled_receiver_holds_senders_back_with_thread_pools() {
    back_pressure(&["-r", "1", "-w", "1", "-d", "1"]);
}

#[test]
fn a_stalled_receiver_holds_senders_back_with_the_event_loop() {
    back_pressure(&["--event-loop"]);
}

fn exit_code(program: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(program).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap(), err)
}

#[test]
fn bad_flags_exit_2() {
    let broker = env!("CARGO_BIN_EXE_broker");
    let load = env!("CARGO_BIN_EXE_load");
    for args in [
        &["--readers", "0"][..],
        &["--listen", "nowhere"],
        &["--queues", "0"],
        &["--max-frame", "lots"],
        &["--drain", "-1"],
    ] {
        assert_eq!(exit_code(broker, args).0, 2, "broker {args:?}");
    }
    for args in [
        &["--senders", "1"][..],
        &["--addr", "127.0.0.1:1", "--size", "5"],
        &["--addr", "127.0.0.1:1", "--duration", "soon"],
    ] {
        assert_eq!(exit_code(load, args).0, 2, "load {args:?}");
    }
    let (code, err) = exit_code(
        load,
        &["--addr", "127.0.0.1:1", "--receivers", "2", "--queues", "4"],
    );
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("--receivers"), "{err}");
}

/// A TCP socket bound to a free port of 127.0.0.1 that never listens.
fn bound_not_listening() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) with constant arguments; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor that nothing else owns.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_in is plain data; zero is a valid start.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: valid pointers to `addr` and `len`, of the sizes given.
    let bound = unsafe {
        libc::bind(fd, (&raw const addr).cast(), len) == 0
            && libc::getsockname(fd, (&raw mut addr).cast(), &mut len) == 0
    };
    assert!(bound, "bind: {}", std::io::Error::last_os_error());
    (owned, u16::from_be(addr.sin_port))
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
    let out = load.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("load: "), "{err}");
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
    labkit::require!(
        labkit::testing::is_root(),
        "needs root to run the broker as nobody"
    );
    // nobody must be able to reach the binary: copy it to an open directory.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap();
    let exe = dir.path().join("broker");
    std::fs::copy(env!("CARGO_BIN_EXE_broker"), &exe).unwrap();
    let limits = Limits { nproc: Some(30), user: Some(NOBODY), ..Limits::default() };
    let mut cmd = Command::new(&exe);
    let out = labkit::limited::apply(&mut cmd, limits)
        .args(["--readers", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("broker: cannot start reader "), "{err}");
    assert!(err.contains(" of 100: ") && err.contains("EAGAIN"), "{err}");
    assert!(err.contains("; stopped the "), "{err}");
}

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

#[test]
fn slow_and_absent_consumers_hold_back_only_their_queues_with_thread_pools() {
    hostile_consumers_beside_normal_traffic(&["-r", "2", "-w", "2", "-d", "2"]);
}

#[test]
fn slow_and_absent_consumers_hold_back_only_their_queues_with_the_event_loop() {
    hostile_consumers_beside_normal_traffic(&["--event-loop"]);
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

#[test]
fn two_and_three_loads_against_one_pool_broker() {
    successive_loads(&["-r", "2", "-w", "2", "-d", "3"], 2);
    successive_loads(&["-r", "2", "-w", "2", "-d", "3"], 3);
}

#[test]
fn two_and_three_loads_against_one_event_loop_broker() {
    successive_loads(&["--event-loop"], 2);
    successive_loads(&["--event-loop"], 3);
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
    let report = (!out.stdout.is_empty())
        .then(|| labkit::testing::json(out.stdout.as_bytes()));
    (out.status.code(), out.stderr, report)
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

fn unfinished_frames(mode: &[&str]) {
    let b = broker(mode);
    let before = status_kib(b.child.id(), "VmRSS");
    // 200 connections, each announcing a frame of 1 MiB - 1 and sending
    // 100 bytes of it.
    let mut held = Vec::new();
    for _ in 0..200 {
        let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
        let mut frame = ((1u32 << 20) - 1).to_be_bytes().to_vec();
        frame.extend([protocol::PUBLISH, 0, 0]);
        frame.extend([7u8; 100]);
        s.write_all(&frame).unwrap();
        held.push(s);
    }
    // A message through the same broker: the reads above are done by then
    // in the event loop, and very likely in the pools.
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 1)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    publish(&mut s, 1, 1, 1);
    assert_eq!(take(&mut r, 1, 1), vec![(1, 0)]);
    let grown = status_kib(b.child.id(), "VmRSS").saturating_sub(before);
    // Announced: 200 MiB. Received: 200 x 107 bytes.
    assert!(grown < 16 << 10, "RSS grew by {grown} KiB");
    drop(held);
    stop(b, "TERM");
}

#[test]
fn unfinished_frames_cost_what_arrived_with_thread_pools() {
    unfinished_frames(&["-r", "2", "-w", "2", "-d", "2"]);
}

#[test]
fn unfinished_frames_cost_what_arrived_with_the_event_loop() {
    unfinished_frames(&["--event-loop"]);
}

/// True if the broker closed the connection (end of stream or reset)
/// rather than leaving it open for `wait`.
fn closed_by_broker(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8];
    match s.read(&mut byte) {
        Ok(0) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        Ok(_) => false,
    }
}

fn max_connections(mode: &[&str]) {
    let b = broker(&[mode, &["--max-connections", "2"]].concat());
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    // Both served: a message goes through.
    publish(&mut s, 1, 0, 1);
    assert_eq!(take(&mut r, 0, 1), vec![(1, 0)]);
    let mut third = connect(&b.addr, None);
    assert!(
        closed_by_broker(&mut third, Duration::from_secs(5)),
        "the third connection was served"
    );
    // Room again once one has gone (the broker notices it soon after).
    drop(s);
    let mut served = None;
    for attempt in 0..100 {
        // A refused connection may be closed before the hello or the
        // message is written: a failed write is a refusal too.
        let mut s = TcpStream::connect(&b.addr).unwrap();
        let mut buf = protocol::hello(HELLO_SEND, 0);
        Stamp { sender: 10 + attempt, seq: 0, sent_ns: 0 }.publish(0, 32, &mut buf);
        if s.write_all(&buf).is_ok()
            && !closed_by_broker(&mut s, Duration::from_millis(200))
        {
            served = Some(attempt);
            break;
        }
    }
    let attempt = served.expect("no connection served after one closed");
    assert_eq!(take(&mut r, 0, 1), vec![(10 + attempt, 0)]);
    let (stats, err) = stop(b, "TERM");
    assert!(stats.refused >= 1, "{stats:?}");
    assert!(err.contains("(--max-connections)"), "{err}");
    assert!(err.lines().count() <= 2, "one line per 5 s at most:\n{err}");
}

#[test]
fn max_connections_refuses_the_next_with_thread_pools() {
    max_connections(&["-r", "2", "-w", "2", "-d", "2"]);
}

#[test]
fn max_connections_refuses_the_next_with_the_event_loop() {
    max_connections(&["--event-loop"]);
}

#[test]
fn a_broker_out_of_address_space_names_the_thread_and_stops_the_rest() {
    // What a small broker maps, plus 40 MiB: room for some of 500 readers
    // (256 KiB of stack and a 64 KiB buffer each), not for all of them.
    let small = broker(&["-r", "1", "-w", "1", "-d", "1"]);
    let limit = (status_kib(small.child.id(), "VmSize") + (40 << 10)) << 10;
    stop(small, "TERM");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_broker"));
    let limits = Limits { address_space: Some(limit), ..Limits::default() };
    let out = labkit::limited::apply(&mut cmd, limits)
        .args(["--readers", "500", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", out.status);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("broker: cannot start reader "), "{err}");
    assert!(err.contains(" of 500: "), "{err}");
    assert!(err.contains("; stopped the "), "{err}");
}

fn out_of_descriptors(mode: &[&str]) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_broker"));
    cmd.args(mode).args(["--json", "--drain", "0"]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: the child only calls setrlimit(2), which is async-signal-safe,
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 24, rlim_max: 24 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = String::new();
    out.read_line(&mut addr).unwrap();
    // Its stderr, line by line, as it comes.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let b = Broker { child, out, addr: addr.trim().to_string() };
    // 40 connections against 24 descriptors: the last ones wait in the
    // listen queue while accept fails with EMFILE, again and again.
    let held: Vec<TcpStream> = (0..40).map(|_| connect(&b.addr, None)).collect();
    let first = rx.iter().find(|l| l.contains("accept:"));
    let first = first.expect("the broker ended without logging an accept error");
    assert!(first.contains("EMFILE") && first.contains("retrying every"), "{first}");
    // Not a synchronisation: ten more back-off periods of failing accepts,
    // for the throttle to show that it logs them once per 5 s at most.
    std::thread::sleep(10 * mq::ACCEPT_BACKOFF);
    drop(held);
    let (_, _) = stop(b, "TERM");
    reader.join().unwrap();
    let more: Vec<String> = rx.iter().filter(|l| l.contains("accept:")).collect();
    assert!(more.len() <= 1, "{} more accept lines: {more:?}", more.len());
}

#[test]
fn out_of_descriptors_backs_off_and_logs_once_with_thread_pools() {
    out_of_descriptors(&["-r", "1", "-w", "1", "-d", "1"]);
}

#[test]
fn out_of_descriptors_backs_off_and_logs_once_with_the_event_loop() {
    out_of_descriptors(&["--event-loop"]);
}
