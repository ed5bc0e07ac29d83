//! The load generator: the article's client, 100 senders and 100 receivers
//! on 4 queues with 1 KiB messages, each a thread with its own connection.
//!
//! Sender `i` publishes to queue `i mod Q` as fast as the broker takes its
//! messages, for `--duration`; receiver `j` takes the messages of queue
//! `j mod Q`. Every message carries its sender, a sequence number and its
//! send time ([`Stamp`]), so at the end the run knows, per message, whether
//! it arrived once, never, or more than once, and how long it took.
//!
//! Nothing waits forever: a connect, a sender's write and the wait for the
//! last messages all end by `--duration + --drain` (plus up to 0.1 s, the
//! write timeout a blocked sender wakes up with to look at the clock), so a
//! broker that stopped, or never reads, makes a failed run (exit 1) that
//! says what was not sent or not received, not a hang.

use std::ffi::OsString;
use std::io::{self, BufReader, ErrorKind, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use labkit::cli::seconds_in;
use labkit::error::{Error, Result, describe_io};
use labkit::limits::size_in;
use serde::{Deserialize, Serialize};

use crate::protocol::{self, Stamp};
use crate::wire::{self, Next, Replies, Wire};

/// The shape of a load: senders, receivers, queues and message size.
/// These are `load`'s flags, and `lab run mq-sweep` passes them on.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct Shape {
    /// Sender threads, each with its own connection
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub senders: u32,

    /// Receiver threads, each with its own connection (at least --queues)
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub receivers: u32,

    /// Queues; sender i publishes to and receiver i takes from queue i mod Q
    #[arg(long, default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub queues: u16,

    /// Bytes of data per message: at least 20 (sender, sequence, send
    /// time), at most 1M - 3 (a frame within the broker's default --max-frame)
    #[arg(long, value_name = "BYTES", default_value = "1024",
          value_parser = labkit::limits::size_in(20, (1 << 20) - 3))]
    pub size: u64,
}

impl Shape {
    /// Every queue needs a receiver: a usage error otherwise.
    pub fn check(&self) -> Result<()> {
        if self.receivers < u32::from(self.queues) {
            return Err(Error::usage(format!(
                "--receivers {} leaves queues without a receiver; give at least \
                 --queues ({})",
                self.receivers, self.queues
            )));
        }
        Ok(())
    }
}

/// Load generator for `broker` (the 2006 message-queue post's client): senders publish
/// stamped messages for --duration, receivers take them; then exactly-once
/// delivery is checked and messages/s and latency percentiles reported.
/// Nothing waits past --duration + --drain (and 0.1 s): against a broker
/// that stopped or never reads, the run ends then, reports what it could
/// not send or receive, and fails. Exit status: 0 ok, 1 a message was lost,
/// duplicated or damaged (or the broker failed or timed out), 2 bad usage.
#[derive(Clone, Debug, PartialEq, clap::Parser)]
#[command(version)]
pub struct Options {
    /// The broker's address, as it printed it
    #[arg(long, required_unless_present = "floor")]
    pub addr: Option<SocketAddr>,

    /// No broker: measure the floor of the work itself instead (four
    /// copies of each message: memcpy, and one loopback TCP hop with
    /// --pipeline messages per write), for --duration seconds
    #[arg(long, conflicts_with = "addr")]
    pub floor: bool,

    #[command(flatten)]
    pub shape: Shape,

    /// The broker's protocol: the lab's broker, Redis pub/sub (a channel
    /// per receiver) or NATS core pub/sub (a queue group per queue)
    #[arg(long, value_enum, default_value_t = Wire::Lab)]
    pub protocol: Wire,

    /// Seconds of sending
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0,
          value_parser = seconds_in(0.0, 86_400.0))]
    pub duration: f64,

    /// Messages per write call of a sender (pipelining: N PUBLISH commands
    /// or PUB frames in one write on Redis and NATS); 1 is one message per
    /// write
    #[arg(long, value_name = "N", default_value_t = 1, alias = "batch",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pipeline: u32,

    /// Messages per second, all senders together, spread evenly; 0 sends
    /// as fast as the broker takes them (saturation)
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0.0,
          value_parser = rate)]
    pub rate: f64,

    /// After the sending window, wait at most this many seconds without
    /// progress for the last messages; a connect or a write still blocked
    /// by then gives up and the run fails
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0,
          value_parser = seconds_in(0.0, 86_400.0))]
    pub drain: f64,

    /// Send and receive buffer of each connection (SO_SNDBUF/SO_RCVBUF),
    /// e.g. 64K; 0 leaves them to the kernel's autotuning (megabytes)
    #[arg(long, value_name = "BYTES", default_value = "64K",
          value_parser = size_in(0, 1 << 30))]
    pub socket_buffer: u64,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    pub json: bool,
}

/// A rate from 0 to 1e9 messages/s (`--rate`).
fn rate(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1e9).contains(&r) => Ok(r),
        _ => Err(format!("'{text}' is not a rate from 0 to 1e9 messages/s")),
    }
}

impl Options {
    /// A load against the broker at `addr`, every other flag at its
    /// default.
    pub fn against(addr: SocketAddr) -> Self {
        Self { addr: Some(addr), floor: false, ..Self::without_broker() }
    }

    /// `load --floor`, every other flag at its default.
    pub fn without_broker() -> Self {
        use clap::Parser;
        Self::try_parse_from(["load", "--floor"]).expect("--floor alone parses")
    }

    /// The words `load` takes for these options, in the orders the runner
    /// has always given them: against a broker `--addr`, `--json` when set,
    /// then `--protocol`, the [`Shape`], `--duration`, `--rate` and
    /// `--pipeline` always; for the floor `--floor`, `--json` when set, then
    /// `--size`, `--pipeline` and `--duration` always, and the rest of the
    /// shape, `--protocol` and `--rate` when not at their defaults. Last
    /// come `--drain` and `--socket-buffer` when not at their defaults.
    /// Parsed back, they give these options.
    pub fn args(&self) -> Vec<OsString> {
        let default = Self::without_broker();
        let mut args: Vec<OsString> = Vec::new();
        let mut say = |flag: &str, value: Option<String>| {
            args.push(flag.into());
            args.extend(value.map(OsString::from));
        };
        if self.floor {
            say("--floor", None);
        }
        if let Some(addr) = self.addr {
            say("--addr", Some(addr.to_string()));
        }
        if self.json {
            say("--json", None);
        }
        let (shape, at) = (&self.shape, &default.shape);
        if self.floor {
            say("--size", Some(shape.size.to_string()));
            say("--pipeline", Some(self.pipeline.to_string()));
            say("--duration", Some(self.duration.to_string()));
            let rest = [
                ("--senders", shape.senders.to_string(), at.senders.to_string()),
                (
                    "--receivers",
                    shape.receivers.to_string(),
                    at.receivers.to_string(),
                ),
                ("--queues", shape.queues.to_string(), at.queues.to_string()),
                (
                    "--protocol",
                    self.protocol.name().into(),
                    default.protocol.name().into(),
                ),
                ("--rate", self.rate.to_string(), default.rate.to_string()),
            ];
            for (flag, value, at_default) in rest {
                if value != at_default {
                    say(flag, Some(value));
                }
            }
        } else {
            say("--protocol", Some(self.protocol.name().into()));
            for (flag, value) in [
                ("--senders", shape.senders.to_string()),
                ("--receivers", shape.receivers.to_string()),
                ("--queues", shape.queues.to_string()),
                ("--size", shape.size.to_string()),
                ("--duration", self.duration.to_string()),
                ("--rate", self.rate.to_string()),
                ("--pipeline", self.pipeline.to_string()),
            ] {
                say(flag, Some(value));
            }
        }
        let rest = [
            ("--drain", self.drain.to_string(), default.drain.to_string()),
            (
                "--socket-buffer",
                self.socket_buffer.to_string(),
                default.socket_buffer.to_string(),
            ),
        ];
        for (flag, value, at_default) in rest {
            if value != at_default {
                say(flag, Some(value));
            }
        }
        args
    }

    /// How to run a load against `addr`, from the flags.
    pub fn config(&self, addr: SocketAddr) -> LoadConfig {
        LoadConfig {
            addr,
            wire: self.protocol,
            senders: self.shape.senders,
            receivers: self.shape.receivers,
            queues: self.shape.queues,
            size: self.shape.size as usize,
            duration: Duration::from_secs_f64(self.duration),
            batch: self.pipeline as usize,
            rate: self.rate,
            drain: Duration::from_secs_f64(self.drain),
            socket_buffer: self.socket_buffer as usize,
        }
    }
}

/// How to run a load (the `load` flags, against a broker).
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub addr: SocketAddr,
    /// The broker's protocol: the lab's, Redis's or NATS's ([`wire`]).
    pub wire: Wire,
    pub senders: u32,
    pub receivers: u32,
    pub queues: u16,
    /// Bytes of data per message (stamp included).
    pub size: usize,
    pub duration: Duration,
    /// Messages per `write` call of a sender (`--pipeline`).
    pub batch: usize,
    /// Messages per second, all senders together (0: as fast as the broker
    /// takes them).
    pub rate: f64,
    /// How long to wait for the last messages after the senders stop.
    pub drain: Duration,
    /// SO_SNDBUF and SO_RCVBUF of each connection (0: the kernel's).
    pub socket_buffer: usize,
}

use labkit::latency::Latency;

/// What a run saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadReport {
    /// The protocol it spoke (the lab broker's when absent).
    #[serde(default)]
    pub protocol: Wire,
    pub senders: u32,
    pub receivers: u32,
    pub queues: u16,
    pub size: usize,
    pub duration_s: f64,
    /// The rate asked for (0: as fast as possible). With a rate each
    /// message is stamped with the time it was due, not the time it went
    /// out, so a sender that fell behind its schedule counts the wait
    /// (open loop: no coordinated omission).
    pub rate: f64,
    /// Messages per write of a sender (`--pipeline`; 1 when absent).
    #[serde(default = "one")]
    pub pipeline: usize,
    /// Messages whose write completed.
    pub sent: u64,
    /// Messages in writes a sender gave up on at the deadline (they may
    /// have reached the broker in part; they are not counted as lost).
    pub unsent: u64,
    /// Senders that gave up a write at the deadline.
    pub timed_out: u32,
    /// Distinct messages received.
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Messages that arrived damaged, on the wrong queue, or never sent.
    pub corrupt: u64,
    /// From the first send to the last receipt.
    pub elapsed_s: f64,
    pub messages_per_s: f64,
    pub latency: Latency,
    /// The generator's own CPU time.
    pub user_s: f64,
    pub sys_s: f64,
    /// The generator's CPU time (user + sys) per message received, in
    /// microseconds: its share of the work, beside the broker's.
    #[serde(default)]
    pub cpu_us_per_message: f64,
    /// The first I/O error a sender or receiver met, if any.
    pub error: Option<String>,
}

fn one() -> usize {
    1
}

impl LoadReport {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.corrupt == 0
    }

    pub fn human(&self) -> String {
        let ms = |us: f64| us / 1000.0;
        format!(
            "load: {} senders, {} receivers, {} queues, {}-byte messages, {:.1} s{}{}\n\
             sent {}, received {}: lost {}, duplicated {}, corrupt {}{}\n\
             {:.0} messages/s over {:.3} s; latency p50 {:.3} ms, p90 {:.3} ms, \
             p99 {:.3} ms, max {:.3} ms\n\
             load CPU: user {:.3} s, sys {:.3} s, {:.2} µs per message\n",
            self.senders,
            self.receivers,
            self.queues,
            self.size,
            self.duration_s,
            if self.pipeline > 1 {
                format!(", {} messages per write", self.pipeline)
            } else {
                String::new()
            },
            if self.rate > 0.0 {
                format!(", at {} messages/s", self.rate)
            } else {
                String::new()
            },
            self.sent,
            self.received,
            self.lost,
            self.duplicated,
            self.corrupt,
            if self.timed_out > 0 {
                format!(
                    "; {} senders timed out with {} messages unsent",
                    self.timed_out, self.unsent
                )
            } else {
                String::new()
            },
            self.messages_per_s,
            self.elapsed_s,
            ms(self.latency.p50_us),
            ms(self.latency.p90_us),
            ms(self.latency.p99_us),
            ms(self.latency.max_us),
            self.user_s,
            self.sys_s,
            self.cpu_us_per_message
        )
    }
}

/// What one sender did: messages fully written, messages attempted.
#[derive(Default)]
struct Sent {
    ok: u64,
    tried: u64,
    /// It gave up a write at the deadline.
    timed_out: bool,
    error: Option<String>,
}

/// How long a blocked write waits before it looks at the clock again.
const WRITE_SLICE: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Got {
    stamps: Vec<(u32, u64)>,
    latency_ns: Vec<u64>,
    corrupt: u64,
    error: Option<String>,
}

struct Shared {
    base: Instant,
    received: AtomicU64,
    last_ns: AtomicU64,
    /// When the senders started.
    start_ns: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

/// Connect, giving up at `deadline`; a hello or handshake that follows
/// gives up then too (the read timeout).
fn connect(addr: SocketAddr, buffer: usize, deadline: Instant) -> Result<TcpStream> {
    let fail = |e| Error::io(format!("cannot connect to {addr}"), e);
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(fail(io::Error::from(ErrorKind::TimedOut)));
    }
    let s = TcpStream::connect_timeout(&addr, left).map_err(fail)?;
    let _ = s.set_nodelay(true);
    crate::set_socket_buffers(&s, buffer);
    s.set_write_timeout(Some(WRITE_SLICE)).map_err(fail)?;
    s.set_read_timeout(Some(left)).map_err(fail)?;
    Ok(s)
}

fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.clone())
        .stack_size(256 << 10)
        .spawn(f)
        .map_err(|e| Error::io(format!("cannot start thread {name}"), e))
}

pub fn run(cfg: &LoadConfig) -> Result<LoadReport> {
    let shared = Arc::new(Shared {
        base: Instant::now(),
        received: AtomicU64::new(0),
        last_ns: AtomicU64::new(0),
        start_ns: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let q = |i: u32| (i % u32::from(cfg.queues)) as u16;
    // No connect waits past the time the whole run may take.
    let give_up = shared.base + cfg.duration + cfg.drain;
    // Receivers first, so no queue fills up before anyone takes from it.
    let mut rx_streams = Vec::new();
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    let started = (|| -> Result<()> {
        for j in 0..cfg.receivers {
            let stream = connect(cfg.addr, cfg.socket_buffer, give_up)?;
            let mut r = BufReader::with_capacity(64 << 10, stream);
            // Lane j / Q of queue j mod Q (a channel of its own on Redis).
            let (queue, lane) = (q(j), j / u32::from(cfg.queues));
            wire::receiver_hello(cfg.wire, &mut r, queue, lane).map_err(|e| {
                Error::io(format!("receiver {j}: subscribing at {}", cfg.addr), e)
            })?;
            // Subscribed: from now on a receiver waits for messages as long
            // as the run lasts.
            r.get_ref()
                .set_read_timeout(None)
                .map_err(|e| Error::io("socket", e))?;
            rx_streams
                .push(r.get_ref().try_clone().map_err(|e| Error::io("dup", e))?);
            let (sh, c) = (shared.clone(), cfg.clone());
            receivers.push(spawn(format!("receiver-{j}"), move || {
                receive(r, queue, lane, &c, &sh)
            })?);
        }
        // Every sender connected before the sending window opens, so that
        // the window measures sending, not connecting.
        let mut streams = Vec::new();
        for i in 0..cfg.senders {
            let mut s = connect(cfg.addr, cfg.socket_buffer, give_up)?;
            wire::sender_hello(cfg.wire, &mut s).map_err(|e| {
                Error::io(format!("sender {i}: hello to {}", cfg.addr), e)
            })?;
            streams.push(s);
        }
        let start_ns = shared.now_ns();
        shared.start_ns.store(start_ns, Relaxed);
        let end_ns = start_ns + cfg.duration.as_nanos() as u64;
        for (i, stream) in (0..cfg.senders).zip(streams) {
            let (sh, c, queue) = (shared.clone(), cfg.clone(), q(i));
            senders.push(spawn(format!("sender-{i}"), move || {
                send(stream, i, queue, &c, end_ns, &sh)
            })?);
        }
        Ok(())
    })();
    if started.is_err() {
        shared.stop.store(true, Relaxed);
    }
    let sent: Vec<Sent> =
        senders.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    let total: u64 = sent.iter().map(|s| s.ok).sum();
    // Wait for the last messages while they keep coming: until --drain
    // has passed since the end of the sending window or the last receipt,
    // whichever came later.
    let end_ns = shared.start_ns.load(Relaxed) + cfg.duration.as_nanos() as u64;
    let drain_ns = cfg.drain.as_nanos() as u64;
    while started.is_ok()
        && shared.received.load(Relaxed) < total
        && shared.now_ns() < shared.last_ns.load(Relaxed).max(end_ns) + drain_ns
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    shared.stop.store(true, Relaxed);
    for s in &rx_streams {
        let _ = s.shutdown(Shutdown::Both);
    }
    let got: Vec<Got> =
        receivers.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    started?;
    Ok(verify(cfg, &shared, &sent, got))
}

// ANCHOR: send
fn send(
    mut stream: TcpStream,
    me: u32,
    queue: u16,
    cfg: &LoadConfig,
    end_ns: u64,
    sh: &Shared,
) -> Sent {
    let mut sent = Sent::default();
    // A write blocked on a broker that does not read gives up here.
    let give_up_ns = end_ns + cfg.drain.as_nanos() as u64;
    let mut buf = Vec::with_capacity(cfg.batch * (protocol::HEADER + 32 + cfg.size));
    // Redis: the queue's receivers each have a channel (lane), taken in
    // turn, starting from one of the sender's own.
    let lanes = wire::lanes(queue, cfg.receivers, cfg.queues).max(1);
    let mut replies = Replies::default();
    // With --rate, sender `me` sends batch k at start + k * gap (offset so
    // the senders do not all fire at once); without, back to back.
    let start = sh.start_ns.load(Relaxed);
    let gap_ns = if cfg.rate > 0.0 {
        1e9 * cfg.batch as f64 * f64::from(cfg.senders) / cfg.rate
    } else {
        0.0
    };
    let offset = gap_ns * f64::from(me) / f64::from(cfg.senders);
    while sh.now_ns() < end_ns && !sh.stop.load(Relaxed) {
        // Open loop: a batch is stamped with the time it was due, so a
        // sender behind its schedule (a broker that queues) shows in the
        // latency instead of slowing the clock (coordinated omission).
        let mut due_ns = None;
        if gap_ns > 0.0 {
            let k = sent.ok / cfg.batch as u64;
            let due = start + (offset + k as f64 * gap_ns) as u64;
            let now = sh.now_ns();
            if due > now {
                std::thread::sleep(Duration::from_nanos(
                    (due - now).min(end_ns - now),
                ));
                continue;
            }
            due_ns = Some(due);
        }
        buf.clear();
        for k in 0..cfg.batch as u64 {
            let seq = sent.ok + k;
            let sent_ns = due_ns.unwrap_or_else(|| sh.now_ns());
            let stamp = Stamp { sender: me, seq, sent_ns };
            let lane = ((u64::from(me) + seq) % u64::from(lanes)) as u32;
            wire::publish(cfg.wire, &stamp, queue, lane, cfg.size, &mut buf);
        }
        sent.tried = sent.ok + cfg.batch as u64;
        if let Err(e) = write_by(&mut stream, &buf, give_up_ns, sh) {
            if e.kind() == ErrorKind::TimedOut {
                sent.timed_out = true;
            } else {
                sent.error =
                    Some(format!("sender {me}: write: {}", describe_io(&e)));
            }
            return sent;
        }
        sent.ok = sent.tried;
        if cfg.wire == Wire::Redis {
            replies.sent(cfg.batch as u64);
            // Now and then, whatever replies have come: never a wait.
            if replies.pending >= 256
                && let Err(e) = replies.read_ready(&stream)
            {
                sent.error = Some(format!("sender {me}: {}", describe_io(&e)));
                return sent;
            }
        }
    }
    // The end: the lab broker gets an end of stream at a frame boundary;
    // a Redis sender reads its last replies, a NATS sender has its PING
    // answered, each by the deadline.
    // Its last write (NATS's PING) may wait behind what the broker has
    // not read yet, as its reads wait for the answers: both until the
    // deadline, not for the 0.1 s slice of a sending write.
    let left = Duration::from_nanos(give_up_ns.saturating_sub(sh.now_ns()).max(1));
    let _ = stream.set_read_timeout(Some(left));
    let _ = stream.set_write_timeout(Some(left));
    if let Err(e) = wire::sender_done(cfg.wire, &mut stream, &mut replies) {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            sent.timed_out = true;
        } else {
            sent.error =
                Some(format!("sender {me}: at the end: {}", describe_io(&e)));
        }
    }
    sent
}
// ANCHOR_END: send

/// `write_all` that gives up (TimedOut) at `deadline_ns` or when the run
/// stops: the socket's SO_SNDTIMEO ([`WRITE_SLICE`]) makes a blocked write
/// come back now and then to look at the clock.
fn write_by(
    stream: &mut TcpStream,
    mut buf: &[u8],
    deadline_ns: u64,
    sh: &Shared,
) -> io::Result<()> {
    while !buf.is_empty() {
        match stream.write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock
                        | ErrorKind::TimedOut
                        | ErrorKind::Interrupted
                ) =>
            {
                if sh.now_ns() >= deadline_ns || sh.stop.load(Relaxed) {
                    return Err(ErrorKind::TimedOut.into());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn receive(
    mut r: BufReader<TcpStream>,
    queue: u16,
    lane: u32,
    cfg: &LoadConfig,
    sh: &Shared,
) -> Got {
    let mut got = Got::default();
    let (mut line, mut body) = (Vec::new(), Vec::new());
    loop {
        match wire::next_message(
            cfg.wire, &mut r, &mut line, &mut body, queue, lane, cfg.size,
        ) {
            Ok(Next::Data) => {}
            // A message not meant for this receiver: damage, counted.
            Ok(Next::Wrong(_)) => {
                got.corrupt += 1;
                continue;
            }
            // Bytes that break the protocol: nothing after them can be
            // trusted.
            Err(e) if e.kind() == ErrorKind::InvalidData => {
                got.corrupt += 1;
                got.error = Some(format!("receiver: {e}"));
                return got;
            }
            Err(e) => {
                if e.kind() != ErrorKind::UnexpectedEof && !sh.stop.load(Relaxed) {
                    got.error = Some(format!("receiver: read: {}", describe_io(&e)));
                }
                return got;
            }
        }
        let now = sh.now_ns();
        match Stamp::check_data(&body, cfg.size) {
            Some(s) => {
                got.stamps.push((s.sender, s.seq));
                got.latency_ns.push(now.saturating_sub(s.sent_ns));
                sh.received.fetch_add(1, Relaxed);
                sh.last_ns.fetch_max(now, Relaxed);
            }
            None => got.corrupt += 1,
        }
    }
}

// ANCHOR: verify
/// Count every (sender, sequence) pair: each message written must arrive
/// exactly once.
fn verify(
    cfg: &LoadConfig,
    sh: &Shared,
    sent: &[Sent],
    got: Vec<Got>,
) -> LoadReport {
    let mut seen: Vec<Vec<u8>> =
        sent.iter().map(|s| vec![0u8; s.tried as usize]).collect();
    let (mut corrupt, mut duplicated, mut received) = (0, 0, 0);
    let mut latency = Vec::new();
    let mut error = sent.iter().find_map(|s| s.error.clone());
    for g in got {
        corrupt += g.corrupt;
        error = error.or(g.error);
        for (sender, seq) in g.stamps {
            match seen.get_mut(sender as usize).and_then(|v| v.get_mut(seq as usize))
            {
                Some(0) => {
                    received += 1;
                    seen[sender as usize][seq as usize] = 1;
                }
                Some(n) => {
                    duplicated += 1;
                    *n = n.saturating_add(1);
                }
                None => corrupt += 1,
            }
        }
        latency.extend(g.latency_ns);
    }
    // A message whose write failed may or may not have reached the broker:
    // it is not lost if it never arrives.
    let lost: u64 = sent
        .iter()
        .zip(&seen)
        .map(|(s, v)| v[..s.ok as usize].iter().filter(|&&n| n == 0).count() as u64)
        .sum();
    let unsent = sent.iter().filter(|s| s.timed_out).map(|s| s.tried - s.ok).sum();
    let timed_out = sent.iter().filter(|s| s.timed_out).count() as u32;
    if timed_out > 0 && error.is_none() {
        error = Some(format!(
            "timed out: {timed_out} of {} senders could not finish a write by \
             --duration + --drain ({:.1} s); {unsent} messages unsent, {} of \
             {} sent not received",
            cfg.senders,
            (cfg.duration + cfg.drain).as_secs_f64(),
            lost,
            sent.iter().map(|s| s.ok).sum::<u64>()
        ));
    }
    let (start, last) = (sh.start_ns.load(Relaxed), sh.last_ns.load(Relaxed));
    let elapsed = last.saturating_sub(start) as f64 / 1e9;
    let u = labkit::measure::self_usage();
    LoadReport {
        protocol: cfg.wire,
        senders: cfg.senders,
        receivers: cfg.receivers,
        queues: cfg.queues,
        size: cfg.size,
        duration_s: cfg.duration.as_secs_f64(),
        rate: cfg.rate,
        pipeline: cfg.batch,
        sent: sent.iter().map(|s| s.ok).sum(),
        unsent,
        timed_out,
        received,
        lost,
        duplicated,
        corrupt,
        elapsed_s: elapsed,
        messages_per_s: if elapsed > 0.0 { received as f64 / elapsed } else { 0.0 },
        latency: Latency::of_ns(&mut latency),
        user_s: u.user_s,
        sys_s: u.sys_s,
        cpu_us_per_message: 1e6 * (u.user_s + u.sys_s) / received.max(1) as f64,
        error,
    }
}
// ANCHOR_END: verify

// ANCHOR: floor
/// The floor of the work itself, with no broker: what the four copies of
/// a message cost (the sender's write, the broker's read and its write,
/// the receiver's read), measured two ways on this machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FloorReport {
    pub size: usize,
    /// Messages per write on the loopback hop.
    pub pipeline: usize,
    /// Four 1-message memcpys (user space only), nanoseconds per message.
    pub memcpy4_ns_per_message: f64,
    /// One loopback TCP hop (a thread writing `pipeline` messages per
    /// write, a thread reading 64 KiB at a time, one process): CPU time,
    /// user + sys, per message, in microseconds. A broker's path is two
    /// such hops: four copies, two writes and two reads per batch.
    pub hop_cpu_us_per_message: f64,
    /// Messages/s of that one hop, by the wall clock.
    pub hop_messages_per_s: f64,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The floor: `cpus` CPUs spending two hops' CPU per message and
    /// nothing else, in messages/s (no broker logic, no generator's
    /// stamping or checking).
    pub floor_messages_per_s: f64,
}

impl FloorReport {
    pub fn human(&self) -> String {
        format!(
            "floor: {}-byte messages, {} per write: memcpy x4 {:.0} ns per \
             message; one loopback hop {:.2} µs CPU per message ({:.0} \
             messages/s); two hops on {} CPUs: {:.0} messages/s\n",
            self.size,
            self.pipeline,
            self.memcpy4_ns_per_message,
            self.hop_cpu_us_per_message,
            self.hop_messages_per_s,
            self.cpus,
            self.floor_messages_per_s
        )
    }
}

/// Measure the floor for `size`-byte messages, `pipeline` per write, for
/// about `duration` (half memcpy, half the loopback hop).
pub fn floor(
    size: usize,
    pipeline: usize,
    duration: Duration,
) -> Result<FloorReport> {
    use std::hint::black_box;
    use std::io::Read;
    let frame = protocol::HEADER + size;
    // memcpy: four copies of a message between four buffers, as many
    // times as fit in half the time.
    let mut bufs = vec![vec![0u8; frame]; 5];
    let (t, mut n) = (Instant::now(), 0u64);
    while t.elapsed() < duration / 2 {
        for _ in 0..1000 {
            for k in 0..4 {
                let (a, b) = bufs.split_at_mut(k + 1);
                b[0].copy_from_slice(black_box(&a[k]));
            }
            black_box(&mut bufs);
        }
        n += 1000;
    }
    let memcpy4 = t.elapsed().as_nanos() as f64 / n as f64;
    // The hop: a writer thread and a reader thread on loopback.
    let io = |e| Error::io("floor: loopback", e);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let mut tx = TcpStream::connect(addr).map_err(io)?;
    let (mut rx, _) = listener.accept().map_err(io)?;
    let _ = tx.set_nodelay(true);
    let batch = vec![7u8; frame * pipeline];
    let stop = Arc::new(AtomicBool::new(false));
    let before = labkit::measure::self_usage();
    let t = Instant::now();
    let writer = {
        let stop = stop.clone();
        spawn("floor-writer".into(), move || -> io::Result<u64> {
            let mut batches = 0;
            while !stop.load(Relaxed) {
                tx.write_all(&batch)?;
                batches += 1;
            }
            Ok(batches) // dropping tx ends the reader's stream
        })?
    };
    let reader = spawn("floor-reader".into(), move || -> io::Result<u64> {
        let mut chunk = vec![0u8; 64 << 10];
        let mut bytes = 0u64;
        loop {
            match rx.read(&mut chunk) {
                Ok(0) => return Ok(bytes),
                Ok(k) => bytes += k as u64,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    })?;
    std::thread::sleep(duration / 2);
    stop.store(true, Relaxed);
    let wrote =
        writer.join().map_err(|_| Error::failed("floor: writer panicked"))?;
    let read = reader.join().map_err(|_| Error::failed("floor: reader panicked"))?;
    let wall = t.elapsed().as_secs_f64();
    let after = labkit::measure::self_usage();
    wrote.map_err(io)?;
    let messages = read.map_err(io)? as f64 / frame as f64;
    let cpu = (after.user_s + after.sys_s) - (before.user_s + before.sys_s);
    let hop = 1e6 * cpu / messages.max(1.0);
    let cpus = labkit::affinity::allowed_cpus().map_or(1, |c| c.len().max(1));
    Ok(FloorReport {
        size,
        pipeline,
        memcpy4_ns_per_message: memcpy4,
        hop_cpu_us_per_message: hop,
        hop_messages_per_s: messages / wall.max(1e-9),
        cpus,
        floor_messages_per_s: cpus as f64 * 1e6 / (2.0 * hop).max(1e-9),
    })
}
// ANCHOR_END: floor

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_say_the_words_the_runner_always_gave() {
        // mq-sweep's load against NATS, at its quick shape.
        let o = Options {
            json: true,
            protocol: Wire::Nats,
            shape: Shape { senders: 20, receivers: 20, queues: 4, size: 1024 },
            duration: 0.5,
            rate: 2000.0,
            pipeline: 16,
            ..Options::against("127.0.0.1:4222".parse().unwrap())
        };
        assert_eq!(
            labtest::line(o.args()),
            "--addr 127.0.0.1:4222 --json --protocol nats --senders 20 --receivers 20 \
             --queues 4 --size 1024 --duration 0.5 --rate 2000 --pipeline 16"
        );
        // Against the lab's broker, at every default.
        let o = Options {
            json: true,
            ..Options::against("127.0.0.1:1".parse().unwrap())
        };
        assert_eq!(
            labtest::line(o.args()),
            "--addr 127.0.0.1:1 --json --protocol lab --senders 100 --receivers 100 \
             --queues 4 --size 1024 --duration 10 --rate 0 --pipeline 1"
        );
        // And its floor: only the size of the shape.
        let mut floor =
            Options { json: true, duration: 1.0, ..Options::without_broker() };
        floor.shape.size = 64;
        assert_eq!(
            labtest::line(floor.args()),
            "--floor --json --size 64 --pipeline 1 --duration 1"
        );
    }

    #[test]
    fn options_parse_back_from_their_words() {
        let every = Options {
            addr: Some("[::1]:6379".parse().unwrap()),
            floor: false,
            shape: Shape { senders: 1, receivers: 3, queues: 3, size: 20 },
            protocol: Wire::Redis,
            duration: 0.125,
            pipeline: 10_000,
            rate: 1e9,
            drain: 0.0,
            socket_buffer: 0,
            json: true,
        };
        let floor = Options { addr: None, floor: true, ..every.clone() };
        let against = Options::against("127.0.0.1:5".parse().unwrap());
        for o in [Options::without_broker(), against, every, floor] {
            labtest::parses_back("load", &o, o.args());
        }
    }
}
