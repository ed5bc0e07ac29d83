//! What the broker's and the load generator's tests share: a broker as a
//! whole process, its stats, a load run, and protocol-level clients.
#![allow(dead_code)]

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command};
use std::time::Duration;

use mq::Stats;
use mq::load::LoadReport;
use mq::protocol::{self, HELLO_SEND, LEN, Stamp};

/// One test per broker design for each `name: check(pool flags);`:
/// `name::with_thread_pools` runs `check(&pool flags)`,
/// `name::with_the_event_loop` runs `check(&["--event-loop"])`.
macro_rules! with_both_designs {
    ($($name:ident: $check:ident($pools:expr);)+) => {$(
        mod $name {
            #[test]
            fn with_thread_pools() {
                super::$check(&$pools);
            }

            #[test]
            fn with_the_event_loop() {
                super::$check(&["--event-loop"]);
            }
        }
    )+};
}
pub(crate) use with_both_designs;

pub struct Broker {
    pub child: Child,
    pub out: BufReader<ChildStdout>,
    pub addr: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn broker(args: &[&str]) -> Broker {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_broker"));
    let (child, out, addr) = labtest::start_server(cmd.args(args).arg("--json"));
    assert!(addr.starts_with("127.0.0.1:"), "first line: {addr:?}");
    Broker { child, out, addr }
}

/// Send `signal`, wait for the exit, return the stats (the broker's own
/// type, from its `--json` line) and stderr.
pub fn stop(mut b: Broker, signal: &str) -> (Stats, String) {
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
    let stats = labtest::json(rest.lines().last().unwrap_or("").as_bytes());
    (stats, err)
}

/// Run `load` against `addr`; its report (the program's own type) when
/// it printed one.
pub fn load(
    addr: &str,
    args: &[&str],
) -> (std::process::Output, Option<LoadReport>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_load"));
    cmd.args(["--addr", addr, "--json", "--size", "64"]);
    if !args.contains(&"--duration") {
        cmd.args(["--duration", "0.3"]);
    }
    let out = cmd.args(args).output().unwrap();
    let report = (!out.stdout.is_empty()).then(|| labtest::json(&out.stdout));
    (out, report)
}

pub fn connect(addr: &str, hello: Option<Vec<u8>>) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    if let Some(h) = hello {
        s.write_all(&h).unwrap();
    }
    s
}

pub fn publish(s: &mut TcpStream, sender: u32, queue: u16, n: u64) {
    let mut buf = Vec::new();
    for seq in 0..n {
        Stamp { sender, seq, sent_ns: 0 }.publish(queue, 32, &mut buf);
    }
    s.write_all(&buf).unwrap();
}

/// Read `n` messages of `queue` and return their (sender, seq) pairs.
pub fn take(s: &mut TcpStream, queue: u16, n: usize) -> Vec<(u32, u64)> {
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
pub fn reset(s: TcpStream) {
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

pub fn tasks(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`, `VmSize`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The state letter of thread `tid` of this process (`R`, `S`, ...).
pub fn thread_state(tid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"));
    // The state follows the command name, which is in parentheses.
    stat.ok()
        .and_then(|s| s.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()))
        .unwrap_or('?')
}

pub fn exit_code(program: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(program).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap(), err)
}

/// A TCP socket bound to a free port of 127.0.0.1 that never listens.
pub fn bound_not_listening() -> (std::os::fd::OwnedFd, u16) {
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

/// How many sockets process `pid` holds open: its listener and every
/// connection it has not yet closed.
pub fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

/// Wait until process `pid` holds at most `n` sockets: it has closed the
/// connections it was to close (an event, not a time); 10 s at most, which
/// only bounds a broken broker.
pub fn sockets_fall_to(pid: u32, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let open = open_sockets(pid);
        if open <= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the broker still holds {open} sockets after 10 s, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wait until the broker has closed `s`, a sender's connection, which it
/// never writes to (end of stream or reset); 10 s at most, which only
/// bounds a broken broker.
pub fn closed_by_broker(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        match s.read(&mut [0u8]) {
            Ok(0) => return,
            Ok(_) => panic!("the broker wrote to a sender"),
            // A stop and continue (^Z, a freezer) interrupts a read that has
            // a timeout: that is not the broker closing it.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut
                ) =>
            {
                panic!("the broker left the connection open for 10 s")
            }
            Err(_) => return,
        }
    }
}

/// A new connection says hello as a sender and publishes one message
/// stamped `sender` for `queue`; true if the broker serves it, false if it
/// refuses it. Decided by what the broker does, not by how long nothing
/// happened: a served connection stays open and its message reaches `r`, a
/// receiver of `queue` with nothing else to come; a refused one is closed
/// and its message goes nowhere.
pub fn served(addr: &str, r: &mut TcpStream, queue: u16, sender: u32) -> bool {
    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, poll};
    use std::os::fd::AsFd;
    let mut s = TcpStream::connect(addr).unwrap();
    let mut buf = protocol::hello(HELLO_SEND, 0);
    Stamp { sender, seq: 0, sent_ns: 0 }.publish(queue, 32, &mut buf);
    // A refused connection may be closed before this is written.
    if s.write_all(&buf).is_err() {
        return false;
    }
    let delivered = loop {
        let mut fds = [
            PollFd::new(s.as_fd(), PollFlags::POLLIN),
            PollFd::new(r.as_fd(), PollFlags::POLLIN),
        ];
        // The bound is for a broken broker, not a synchronisation.
        match poll(&mut fds, 10_000u16) {
            Ok(0) => panic!("sender {sender}: neither closed nor delivered in 10 s"),
            Ok(_) => break fds[1].any() != Some(false),
            Err(Errno::EINTR) => {}
            Err(e) => panic!("poll: {e}"),
        }
    };
    // The broker never writes to a sender: a read that does not block
    // sees the end of the stream or a reset.
    s.set_nonblocking(true).unwrap();
    let open = match s.read(&mut [0u8]) {
        Ok(0) => false,
        Ok(_) => panic!("sender {sender}: the broker wrote to a sender"),
        Err(e) => e.kind() == ErrorKind::WouldBlock,
    };
    if delivered {
        // Only this sender's message, not one a refused connection sent.
        assert_eq!(
            take(r, queue, 1),
            vec![(sender, 0)],
            "a refused sender's message"
        );
        assert!(open, "sender {sender}: its message delivered, and then refused");
    } else {
        assert!(!open, "sender {sender}: poll saw it closed, read did not");
    }
    delivered
}
