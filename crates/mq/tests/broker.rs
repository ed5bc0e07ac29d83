//! The broker and the load generator as whole processes: exactly-once
//! delivery, bad peers, back pressure, shutdown by signal, bad flags.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mq::protocol::{self, HELLO_RECV, HELLO_SEND, LEN, Stamp};
use serde_json::Value;

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

/// Send `signal`, wait for the exit, return the stats object and stderr.
fn stop(mut b: Broker, signal: &str) -> (Value, String) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &b.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    b.out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    b.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = b.child.wait().unwrap();
    assert!(status.success(), "broker: {status}; stderr: {err}");
    let stats = serde_json::from_str(rest.lines().last().unwrap_or("")).unwrap();
    (stats, err)
}

fn load(addr: &str, args: &[&str]) -> (std::process::Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_load"))
        .args(["--addr", addr, "--json", "--size", "64", "--duration", "0.3"])
        .args(args)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, json)
}

fn exactly_once(pools: &[&str], threads: u64) {
    let b = broker(&[pools, &["--queues", "3"]].concat());
    let (out, r) =
        load(&b.addr, &["--senders", "6", "--receivers", "5", "--queues", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(r["lost"], 0);
    assert_eq!(r["duplicated"], 0);
    assert_eq!(r["corrupt"], 0);
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent > 0);
    assert_eq!(r["received"], sent);
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats["messages_in"], sent);
    assert_eq!(stats["messages_out"], sent);
    assert_eq!(stats["connections"], 11);
    assert_eq!(stats["closed_bad"], 0, "{err}");
    assert_eq!(stats["threads_joined"], threads);
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
    // One good message, half a frame, then a reset.
    let mut d = send();
    publish(&mut d, 4, 0, 1);
    d.write_all(&[0, 0, 0, 50, 3]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
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

    let mut want0: Vec<(u32, u64)> = (0..5).map(|s| (1, s)).collect();
    want0.extend((0..2).map(|s| (3, s)));
    want0.push((4, 0));
    want0.extend((0..4).map(|s| (8, s)));
    assert_eq!(take(&mut r0, 0, want0.len()), want0);
    assert_eq!(take(&mut r1, 1, 3), vec![(2, 0), (2, 1), (2, 2)]);
    // The bad connections were closed by the broker: reads see the end.
    for mut s in [a, c, e, f, z] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8];
        assert!(matches!(s.read(&mut byte), Ok(0) | Err(_)));
    }
    let (stats, err) = stop(b, "TERM");
    assert_eq!(stats["messages_in"], 15, "{err}");
    assert_eq!(stats["messages_out"], 15);
    assert_eq!(stats["closed_bad"], 7, "{err}");
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
    let b = broker(mode);
    // A receiver, a sender in the middle of a frame, a silent connection.
    let _r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    publish(&mut s, 1, 0, 3);
    s.write_all(&[0, 0, 0, 40, 3]).unwrap();
    let _quiet = connect(&b.addr, None);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(tasks(b.child.id()), threads + 1, "worker threads + main");
    let t = Instant::now();
    let (stats, _) = stop(b, signal);
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(stats["threads_joined"], threads);
    assert_eq!(stats["messages_in"], 3);
    assert_eq!(stats["messages_out"], 3);
}

#[test]
fn sigterm_joins_every_pool_thread() {
    shutdown_joins_everything(&["-r", "3", "-w", "2", "-d", "4"], 10, "TERM");
}

#[test]
fn sigint_stops_the_event_loop() {
    shutdown_joins_everything(&["--event-loop"], 0, "INT");
}

fn back_pressure(mode: &[&str]) {
    let b = broker(&[mode, &["--capacity", "4", "--outbox", "2"]].concat());
    let pid = b.child.id();
    let mut r = connect(&b.addr, Some(protocol::hello(HELLO_RECV, 0)));
    let mut s = connect(&b.addr, Some(protocol::hello(HELLO_SEND, 0)));
    // 64 MiB of messages, far more than the socket buffers and the queues.
    const N: u64 = 4096;
    let sender = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for seq in 0..N {
            buf.clear();
            Stamp { sender: 1, seq, sent_ns: 0 }.publish(0, 16 << 10, &mut buf);
            s.write_all(&buf).unwrap();
        }
        s.shutdown(Shutdown::Write).unwrap();
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sender.is_finished(), "the sender should be held back");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
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
    let (stats, _) = stop(b, "TERM");
    assert_eq!(stats["messages_out"], N);
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

#[test]
fn no_broker_is_a_failure_not_a_panic() {
    // Bind and drop a listener: nothing listens on that port afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
    let load = Command::new(env!("CARGO_BIN_EXE_load"))
        .args(["--addr", &b.addr, "--senders", "4", "--receivers", "4"])
        .args(["--size", "64", "--duration", "3", "--drain", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
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
    assert_eq!(r["rate"], 1000.0);
    let sent = r["sent"].as_u64().unwrap();
    // 0.3 s at 1000/s: each sender sends only when a message is due.
    assert!(sent > 0 && sent <= 300 + 4, "sent {sent}");
    assert_eq!(r["received"], sent);
    stop(b, "TERM");
}

#[test]
fn a_thread_that_cannot_start_is_reported_and_the_rest_joined() {
    // RLIMIT_NPROC counts threads, but not for root: run as nobody.
    let root = std::process::Command::new("id").arg("-u").output().unwrap();
    let has_setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if String::from_utf8_lossy(&root.stdout).trim() != "0" || !has_setpriv {
        eprintln!("skipped: needs root and setpriv to run the broker as nobody");
        return;
    }
    // nobody must be able to reach the binary: copy it to an open directory.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap();
    let exe = dir.path().join("broker");
    std::fs::copy(env!("CARGO_BIN_EXE_broker"), &exe).unwrap();
    let out = Command::new("prlimit")
        .args(["--nproc=30", "setpriv", "--reuid=65534", "--regid=65534"])
        .arg("--clear-groups")
        .arg(&exe)
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
