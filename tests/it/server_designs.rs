//! The `servers` crate's `server` and `client`, and `lab run
//! server-designs`, at a tiny scale: every design serves exact replies,
//! survives hostile clients and stops leaving nothing behind; the client
//! counts short and wrong replies; bad flags exit 2.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::Duration;

use servers::Stats;
use servers::client::Report;

/// The designs `server --design` takes: the runner's list, less its own
/// `epoll-herd` (epoll-exclusive with --herd).
fn designs() -> impl Iterator<Item = &'static str> {
    lab::experiments::server_designs::DESIGNS
        .iter()
        .copied()
        .filter(|&d| d != "epoll-herd")
}

/// A running `server`, killed and reaped if a test fails half-way.
struct Server {
    child: Child,
    addr: String,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Start `server --design D ARGS --json`; `None` (with the reason printed
/// as a skip) when the kernel refuses io_uring here.
fn start(design: &str, args: &[&str]) -> Option<Server> {
    let mut cmd = Command::new(common::bin_dir().join("server"));
    cmd.args(["--design", design, "--json"]).args(args);
    let (mut child, stdout, addr) = labtest::start_server(&mut cmd);
    if addr.is_empty() {
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert!(
            design == "io-uring" && err.contains("io-uring"),
            "{design} did not start: {status} {err}"
        );
        labtest::skipped(&format!("{design}: {}", err.trim()));
        return None;
    }
    Some(Server { child, addr, stdout })
}

impl Server {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM, then the stats it printed; checks it exited 0.
    fn stop(self) -> Stats {
        self.stop_by(nix::sys::signal::Signal::SIGTERM)
    }

    /// Send `signal`, then the stats it printed; checks it exited 0.
    fn stop_by(mut self, signal: nix::sys::signal::Signal) -> Stats {
        let pid = nix::unistd::Pid::from_raw(self.pid());
        nix::sys::signal::kill(pid, signal).unwrap();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{signal}: {status}");
        labtest::json(rest.lines().last().unwrap_or("").as_bytes())
    }
}

/// `client` against `addr`: its JSON report and exit code.
fn client(
    addr: &str,
    children: u32,
    loops: u32,
    bytes: u32,
) -> (Report, Option<i32>) {
    let out = common::program("client")
        .args(["--addr", addr, "--json", "--timeout", "10"])
        .args(["--children", &children.to_string(), "--loops", &loops.to_string()])
        .args(["--bytes", &bytes.to_string()])
        .output()
        .unwrap();
    assert!(
        !out.stdout.is_empty(),
        "client printed nothing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (labtest::json(&out.stdout), out.status.code())
}

fn threads_of(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

#[test]
fn every_design_serves_exact_replies_and_stops_leaving_nothing() {
    for design in designs() {
        let Some(server) = start(design, &["--pool", "3"]) else { continue };
        let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
        assert!(listening(port), "{design}: /proc/net/tcp shows no listener");
        let (report, code) = client(&server.addr, 3, 20, 4000);
        assert_eq!(code, Some(0), "{design}: {report:?}");
        assert_eq!(report.connections_ok, 60, "{design}");
        assert_eq!(report.error_total, 0, "{design}");
        // The workers exist while it runs: 3 children or 3+ threads.
        let kids: Vec<i32> = labkit::children::of(server.pid())
            .unwrap()
            .iter()
            .map(|c| c.pid)
            .collect();
        let threads = threads_of(server.pid());
        match design {
            "prefork" | "prefork-select" | "prefork-fcntl" | "prefork-mutex"
            | "prefork-pass" => assert_eq!(kids.len(), 3, "{design}"),
            "prethread-mutex" | "prethread-nolock" | "epoll-exclusive"
            | "reuseport" => {
                assert_eq!(threads, 4, "{design}")
            }
            "prethread-handoff" => assert_eq!(threads, 5, "{design}"), // + acceptor
            _ => {}
        }
        let addr = server.addr.clone();
        let stats = server.stop();
        assert_eq!(stats.design, design);
        assert_eq!(stats.requests, 60, "{design}: {stats:?}");
        assert_eq!(stats.bytes, 60 * 4000, "{design}");
        assert_eq!(stats.bad_connections, 0, "{design}");
        assert_eq!(stats.children_left, 0, "{design}");
        assert_eq!(stats.threads_left, 0, "{design}");
        if design.starts_with("prefork") {
            let per: u64 = stats.per_member.iter().sum();
            assert_eq!(per, 60, "{design}: the meter counts every connection");
        }
        // Nothing left: every child is gone and nobody holds the listener.
        for pid in kids {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "{design}: child {pid} outlived the server"
            );
        }
        let refused = TcpStream::connect(&addr).unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{design}"
        );
    }
}

/// Is any socket listening on `port`, by `/proc/net/tcp` (state 0A)?
fn listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X} ");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && format!("{} ", f[1]).ends_with(&local) && f[3] == "0A"
    })
}

/// Read until EOF or error; how many bytes came.
fn drain(s: &mut TcpStream) -> usize {
    let mut buf = [0u8; 65536];
    let mut n = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn hostile_clients_take_no_design_down() {
    for design in designs() {
        let args = ["--pool", "2", "--timeout", "0.3", "--max-bytes", "64M"];
        let Some(server) = start(design, &args) else { continue };
        let addr = server.addr.clone();
        // Two clients that never send: they hold an iterative server, or
        // both pool members, until --timeout cuts them off.
        let silent: Vec<TcpStream> = (0..2).map(|_| connect(&addr)).collect();
        // A garbage line and an absurd count: closed without a reply.
        for line in [&b"hello\n"[..], b"99999999999\n", b"0\n"] {
            let mut s = connect(&addr);
            s.write_all(line).unwrap();
            assert_eq!(drain(&mut s), 0, "{design}: {line:?} got a reply");
        }
        // Half a request, then the client closes its side.
        let mut half = connect(&addr);
        half.write_all(b"40").unwrap();
        half.shutdown(Shutdown::Write).unwrap();
        assert_eq!(drain(&mut half), 0, "{design}");
        // A client that leaves mid-reply: asks for 60 MB (more than socket
        // buffers hold), reads a little, closes with the rest unread (a
        // reset for the server's writes).
        let mut gone = connect(&addr);
        gone.write_all(b"60000000\n").unwrap();
        let mut some = [0u8; 100];
        gone.read_exact(&mut some).unwrap();
        drop(gone);
        // Two requests on one connection, then the usual load: all exact.
        let mut two = connect(&addr);
        two.write_all(b"10\n20\n").unwrap();
        two.shutdown(Shutdown::Write).unwrap();
        assert_eq!(drain(&mut two), 30, "{design}");
        let (report, code) = client(&addr, 2, 10, 1000);
        assert_eq!(code, Some(0), "{design}: {report:?}");
        // The silent ones were (or now are) cut off by the server.
        for mut s in silent {
            assert_eq!(drain(&mut s), 0, "{design}");
        }
        let stats = server.stop();
        // 2 silent + 3 bad lines + half + gone, each closed early.
        assert_eq!(stats.bad_connections, 7, "{design}: {stats:?}");
        assert_eq!(stats.requests, 2 + 20, "{design}: {stats:?}");
        assert_eq!(stats.children_left, 0, "{design}");
        assert_eq!(stats.threads_left, 0, "{design}");
    }
}

#[test]
fn a_byte_at_a_time_server_gives_the_same_replies() {
    for design in ["iterative", "prethread-mutex", "epoll", "tokio", "io-uring"] {
        let Some(server) = start(design, &["--byte-reads", "--pool", "2"]) else {
            continue;
        };
        let (report, code) = client(&server.addr, 2, 10, 4000);
        assert_eq!(code, Some(0), "{design}: {report:?}");
        let stats = server.stop();
        assert!(stats.byte_reads);
        assert_eq!(stats.requests, 20, "{design}");
    }
}

/// The first `n` bytes of what a real server sends.
fn pattern(n: usize) -> Vec<u8> {
    let alphabet =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..n).map(|i| alphabet[i % 64]).collect()
}

/// A one-connection-at-a-time fake server answering `reply(count)`.
fn fake_server(reply: fn(usize) -> Vec<u8>, connections: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for _ in 0..connections {
            let (s, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            let count: usize = line.trim().parse().unwrap();
            let _ = (&s).write_all(&reply(count));
        }
    });
    addr
}

#[test]
fn the_client_counts_short_and_wrong_replies_as_errors() {
    let short = fake_server(|n| pattern(n / 2), 3);
    let (report, code) = client(&short, 1, 3, 4000);
    assert_eq!(code, Some(1), "{report:?}");
    assert_eq!(report.errors.short, 3, "{report:?}");
    assert_eq!(report.connections_ok, 0);
    let wrong = fake_server(|n| vec![b'x'; n], 2);
    let (report, code) = client(&wrong, 1, 2, 4000);
    assert_eq!(code, Some(1), "{report:?}");
    assert_eq!(report.errors.wrong, 2, "{report:?}");
    let exact = fake_server(pattern, 2);
    let (report, code) = client(&exact, 1, 2, 4000);
    assert_eq!(code, Some(0), "{report:?}");
    assert_eq!(report.connections_ok, 2);
}

#[test]
fn bad_flags_exit_2() {
    use labtest::{usage_error, usage_errors};
    let server = common::bin_dir().join("server");
    usage_errors(
        &server,
        &[
            &[],
            &["--design", "forking"],
            &["--design", "prefork", "--pool", "0"],
            &["--design", "iterative", "--timeout", "0"],
            &["--design", "iterative", "--listen", "nowhere"],
        ],
    );
    let mut herd = std::process::Command::new(&server);
    let err = usage_error("server", herd.args(["--design", "epoll", "--herd"]));
    assert!(
        err.contains("--herd only applies to --design epoll-exclusive"),
        "{err}"
    );
    usage_errors(
        common::bin_dir().join("client"),
        &[
            &[],
            &["--addr", "127.0.0.1:9", "--children", "0"],
            &["--addr", "127.0.0.1:9", "--bytes", "0"],
            &["--addr", "127.0.0.1:9", "--rate", "-1"],
            &["--addr", "localhost"],
        ],
    );
    common::bad_flags_exit_2(
        "server-designs",
        &[&["--designs", "forking"], &["--children", "0"], &["--loops", "0"]],
    );
}

#[test]
fn tiny_run_writes_the_table_and_the_verdict() {
    let dir = labtest::tempdir();
    let args = [
        "--designs",
        "fork,prefork,prefork-mutex,thread,prethread-mutex,epoll",
        "--children",
        "2",
        "--loops",
        "10",
        "--rounds",
        "2",
    ];
    let doc = common::run_json("server-designs", &args, dir.path());
    assert_eq!(doc["experiment"], "server-designs");
    assert_eq!(doc["connections_per_run"], 20);
    let designs =
        ["fork", "prefork", "prefork-mutex", "thread", "prethread-mutex", "epoll"];
    assert_eq!(doc["designs"], serde_json::json!(designs));
    // One series per design, the baseline first, under the closed loop;
    // two rounds, even already, so balanced as asked.
    assert_eq!(doc["rounds"], 2);
    let series = doc["series"].as_array().unwrap();
    let names = common::strings(&doc["series"], "condition");
    assert_eq!(names[0], "iterative");
    assert_eq!(names[1..], designs);
    for s in series {
        assert_eq!(s["load"], "closed", "{s}");
        assert_eq!(s["connections_per_s"]["n"], 2, "{s}");
        assert!(s["connections_per_s"]["median"].as_f64().unwrap() > 0.0);
    }
    // Every run is an observation, a warm-up of each design included, and
    // every one served every connection.
    let obs = doc["observations"].as_array().unwrap();
    assert_eq!(obs.len(), 7 + 7 * 2);
    assert_eq!(obs.iter().filter(|o| o["round"].is_null()).count(), 7);
    for o in obs {
        assert_eq!(o["metrics"]["connections_ok"], 20.0, "{o}");
        assert_eq!(o["metrics"]["requests"], 20.0, "{o}");
    }
    // Each design's CPU above the same round's baseline, and the verdict.
    let above = doc["above_baseline"].as_array().unwrap();
    assert_eq!(common::strings(&doc["above_baseline"], "condition"), designs);
    let fork = &above[0];
    assert!(fork["cpu_us_per_connection"]["median"].as_f64().unwrap().is_finite());
    let v = &doc["verdict"];
    // Switch counts and CPU ratios are the kernel's and the scheduler's:
    // only their place in the JSON (which the book quotes) is checked.
    assert!(series[1]["switches_per_connection"]["median"].is_f64());
    assert!(
        ["prefork", "prefork-mutex"]
            .contains(&v["best_prefork"]["design"].as_str().unwrap())
    );
    assert_eq!(v["best_prethread"]["design"], "prethread-mutex");
    assert_eq!(v["stevens_factor"], 10.0);
    for key in [
        "fork_over_best_prefork",
        "thread_over_best_prethread",
        "fork_over_best_prefork_total_cpu",
    ] {
        assert!(v.get(key).is_some(), "{key} missing");
    }
    for file in [
        "server-designs.json",
        "tables.md",
        "cpu-per-connection.svg",
        "connections-per-s.svg",
    ] {
        assert!(dir.path().join(file).is_file(), "{file} missing");
    }
    let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert!(tables.contains("iterative (baseline)"), "{tables}");
    assert!(tables.contains("504.2"), "{tables}");
}

#[test]
fn sigint_and_sighup_stop_it_cleanly_too() {
    use nix::sys::signal::Signal;
    for (design, signal) in [
        ("prefork", Signal::SIGINT),
        ("fork", Signal::SIGHUP),
        ("prethread-nolock", Signal::SIGINT),
        ("epoll-exclusive", Signal::SIGHUP),
    ] {
        let Some(server) = start(design, &["--pool", "2"]) else { continue };
        let (report, code) = client(&server.addr, 2, 5, 100);
        assert_eq!(code, Some(0), "{design}: {report:?}");
        let stats = server.stop_by(signal);
        assert_eq!(stats.requests, 10, "{design}");
        assert_eq!(stats.children_left, 0, "{design}");
        assert_eq!(stats.threads_left, 0, "{design}");
    }
}
