//! `servers`: the small server of Stevens, *UNIX Network Programming*
//! vol. 1, 3rd ed., chapter 30, written one way per design, and the client
//! that loads it (the `server/` directory of the book's source tree,
//! unpv13e). Article 000 leans on that chapter's table to claim that
//! process and thread creation is so cheap that pools bring no real
//! advantage; this crate re-runs the table.
//!
//! - [`protocol`]: `web_child.c`, shared by every design: read a line
//!   holding a byte count, write that many bytes, repeat until EOF.
//! - One module per design, named for what it does: [`iterative`]
//!   (serv00), [`fork_per_client`] (serv01), [`prefork`] (serv02, and
//!   serv02l with `prefork-select`), [`prefork_lock`] (serv03 with a file
//!   lock, serv04 with a process-shared mutex), [`prefork_pass`] (serv05),
//!   [`thread_per_client`] (serv06), [`prethread`] (serv07 with a mutex,
//!   serv09 with no lock), [`prethread_handoff`] (serv08); and today's:
//!   [`event_loop`] (`epoll`, `epoll-exclusive`, `reuseport`),
//!   [`tokio_runtime`] and [`uring`].
//! - [`client`]: `client.c`, closed-loop like the book's, or open-loop at a
//!   fixed rate with latency measured from the intended start.
//!
//! On SIGINT, SIGTERM or SIGHUP the server stops accepting, ends its
//! workers (children are sent SIGTERM and reaped, threads are joined), and
//! prints what `pr_cpu_time.c` printed (user and sys CPU of itself and its
//! reaped children) with the pool's meter (connections per member) and,
//! where they can be counted, the wake-ups per accepted connection. Then it
//! exits 0: a signal is how it is meant to stop.

pub mod client;
pub mod event_loop;
pub mod fork_per_client;
pub mod iterative;
pub mod meter;
pub mod prefork;
pub mod prefork_lock;
pub mod prefork_pass;
pub mod prethread;
pub mod prethread_handoff;
pub mod protocol;
pub mod thread_per_client;
#[cfg(feature = "run")]
pub mod tokio_runtime;
#[cfg(feature = "run")]
pub mod uring;

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use labkit::cli::seconds_in;
use labkit::error::{Error, Result, describe_errno};
use nix::sys::signal::{SigSet, Signal};
use serde::{Deserialize, Serialize};

pub use meter::Meters;
pub use protocol::Proto;

/// The designs, in Stevens' row order, then today's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Design {
    /// serv00: one connection at a time (the baseline)
    Iterative,
    /// serv01: fork a child per connection
    Fork,
    /// serv02: prefork, every child blocks in accept, no lock
    Prefork,
    /// serv02l: prefork, every child blocks in select, then accepts
    PreforkSelect,
    /// serv03: prefork, a file lock (fcntl) around accept
    PreforkFcntl,
    /// serv04: prefork, a process-shared pthread mutex around accept
    PreforkMutex,
    /// serv05: prefork, the parent accepts and passes the descriptor
    PreforkPass,
    /// serv06: a thread per connection
    Thread,
    /// serv07: prethreaded, a mutex around accept
    PrethreadMutex,
    /// serv08: prethreaded, the main thread accepts into a ring
    PrethreadHandoff,
    /// serv09: prethreaded, every thread blocks in accept, no lock
    PrethreadNolock,
    /// one thread, non-blocking sockets on epoll
    Epoll,
    /// N threads, each with its own epoll on the shared listener, which is
    /// registered with EPOLLEXCLUSIVE (with --herd: without it)
    EpollExclusive,
    /// N threads, each with its own SO_REUSEPORT listener and epoll
    Reuseport,
    /// a task per connection on tokio's multi-threaded runtime
    Tokio,
    /// one thread, every accept, read and write an io_uring request
    IoUring,
}

impl Design {
    /// Every design, in the table's order.
    pub const ALL: [Design; 16] = [
        Design::Iterative,
        Design::Fork,
        Design::Prefork,
        Design::PreforkSelect,
        Design::PreforkFcntl,
        Design::PreforkMutex,
        Design::PreforkPass,
        Design::Thread,
        Design::PrethreadMutex,
        Design::PrethreadHandoff,
        Design::PrethreadNolock,
        Design::Epoll,
        Design::EpollExclusive,
        Design::Reuseport,
        Design::Tokio,
        Design::IoUring,
    ];

    /// The `--design` name.
    pub fn name(self) -> &'static str {
        match self {
            Design::Iterative => "iterative",
            Design::Fork => "fork",
            Design::Prefork => "prefork",
            Design::PreforkSelect => "prefork-select",
            Design::PreforkFcntl => "prefork-fcntl",
            Design::PreforkMutex => "prefork-mutex",
            Design::PreforkPass => "prefork-pass",
            Design::Thread => "thread",
            Design::PrethreadMutex => "prethread-mutex",
            Design::PrethreadHandoff => "prethread-handoff",
            Design::PrethreadNolock => "prethread-nolock",
            Design::Epoll => "epoll",
            Design::EpollExclusive => "epoll-exclusive",
            Design::Reuseport => "reuseport",
            Design::Tokio => "tokio",
            Design::IoUring => "io-uring",
        }
    }

    /// The server in unpv13e's `server/` directory this design reproduces.
    pub fn stevens(self) -> Option<&'static str> {
        Some(match self {
            Design::Iterative => "serv00",
            Design::Fork => "serv01",
            Design::Prefork => "serv02",
            Design::PreforkSelect => "serv02l",
            Design::PreforkFcntl => "serv03",
            Design::PreforkMutex => "serv04",
            Design::PreforkPass => "serv05",
            Design::Thread => "serv06",
            Design::PrethreadMutex => "serv07",
            Design::PrethreadHandoff => "serv08",
            Design::PrethreadNolock => "serv09",
            _ => return None,
        })
    }

    /// Does the design keep a pool of `--pool` members?
    pub fn pooled(self) -> bool {
        !matches!(
            self,
            Design::Iterative
                | Design::Fork
                | Design::Thread
                | Design::Epoll
                | Design::IoUring
        )
    }
}

/// One of Stevens' chapter 30 server designs, or one of today's. Prints the
/// bound address first, serves the byte-count protocol until SIGINT,
/// SIGTERM or SIGHUP, then prints the CPU time of itself and its reaped
/// children and the connections per pool member, and exits 0.
/// Exit status: 0 ok, 1 failed, 2 bad usage.
#[derive(Clone, Debug, PartialEq, clap::Parser)]
#[command(version)]
pub struct Options {
    /// The server design
    #[arg(long, value_enum)]
    pub design: Design,

    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Pool members (processes, threads, event loops or runtime workers)
    /// for the designs that have a pool; the book's 15
    #[arg(long, default_value_t = 15,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pool: u32,

    /// Read requests one byte per read(2), as Stevens' threaded servers
    /// did, instead of buffered
    #[arg(long)]
    pub byte_reads: bool,

    /// Largest byte count a client may ask for, e.g. 16384 or 64M (the
    /// original's MAXN is 16384)
    #[arg(long, value_name = "BYTES", default_value = "16384",
          value_parser = labkit::limits::size_in(1, 1 << 30))]
    pub max_bytes: u64,

    /// Seconds to wait for a request, or for room to write a reply, before
    /// closing the connection (so a client that never sends cannot hold a
    /// worker forever)
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0,
          value_parser = seconds_in(0.001, 3600.0))]
    pub timeout: f64,

    /// epoll-exclusive without EPOLLEXCLUSIVE: every loop wakes for every
    /// connection
    #[arg(long)]
    pub herd: bool,

    /// Print the final stats as one JSON object
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// `design` with every other flag at its default.
    pub fn new(design: Design) -> Self {
        use clap::Parser;
        Self::try_parse_from(["server", "--design", design.name()])
            .expect("a design alone parses")
    }

    /// The words `server` takes for these options, in the order the runner
    /// has always given them: `--design` and `--pool` always, the rest only
    /// when set (`--herd`, `--json`, `--byte-reads`) or not at their default
    /// (`--listen`, `--max-bytes`, `--timeout`). Parsed back, they give
    /// these options.
    pub fn args(&self) -> Vec<OsString> {
        let default = Self::new(self.design);
        let mut args: Vec<OsString> = Vec::new();
        let mut say = |flag: &str, value: Option<String>| {
            args.push(flag.into());
            args.extend(value.map(OsString::from));
        };
        say("--design", Some(self.design.name().into()));
        if self.herd {
            say("--herd", None);
        }
        if self.json {
            say("--json", None);
        }
        say("--pool", Some(self.pool.to_string()));
        if self.byte_reads {
            say("--byte-reads", None);
        }
        if self.listen != default.listen {
            say("--listen", Some(self.listen.to_string()));
        }
        if self.max_bytes != default.max_bytes {
            say("--max-bytes", Some(self.max_bytes.to_string()));
        }
        if self.timeout != default.timeout {
            say("--timeout", Some(self.timeout.to_string()));
        }
        args
    }

    /// How to run the server; `--herd` with a design other than
    /// epoll-exclusive is a usage error.
    pub fn config(&self) -> Result<Config> {
        if self.herd && self.design != Design::EpollExclusive {
            return Err(Error::usage(
                "--herd only applies to --design epoll-exclusive",
            ));
        }
        Ok(Config {
            design: self.design,
            listen: self.listen,
            pool: self.pool as usize,
            proto: Proto {
                max_bytes: self.max_bytes as usize,
                byte_reads: self.byte_reads,
                timeout: Duration::from_secs_f64(self.timeout),
            },
            herd: self.herd,
        })
    }
}

/// How to run the server (the `server` flags).
#[derive(Clone, Debug)]
pub struct Config {
    pub design: Design,
    pub listen: SocketAddr,
    /// Pool members (processes, threads, event loops, runtime workers).
    pub pool: usize,
    pub proto: Proto,
    /// epoll-exclusive without EPOLLEXCLUSIVE: every loop wakes.
    pub herd: bool,
}

/// What the server prints when it stops.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    pub design: String,
    /// Pool members started (0 for designs without a pool).
    pub pool: usize,
    pub byte_reads: bool,
    pub herd: bool,
    /// Connections accepted.
    pub connections: u64,
    /// Requests answered in full.
    pub requests: u64,
    /// Reply bytes written.
    pub bytes: u64,
    /// Connections the server closed early (bad request, timeout, client
    /// gone mid-reply).
    pub bad_connections: u64,
    /// User CPU of the server and its reaped children, seconds.
    pub user_s: f64,
    /// System CPU of the server and its reaped children, seconds.
    pub sys_s: f64,
    pub children_user_s: f64,
    pub children_sys_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Stevens' meter: connections handled by each pool member.
    pub per_member: Vec<u64>,
    /// Times a worker woke to take a connection, where that can be counted
    /// (select or epoll returns for the listener); `None` where it cannot.
    pub wakeups: Option<u64>,
    pub wakeups_per_connection: Option<f64>,
    /// Children of the server still alive or unreaped after the stop
    /// (must be 0).
    pub children_left: usize,
    /// Threads of the server besides the main one after the stop
    /// (must be 0).
    pub threads_left: usize,
}

impl Stats {
    /// The human form, `pr_cpu_time.c`'s line and the meter.
    pub fn text(&self) -> String {
        let mut s = format!(
            "design {}: user time = {:.3}, sys time = {:.3} \
             (children {:.3} + {:.3})\n\
             connections {}, requests {}, bytes {}, closed early {}\n",
            self.design,
            self.user_s,
            self.sys_s,
            self.children_user_s,
            self.children_sys_s,
            self.connections,
            self.requests,
            self.bytes,
            self.bad_connections
        );
        if !self.per_member.is_empty() {
            let counts: Vec<String> =
                self.per_member.iter().map(u64::to_string).collect();
            s += &format!("per member: {}\n", counts.join(" "));
        }
        if let (Some(w), Some(per)) = (self.wakeups, self.wakeups_per_connection) {
            s += &format!("wake-ups {w}, {per:.2} per connection\n");
        }
        s += &format!(
            "left behind: {} children, {} threads\n",
            self.children_left, self.threads_left
        );
        s
    }
}

/// What a design reports back to [`run`] when it has stopped.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Members started; their counts are the first `members` meters.
    pub members: usize,
    /// Whether wake-ups were counted.
    pub counts_wakeups: bool,
}

/// The signals that stop the server. They are blocked in every thread
/// (the designs wait for them with `sigwait` or a signalfd); forked
/// children unblock them again.
pub fn stop_signals() -> SigSet {
    let mut s = SigSet::empty();
    s.add(Signal::SIGINT);
    s.add(Signal::SIGTERM);
    s.add(Signal::SIGHUP);
    s
}

/// Run the server until a stop signal: bind, print the bound address as
/// the first line on stdout, serve, stop, and return the final stats.
pub fn run(cfg: &Config) -> Result<Stats> {
    // Block before any thread or child exists so all inherit the mask.
    let mut mask = stop_signals();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()
        .map_err(|e| Error::failed(format!("sigprocmask: {}", describe_errno(e))))?;
    // io_uring may be refused by the kernel or a sandbox: find out before
    // printing an address.
    #[cfg(feature = "run")]
    let ring =
        if cfg.design == Design::IoUring { Some(uring::Ring::new()?) } else { None };
    let listener = listen(cfg.listen, cfg.design == Design::Reuseport)?;
    let addr = listener.local_addr().map_err(|e| Error::io("getsockname", e))?;
    labkit::cli::announce(&addr)?;
    let meters = Meters::new(cfg.pool.max(1))?;
    let outcome = match cfg.design {
        Design::Iterative => iterative::run(cfg, listener, meters),
        Design::Fork => fork_per_client::run(cfg, listener, meters),
        Design::Prefork | Design::PreforkSelect => {
            prefork::run(cfg, listener, meters)
        }
        Design::PreforkFcntl | Design::PreforkMutex => {
            prefork_lock::run(cfg, listener, meters)
        }
        Design::PreforkPass => prefork_pass::run(cfg, listener, meters),
        Design::Thread => thread_per_client::run(cfg, listener, meters),
        Design::PrethreadMutex | Design::PrethreadNolock => {
            prethread::run(cfg, listener, meters)
        }
        Design::PrethreadHandoff => prethread_handoff::run(cfg, listener, meters),
        Design::Epoll | Design::EpollExclusive | Design::Reuseport => {
            event_loop::run(cfg, listener, meters)
        }
        #[cfg(feature = "run")]
        Design::Tokio => tokio_runtime::run(cfg, listener, meters),
        #[cfg(feature = "run")]
        Design::IoUring => {
            uring::run(cfg, ring.expect("made above"), listener, meters)
        }
        #[cfg(not(feature = "run"))]
        Design::Tokio | Design::IoUring => Err(Error::failed(format!(
            "{} needs the servers crate's `run` feature (tokio, io_uring)",
            cfg.design.name()
        ))),
    }?;
    Ok(stats(cfg, meters, &outcome))
}

fn stats(cfg: &Config, meters: &Meters, outcome: &Outcome) -> Stats {
    let me = labkit::measure::usage(libc::RUSAGE_SELF);
    let kids = labkit::measure::usage(libc::RUSAGE_CHILDREN);
    let members = &meters.all()[..outcome.members.min(meters.all().len())];
    let total = meters.total();
    let (wakeups, per) = if outcome.counts_wakeups {
        let w = total.wakeups;
        (Some(w), Some(w as f64 / total.connections.max(1) as f64))
    } else {
        (None, None)
    };
    Stats {
        design: cfg.design.name().into(),
        pool: if cfg.design.pooled() { outcome.members } else { 0 },
        byte_reads: cfg.proto.byte_reads,
        herd: cfg.herd,
        connections: total.connections,
        requests: total.requests,
        bytes: total.bytes,
        bad_connections: total.bad,
        user_s: me.user_s + kids.user_s,
        sys_s: me.sys_s + kids.sys_s,
        children_user_s: kids.user_s,
        children_sys_s: kids.sys_s,
        voluntary_switches: me.voluntary_switches + kids.voluntary_switches,
        involuntary_switches: me.involuntary_switches + kids.involuntary_switches,
        per_member: if cfg.design.pooled() && cfg.design != Design::Tokio {
            members.iter().map(|m| m.counts().connections).collect()
        } else {
            Vec::new()
        },
        wakeups,
        wakeups_per_connection: per,
        children_left: labkit::children::of_self().map_or(usize::MAX, |(n, _)| n),
        threads_left: threads_besides_main(),
    }
}

/// Threads of this process other than the calling one, from
/// `/proc/self/task`.
pub fn threads_besides_main() -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task").map_or(usize::MAX, |d| d.count() - 1)
    };
    // A joined thread may still be listed for a moment: its exit completes
    // in the kernel after the joiner has been told.
    for _ in 0..50 {
        if count() == 0 {
            return 0;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if let Ok(d) = std::fs::read_dir("/proc/self/task") {
        for t in d.flatten() {
            let comm =
                std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            eprintln!(
                "server: thread left: {} {}",
                t.file_name().to_string_lossy(),
                comm.trim()
            );
        }
    }
    count()
}

/// A listening TCP socket on `addr` with Stevens' backlog (`LISTENQ`,
/// 1024), optionally with `SO_REUSEPORT` so that other sockets can bind the
/// same port.
pub fn listen(addr: SocketAddr, reuseport: bool) -> Result<TcpListener> {
    use nix::sys::socket::{self as s, sockopt};
    let family = if addr.is_ipv4() {
        s::AddressFamily::Inet
    } else {
        s::AddressFamily::Inet6
    };
    let what = |call: &str, e| {
        Error::failed(format!(
            "cannot listen on {addr}: {call}: {}",
            describe_errno(e)
        ))
    };
    let fd = s::socket(family, s::SockType::Stream, s::SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| what("socket", e))?;
    s::setsockopt(&fd, sockopt::ReuseAddr, &true)
        .map_err(|e| what("SO_REUSEADDR", e))?;
    if reuseport {
        s::setsockopt(&fd, sockopt::ReusePort, &true)
            .map_err(|e| what("SO_REUSEPORT", e))?;
    }
    s::bind(fd.as_raw_fd(), &s::SockaddrStorage::from(addr))
        .map_err(|e| what("bind", e))?;
    s::listen(&fd, s::Backlog::new(1024).unwrap_or(s::Backlog::MAXCONN))
        .map_err(|e| what("listen", e))?;
    Ok(TcpListener::from(fd))
}

/// One line on stderr, `server: ` and `parts`, put together in a fixed
/// buffer and written with one `write(2)`: no allocation, so forked
/// children use it too.
pub fn say(parts: &[&[u8]]) {
    let mut line = [0u8; 160];
    let mut n = 0;
    let all = [b"server: ".as_slice()].into_iter().chain(parts.iter().copied());
    for part in all.chain([b"\n".as_slice()]) {
        let take = part.len().min(line.len() - 1 - n);
        line[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    if line[n - 1] != b'\n' {
        line[n] = b'\n';
        n += 1;
    }
    // SAFETY: write(2) of a valid buffer to stderr; a failure is ignored,
    // as the line is only for the operator.
    unsafe { libc::write(libc::STDERR_FILENO, line.as_ptr().cast(), n) };
}

/// Say why a connection was closed early.
pub fn log_close(why: &str) {
    say(&[b"closed a connection: ", why.as_bytes()]);
}

/// Record what serving one connection did in member `i`'s meter, and say
/// why it was closed early if it was.
pub fn account(meters: &Meters, i: usize, served: &protocol::Served) {
    meters.served(i, served);
    if let Some(why) = served.error {
        log_close(why);
    }
}

/// Shut down a socket both ways: a thread blocked reading or accepting on
/// it returns at once.
pub fn shutdown_fd(fd: RawFd) {
    // SAFETY: shutdown(2) on a descriptor the caller keeps open; errors
    // (ENOTCONN on a socket the peer already closed) change nothing.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// A `TcpStream` for a descriptor this process owns (received with
/// `SCM_RIGHTS`, or accepted with `libc::accept`).
///
/// # Safety
/// `fd` must be an open socket that nothing else will close.
pub unsafe fn stream_from_fd(fd: RawFd) -> std::net::TcpStream {
    // SAFETY: the caller hands over sole ownership of `fd`.
    std::net::TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wait for a stop signal (SIGINT, SIGTERM, SIGHUP) in this thread.
pub fn wait_for_stop() -> Result<Signal> {
    stop_signals()
        .wait()
        .map_err(|e| Error::failed(format!("sigwait: {}", describe_errno(e))))
}

/// Spawn a named worker thread with a small stack: the workers serve one
/// connection at a time with fixed buffers.
pub fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .stack_size(128 << 10)
        .spawn(f)
        .map_err(|e| Error::io(format!("cannot start thread {name}"), e))
}

/// Accept timeouts and the like: the pause before trying again after an
/// `accept` error such as EMFILE, so a worker says so instead of spinning.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Wait until one of `fds` is readable; which ones are. EINTR is retried.
pub fn wait_readable<const N: usize>(
    fds: [std::os::fd::BorrowedFd<'_>; N],
) -> Result<[bool; N]> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut polled = fds.map(|fd| PollFd::new(fd, PollFlags::POLLIN));
    loop {
        match poll(&mut polled, PollTimeout::NONE) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                return Err(Error::failed(format!("poll: {}", describe_errno(e))));
            }
        }
    }
    Ok(polled.map(|p| p.any().unwrap_or(false)))
}

/// The connections being served by threads, so that a stop can shut them
/// down: a thread blocked reading from a client that never sends returns
/// at once instead of after `--timeout`.
#[derive(Default)]
pub struct Live {
    state: std::sync::Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    stopping: bool,
    /// The descriptors being served, by registration number.
    conns: std::collections::HashMap<u64, RawFd>,
    next: u64,
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serve `stream` as member `i` unless the server is stopping; the
    /// connection is registered while it is served.
    pub fn serve(
        &self,
        stream: std::net::TcpStream,
        proto: &Proto,
        meters: &Meters,
        i: usize,
    ) {
        let id = {
            let mut st = self.lock();
            if st.stopping {
                return;
            }
            st.next += 1;
            let id = st.next;
            st.conns.insert(id, stream.as_raw_fd());
            id
        };
        let served = match protocol::set_timeouts(&stream, proto.timeout) {
            Ok(()) => protocol::serve(&stream, proto, meters.get(i)),
            Err(e) => protocol::Served {
                error: Some(protocol::io_reason(&e, false)),
                ..Default::default()
            },
        };
        // Deregister before the stream is closed, so a stop never shuts
        // down a descriptor number that has been reused.
        self.lock().conns.remove(&id);
        drop(stream);
        account(meters, i, &served);
    }

    /// Refuse new connections and shut down the ones being served.
    pub fn stop(&self) {
        let mut st = self.lock();
        st.stopping = true;
        for &fd in st.conns.values() {
            shutdown_fd(fd);
        }
    }

    pub fn stopping(&self) -> bool {
        self.lock().stopping
    }
}

/// Say that `accept` failed and pause briefly (EMFILE would otherwise
/// spin); ECONNABORTED and EAGAIN (a client that left from the queue, a
/// race lost on a non-blocking listener) are silent.
pub fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, Interrupted, WouldBlock};
    if matches!(e.kind(), ConnectionAborted | WouldBlock | Interrupted) {
        return;
    }
    let mut digits = [0u8; 12];
    let mut d = digits.len();
    let mut v = e.raw_os_error().unwrap_or(0).unsigned_abs();
    loop {
        d -= 1;
        digits[d] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    say(&[b"accept failed: errno ", &digits[d..]]);
    std::thread::sleep(ACCEPT_RETRY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_say_the_words_the_runner_always_gave() {
        let o = Options { pool: 4, json: true, ..Options::new(Design::Tokio) };
        assert_eq!(labtest::line(o.args()), "--design tokio --json --pool 4");
        // server-designs' epoll-herd, with --byte-reads.
        let o = Options {
            herd: true,
            json: true,
            byte_reads: true,
            ..Options::new(Design::EpollExclusive)
        };
        assert_eq!(
            labtest::line(o.args()),
            "--design epoll-exclusive --herd --json --pool 15 --byte-reads"
        );
    }

    #[test]
    fn options_parse_back_from_their_words() {
        let every = Options {
            design: Design::EpollExclusive,
            listen: "[::1]:8080".parse().unwrap(),
            pool: 1000,
            byte_reads: true,
            max_bytes: 64 << 20,
            timeout: 0.25,
            herd: true,
            json: true,
        };
        let some = Options { timeout: 3600.0, ..Options::new(Design::IoUring) };
        for o in [Options::new(Design::Iterative), every, some] {
            labtest::parses_back("server", &o, o.args());
        }
    }

    #[test]
    fn a_herd_is_epoll_exclusive_alone() {
        let o = Options { herd: true, ..Options::new(Design::Epoll) };
        assert_eq!(
            o.config().unwrap_err().message,
            "--herd only applies to --design epoll-exclusive"
        );
        let o = Options { herd: true, ..Options::new(Design::EpollExclusive) };
        assert!(o.config().unwrap().herd);
    }
}
