//! `mq`: the message-queue server of the 2006 message-queue post ("线程的上下文开销真得那么
//! 厉害吗(2)?", a 2006 blog post; book References: mq-2006) and its client.
//!
//! The article's server (JTangMQ, in Java) had pools of reader, writer and
//! message-deliver threads; a client with 100 senders and 100 receivers
//! pushed 1 KiB messages through 4 queues. With 100 threads per pool it moved
//! about 600 messages/s with about 30% of the CPU spent switching threads,
//! with 10 per pool about 800 messages/s and about 10%. The source of that
//! server is not published; this crate rebuilds its shape:
//!
//! - `broker` ([`broker`]): an acceptor, `--readers R`, `--deliverers D` and
//!   `--writers W` threads around `--queues Q` bounded queues, over TCP on
//!   loopback; or, with `--event-loop` ([`event_loop`]), the same broker as
//!   one thread on epoll, today's usual answer.
//! - `load` ([`load`]): `--senders` and `--receivers` threads, each with its
//!   own connection; every message carries its sender, a sequence number and
//!   its send time, so the run ends by checking exactly-once delivery and
//!   reporting messages/s and latency percentiles.
//!
//! The protocol is in [`protocol`]: 4-byte big-endian length, then a kind
//! byte (1 HELLO_SEND, 2 HELLO_RECV queue:u16, 3 PUBLISH queue:u16 data,
//! 4 DELIVER queue:u16 data).
//!
//! What differs from the article, on purpose: queues are bounded (a full
//! queue stops the broker reading from that queue's senders, so memory stays
//! bounded and those senders slow down), and so are socket buffers (64 KiB by
//! default, so that messages wait in the broker's queues, where they can be
//! counted, rather than in megabytes of kernel buffers); a bad frame or a
//! vanished peer closes that one connection with one log line; SIGINT/SIGTERM
//! stop the broker cleanly (it delivers what it accepted, for at most
//! `--drain`, joins every thread and prints a stats line with its CPU time
//! and context switches).
//!
//! # What a slow client can hold
//!
//! Back pressure is per queue and per receiver, in both modes. A receiver
//! that reads slowly, or not at all, is given at most `--outbox` messages,
//! plus what its socket buffer takes; the other receivers of its queue get
//! the rest. When no receiver of a queue has room (or the queue has none),
//! the queue fills up to `--capacity` messages and then only the senders
//! whose next message is for that queue are paused: the broker stops
//! reading them, their bytes stay in the kernel and TCP slows them down.
//! Every other queue flows at its normal rate. So what waits for one queue
//! is at most `capacity + receivers x outbox` messages (returned messages go
//! back in front of a full queue), and each connection holds at most one
//! read chunk (64 KiB) plus one unfinished frame (`--max-frame`): the buffer
//! grows with the bytes that arrived, not with the length a frame announces,
//! and shrinks back once the frame is whole. With `--max-connections` (1000
//! by default) that bounds the broker's buffers at `max_connections x
//! (max_frame + 64 KiB)` in the worst case (about 1 GiB with the defaults;
//! `--max-frame 4K` makes it about 68 MiB), and in the usual case, a few
//! bytes of header per idle connection, far less.
//!
//! A receiver that has gone is noticed when its end of the connection
//! closes (epoll reports it) and, at the latest, just before the next write
//! to it: nothing is written to, or counted as delivered on, a socket whose
//! peer has closed it. Its messages go back to the front of its queue.

pub mod broker;
pub mod event_loop;
pub mod load;
pub mod protocol;
pub mod wire;

use std::ffi::OsString;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use labkit::cli::seconds_in;
use labkit::error::{Error, Result, describe_errno};
use labkit::limits::size_in;
use nix::sys::signal::{SigSet, Signal};
use serde::{Deserialize, Serialize};

/// A message-queue broker over TCP with reader, deliverer and writer thread
/// pools (the 2006 message-queue post), or one epoll loop with --event-loop. Prints the
/// bound address first, serves until SIGINT or SIGTERM, then a stats line.
/// Exit status: 0 ok, 1 failed, 2 bad usage.
///
/// Back pressure is per queue and per receiver: a receiver that reads slowly
/// or not at all gets at most --outbox messages (plus its socket buffer) and
/// the other receivers of its queue get the rest; a queue without a receiver
/// with room fills up to --capacity messages, and then only the senders of
/// that queue are paused. Other queues flow at their normal rate. What waits
/// for one queue is at most capacity + receivers x outbox messages; each
/// connection holds at most 64 KiB plus one unfinished frame (--max-frame),
/// so the broker's buffers stay under max-connections x (max-frame + 64 KiB)
/// (about 1 GiB with the defaults; --max-frame 4K makes it about 68 MiB).
#[derive(Clone, Debug, PartialEq, clap::Parser)]
#[command(version)]
pub struct Options {
    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Reader threads: parse frames from senders and enqueue them
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub readers: u32,

    /// Writer threads: write messages out to receivers
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub writers: u32,

    /// Deliverer threads: move messages from queues to receivers
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub deliverers: u32,

    /// Queues (numbered 0 to Q-1)
    #[arg(short, long, default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub queues: u16,

    /// Messages a queue holds before the broker stops reading from senders
    #[arg(long, default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub capacity: u32,

    /// Messages waiting for one receiver before deliverers wait
    #[arg(long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub outbox: u32,

    /// Largest frame body accepted, e.g. 64K; a longer length closes the
    /// connection
    #[arg(long, value_name = "BYTES", default_value = "1M",
          value_parser = size_in(16, 1 << 30))]
    pub max_frame: u64,

    /// Connections served at once; one more is accepted and closed at once
    /// (keep it below the open-files limit, `ulimit -n`)
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// Send and receive buffer of each connection (SO_SNDBUF/SO_RCVBUF),
    /// e.g. 64K; 0 leaves them to the kernel's autotuning (megabytes)
    #[arg(long, value_name = "BYTES", default_value = "64K",
          value_parser = size_in(0, 1 << 30))]
    pub socket_buffer: u64,

    /// Serve everything from one thread on epoll instead of the pools
    #[arg(long)]
    pub event_loop: bool,

    /// After a stop signal, keep delivering accepted messages for at most
    /// this many seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0,
          value_parser = seconds_in(0.0, 3600.0))]
    pub drain: f64,

    /// Print the final stats as one JSON object instead of a text line
    #[arg(long)]
    pub json: bool,
}

/// Every flag at its default: `broker` with no arguments.
impl Default for Options {
    fn default() -> Self {
        use clap::Parser;
        Self::try_parse_from(["broker"]).expect("no flags parse")
    }
}

impl Options {
    /// The words `broker` takes for these options, in the order the runner
    /// has always given them: the three pool sizes (always, but at their
    /// defaults with `--event-loop`, which has no pools), `--event-loop`
    /// when set, `--queues` always, `--json` when set, then every other
    /// flag not at its default. Parsed back, they give these options.
    pub fn args(&self) -> Vec<OsString> {
        let default = Self::default();
        let mut args: Vec<OsString> = Vec::new();
        let mut say = |flag: &str, value: Option<String>| {
            args.push(flag.into());
            args.extend(value.map(OsString::from));
        };
        let pools = [
            ("--readers", self.readers, default.readers),
            ("--writers", self.writers, default.writers),
            ("--deliverers", self.deliverers, default.deliverers),
        ];
        for (flag, n, at_default) in pools {
            if !self.event_loop || n != at_default {
                say(flag, Some(n.to_string()));
            }
        }
        if self.event_loop {
            say("--event-loop", None);
        }
        say("--queues", Some(self.queues.to_string()));
        if self.json {
            say("--json", None);
        }
        let rest = [
            ("--listen", self.listen.to_string(), default.listen.to_string()),
            ("--capacity", self.capacity.to_string(), default.capacity.to_string()),
            ("--outbox", self.outbox.to_string(), default.outbox.to_string()),
            (
                "--max-frame",
                self.max_frame.to_string(),
                default.max_frame.to_string(),
            ),
            (
                "--max-connections",
                self.max_connections.to_string(),
                default.max_connections.to_string(),
            ),
            (
                "--socket-buffer",
                self.socket_buffer.to_string(),
                default.socket_buffer.to_string(),
            ),
            ("--drain", self.drain.to_string(), default.drain.to_string()),
        ];
        for (flag, value, at_default) in rest {
            if value != at_default {
                say(flag, Some(value));
            }
        }
        args
    }

    /// How to run the broker, from the flags.
    pub fn config(&self) -> Config {
        Config {
            listen: self.listen,
            readers: self.readers as usize,
            writers: self.writers as usize,
            deliverers: self.deliverers as usize,
            queues: self.queues,
            capacity: self.capacity as usize,
            outbox: self.outbox as usize,
            max_frame: self.max_frame,
            max_connections: self.max_connections as usize,
            event_loop: self.event_loop,
            drain: Duration::from_secs_f64(self.drain),
            socket_buffer: self.socket_buffer as usize,
        }
    }
}

/// How to run the broker (the `broker` flags).
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub readers: usize,
    pub writers: usize,
    pub deliverers: usize,
    pub queues: u16,
    /// Messages a queue holds before readers wait.
    pub capacity: usize,
    /// Messages waiting for one receiver before deliverers wait.
    pub outbox: usize,
    pub max_frame: u64,
    /// Connections served at once; more are accepted and closed at once.
    pub max_connections: usize,
    pub event_loop: bool,
    /// Longest time to keep delivering after a stop signal.
    pub drain: Duration,
    /// SO_SNDBUF and SO_RCVBUF of every connection (0: the kernel's
    /// autotuning, which lets megabytes of messages wait in sockets).
    pub socket_buffer: usize,
}

/// Set a socket's send and receive buffers to `bytes` (the kernel doubles
/// the figure for its bookkeeping); 0 leaves them to the kernel.
pub fn set_socket_buffers(socket: &impl std::os::fd::AsRawFd, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let size = bytes.min(i32::MAX as usize) as libc::c_int;
    for option in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on an open socket with a pointer to a c_int and
        // its size; a failure only leaves the kernel's default.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// True if a receiver's peer has closed its connection (or sent bytes,
/// which a receiver never does after its hello): a non-blocking peek at the
/// socket, so that nothing is written to, or counted as delivered on, a
/// connection whose other end has gone.
pub(crate) fn peer_closed(socket: &impl std::os::fd::AsRawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: recv(2) into one byte we own; MSG_PEEK leaves any data where it
    // is and MSG_DONTWAIT makes it return at once on a live, quiet socket.
    let n = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return true; // 0: end of stream; 1: bytes a receiver must not send
    }
    let e = std::io::Error::last_os_error().kind();
    !matches!(e, ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

/// One log line per interval for a failure that repeats (EMFILE on accept,
/// refused connections): the first at once, then at most one every
/// [`Throttle::EVERY`] with the count since the last line.
pub(crate) struct Throttle {
    last: Option<Instant>,
    count: u64,
}

impl Throttle {
    pub(crate) const EVERY: Duration = Duration::from_secs(5);

    pub(crate) const fn new() -> Throttle {
        Throttle { last: None, count: 0 }
    }

    /// A failed `accept` (EMFILE and friends), after which the broker
    /// waits [`ACCEPT_BACKOFF`] and tries again.
    pub(crate) fn accept_failed(&mut self, e: &std::io::Error) {
        self.hit(|| {
            format!(
                "accept: {}; retrying every {} ms",
                labkit::error::describe_io(e),
                ACCEPT_BACKOFF.as_millis()
            )
        });
    }

    /// Count one failure; log `what` if the interval has passed.
    pub(crate) fn hit(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        let now = Instant::now();
        match self.last {
            None => eprintln!("broker: {}", what()),
            Some(t) if now.duration_since(t) >= Throttle::EVERY => eprintln!(
                "broker: {} ({} times in the last {:.0} s)",
                what(),
                self.count,
                now.duration_since(t).as_secs_f64()
            ),
            Some(_) => return,
        }
        self.last = Some(now);
        self.count = 0;
    }
}

/// How long the broker waits before it tries `accept` again after running
/// out of file descriptors (or memory).
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The broker's running totals.
#[derive(Debug, Default)]
pub struct Counters {
    pub msgs_in: AtomicU64,
    pub msgs_out: AtomicU64,
    pub connections: AtomicU64,
    /// Connections closed for a protocol violation or an I/O error.
    pub closed_bad: AtomicU64,
    /// Connections closed at once because `--max-connections` were open.
    pub refused: AtomicU64,
    /// Connections open now (the thread-pool broker's count).
    pub open: AtomicU64,
}

/// A connection counted against `--max-connections` for as long as it
/// lives.
pub(crate) struct Slot(Arc<Counters>);

impl Slot {
    pub(crate) fn new(counters: &Arc<Counters>) -> Slot {
        counters.open.fetch_add(1, Relaxed);
        Slot(counters.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

/// The final stats line.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    pub mode: String,
    pub readers: usize,
    pub writers: usize,
    pub deliverers: usize,
    pub queues: u16,
    pub messages_in: u64,
    pub messages_out: u64,
    pub connections: u64,
    pub closed_bad: u64,
    pub refused: u64,
    /// Worker threads started, all joined before this line was printed.
    pub threads_joined: usize,
    pub user_s: f64,
    pub sys_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl Stats {
    fn now(cfg: &Config, c: &Counters, threads: usize) -> Stats {
        let u = labkit::measure::self_usage();
        let (mode, r, w, d) = if cfg.event_loop {
            ("event-loop", 0, 0, 0)
        } else {
            ("threads", cfg.readers, cfg.writers, cfg.deliverers)
        };
        Stats {
            mode: mode.into(),
            readers: r,
            writers: w,
            deliverers: d,
            queues: cfg.queues,
            messages_in: c.msgs_in.load(Relaxed),
            messages_out: c.msgs_out.load(Relaxed),
            connections: c.connections.load(Relaxed),
            closed_bad: c.closed_bad.load(Relaxed),
            refused: c.refused.load(Relaxed),
            threads_joined: threads,
            user_s: u.user_s,
            sys_s: u.sys_s,
            voluntary_switches: u.voluntary_switches,
            involuntary_switches: u.involuntary_switches,
        }
    }

    /// The human stats line.
    pub fn line(&self) -> String {
        format!(
            "stats: mode={} in={} out={} connections={} closed_bad={} refused={} \
             threads_joined={} user={:.3}s sys={:.3}s voluntary={} involuntary={}",
            self.mode,
            self.messages_in,
            self.messages_out,
            self.connections,
            self.closed_bad,
            self.refused,
            self.threads_joined,
            self.user_s,
            self.sys_s,
            self.voluntary_switches,
            self.involuntary_switches
        )
    }
}

/// Run the broker until SIGINT or SIGTERM: bind, print the bound address
/// as the first line on stdout, serve, drain, and return the final stats.
pub fn run(cfg: &Config) -> Result<Stats> {
    // Block the stop signals before any thread exists, so every thread
    // inherits the mask and the signals wait for whoever asks for them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .map_err(|e| Error::failed(format!("sigprocmask: {}", describe_errno(e))))?;
    let listener = TcpListener::bind(cfg.listen)
        .map_err(|e| Error::io(format!("cannot listen on {}", cfg.listen), e))?;
    let addr = listener.local_addr().map_err(|e| Error::io("getsockname", e))?;
    labkit::cli::announce(&addr)?;
    let counters = Arc::new(Counters::default());
    if cfg.event_loop {
        event_loop::run(cfg, listener, signals, counters)
    } else {
        broker::run(cfg, listener, signals, counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_say_the_words_the_runner_always_gave() {
        // mq-sweep's pools, at the defaults' size too, and its event loop.
        for t in [10, 100] {
            let o = Options {
                readers: t,
                writers: t,
                deliverers: t,
                json: true,
                ..Options::default()
            };
            assert_eq!(
                labtest::line(o.args()),
                format!(
                    "--readers {t} --writers {t} --deliverers {t} --queues 4 --json"
                )
            );
        }
        let o = Options {
            event_loop: true,
            queues: 2,
            json: true,
            ..Options::default()
        };
        assert_eq!(labtest::line(o.args()), "--event-loop --queues 2 --json");
    }

    #[test]
    fn options_parse_back_from_their_words() {
        let every = Options {
            listen: "[::1]:7000".parse().unwrap(),
            readers: 1,
            writers: 2,
            deliverers: 3,
            queues: 9,
            capacity: 10_000_000,
            outbox: 1,
            max_frame: 4096,
            max_connections: 7,
            socket_buffer: 0,
            event_loop: true,
            drain: 0.25,
            json: true,
        };
        let pools = Options { event_loop: false, ..every.clone() };
        let lone = Options { readers: 3, event_loop: true, ..Options::default() };
        for o in [Options::default(), every, pools, lone] {
            labtest::parses_back("broker", &o, o.args());
        }
    }
}
