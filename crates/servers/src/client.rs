//! The client, Stevens' `client.c`: `--children` concurrent clients, each
//! connecting `--loops` times; every connection writes `"N\n"`, reads
//! exactly N bytes and closes (so TIME_WAIT lands on the client).
//!
//! Differences, on purpose: the clients are threads, not forked children
//! (the client's own CPU is not what is measured, and threads can pool
//! their latencies); every reply is checked byte for byte against the
//! pattern the server sends, and a short or wrong reply is counted as an
//! error instead of ending the client; and with `--rate` it runs open-loop.
//!
//! Closed-loop (the book's way), a client starts its next connection when
//! the last one is done, so a slow server is offered less load and its
//! queueing never shows in the latencies. Open-loop, connection k of all
//! clients is due at `k / rate` seconds after the start whether or not the
//! server kept up, and its latency is counted from that intended time, not
//! from when a client got round to it: coordinated omission is avoided.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use labkit::error::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::protocol::ALPHABET;

/// Stevens' client: CHILDREN concurrent clients each connect LOOPS times,
/// ask for BYTES bytes, check every byte and close. Closed-loop by default;
/// with --rate, open-loop with latency counted from the intended start.
/// Exit status: 0 every reply exact, 1 some connection failed or a reply
/// was short or wrong, 2 bad usage.
#[derive(Clone, Debug, PartialEq, clap::Parser)]
#[command(version)]
pub struct Options {
    /// The server's address
    #[arg(long)]
    pub addr: SocketAddr,

    /// Concurrent clients
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub children: u32,

    /// Connections per client
    #[arg(long, default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub loops: u64,

    /// Bytes to ask for per connection
    #[arg(long, default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    pub bytes: u64,

    /// Open loop: connections per second for all clients together
    #[arg(long, value_name = "CONN_PER_S", value_parser = rate)]
    pub rate: Option<f64>,

    /// Seconds to wait for a connect, a write or the reply
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = rate)]
    pub timeout: f64,

    /// Print the report as one JSON object
    #[arg(long)]
    pub json: bool,
}

/// A positive number up to 1e9 (`--rate`, `--timeout`).
fn rate(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1e9 => Ok(r),
        _ => Err(format!("'{text}' is not a positive number")),
    }
}

impl Options {
    /// Against the server at `addr`, every other flag at its default.
    pub fn new(addr: SocketAddr) -> Self {
        use clap::Parser;
        Self::try_parse_from(["client", "--addr", &addr.to_string()])
            .expect("an address alone parses")
    }

    /// The words `client` takes for these options, in the order the runner
    /// has always given them: `--addr`, `--children`, `--loops` and
    /// `--bytes` always, the rest only when set (`--json`, `--rate`) or not
    /// at its default (`--timeout`). Parsed back, they give these options.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut say = |flag: &str, value: Option<String>| {
            args.push(flag.into());
            args.extend(value.map(OsString::from));
        };
        say("--addr", Some(self.addr.to_string()));
        if self.json {
            say("--json", None);
        }
        say("--children", Some(self.children.to_string()));
        say("--loops", Some(self.loops.to_string()));
        say("--bytes", Some(self.bytes.to_string()));
        if let Some(rate) = self.rate {
            say("--rate", Some(rate.to_string()));
        }
        if self.timeout != Self::new(self.addr).timeout {
            say("--timeout", Some(self.timeout.to_string()));
        }
        args
    }

    /// What to run, from the flags.
    pub fn config(&self) -> Config {
        Config {
            addr: self.addr,
            children: self.children as usize,
            loops: self.loops,
            bytes: self.bytes as usize,
            rate: self.rate,
            timeout: Duration::from_secs_f64(self.timeout),
        }
    }
}

/// What to run (the `client` flags).
#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub children: usize,
    pub loops: u64,
    pub bytes: usize,
    /// Connections per second for all clients together (open loop).
    pub rate: Option<f64>,
    /// Longest wait for connect, write or a reply.
    pub timeout: Duration,
}

/// Errors by kind.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Errors {
    pub connect: u64,
    pub write: u64,
    /// The server closed before sending all the bytes asked for.
    pub short: u64,
    /// A reply byte differed from the pattern.
    pub wrong: u64,
    pub timeout: u64,
    pub other: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect
            + self.write
            + self.short
            + self.wrong
            + self.timeout
            + self.other
    }

    fn add(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.write += o.write;
        self.short += o.short;
        self.wrong += o.wrong;
        self.timeout += o.timeout;
        self.other += o.other;
    }
}

use labkit::latency::Latency;

/// What `client --json` prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    pub addr: String,
    pub children: usize,
    pub loops: u64,
    pub bytes: usize,
    pub rate: Option<f64>,
    pub connections_ok: u64,
    pub errors: Errors,
    pub error_total: u64,
    pub elapsed_s: f64,
    pub connections_per_s: f64,
    /// Connect to last byte (closed loop) or intended start to last byte
    /// (open loop), successful connections only.
    pub latency: Latency,
}

impl Report {
    pub fn text(&self) -> String {
        format!(
            "{} connections ok, {} failed (connect {}, write {}, short {}, \
             wrong {}, timeout {}, other {}) in {:.3} s: {:.0} connections/s; \
             latency p50 {:.0} us, p99 {:.0} us, max {:.0} us\n",
            self.connections_ok,
            self.error_total,
            self.errors.connect,
            self.errors.write,
            self.errors.short,
            self.errors.wrong,
            self.errors.timeout,
            self.errors.other,
            self.elapsed_s,
            self.connections_per_s,
            self.latency.p50_us,
            self.latency.p99_us,
            self.latency.max_us
        )
    }
}

/// Run the clients and report. Errors are counted in the report; only a
/// failure to start a thread is an `Err`.
pub fn run(cfg: &Config) -> Result<Report> {
    let start = Instant::now();
    let mut threads = Vec::new();
    for i in 0..cfg.children {
        let cfg = cfg.clone();
        let t = std::thread::Builder::new()
            .name(format!("client-{i}"))
            .spawn(move || child(i, &cfg, start));
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                for t in threads {
                    let _ = t.join();
                }
                return Err(Error::io(format!("cannot start client thread {i}"), e));
            }
        }
    }
    let mut lat = Vec::new();
    let mut errors = Errors::default();
    for t in threads {
        let (l, e) =
            t.join().map_err(|_| Error::failed("a client thread panicked"))?;
        lat.extend(l);
        errors.add(&e);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ok = lat.len() as u64;
    Ok(Report {
        addr: cfg.addr.to_string(),
        children: cfg.children,
        loops: cfg.loops,
        bytes: cfg.bytes,
        rate: cfg.rate,
        connections_ok: ok,
        error_total: errors.total(),
        errors,
        elapsed_s: elapsed,
        connections_per_s: ok as f64 / elapsed.max(1e-9),
        latency: Latency::of_ns(&mut lat),
    })
}

// ANCHOR: child
/// One client: `loops` connections, one after the other; latencies in ns.
fn child(i: usize, cfg: &Config, t0: Instant) -> (Vec<u64>, Errors) {
    let mut reply = vec![0u8; cfg.bytes];
    let mut lat = Vec::with_capacity(cfg.loops as usize);
    let mut errors = Errors::default();
    for k in 0..cfg.loops {
        let begin = match cfg.rate {
            // Open loop: this connection's place in the global schedule.
            Some(rate) => {
                let slot = k as f64 * cfg.children as f64 + i as f64;
                let due = t0 + Duration::from_secs_f64(slot / rate);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                due
            }
            None => Instant::now(),
        };
        match one(cfg, &mut reply) {
            Ok(()) => lat.push(begin.elapsed().as_nanos() as u64),
            Err(kind) => kind(&mut errors),
        }
    }
    (lat, errors)
}

/// One connection: connect, ask for `bytes`, read exactly that, close.
fn one(cfg: &Config, reply: &mut [u8]) -> std::result::Result<(), fn(&mut Errors)> {
    let mut s = TcpStream::connect_timeout(&cfg.addr, cfg.timeout)
        .map_err(|_| (|e: &mut Errors| e.connect += 1) as fn(&mut Errors))?;
    let _ = s.set_read_timeout(Some(cfg.timeout));
    let _ = s.set_write_timeout(Some(cfg.timeout));
    let mut request = [0u8; 24];
    let n = {
        let mut w = &mut request[..];
        let _ = writeln!(w, "{}", cfg.bytes);
        24 - w.len()
    };
    s.write_all(&request[..n])
        .map_err(|_| (|e: &mut Errors| e.write += 1) as fn(&mut Errors))?;
    let mut got = 0;
    while got < reply.len() {
        match s.read(&mut reply[got..]) {
            Ok(0) => return Err(|e| e.short += 1),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(|e| e.timeout += 1);
            }
            // A reset before the whole reply: the server cut it short.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(|e| e.short += 1);
            }
            Err(_) => return Err(|e| e.other += 1),
        }
    }
    if reply.iter().enumerate().any(|(i, &b)| b != ALPHABET[i % 64]) {
        return Err(|e| e.wrong += 1);
    }
    Ok(())
}
// ANCHOR_END: child

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_say_the_words_the_runner_always_gave() {
        let addr = "127.0.0.1:40123".parse().unwrap();
        let o = Options {
            children: 1,
            loops: 2500,
            bytes: 4000,
            rate: Some(1234.5),
            json: true,
            ..Options::new(addr)
        };
        assert_eq!(
            labtest::line(o.args()),
            "--addr 127.0.0.1:40123 --json --children 1 --loops 2500 --bytes 4000 \
             --rate 1234.5"
        );
        let o = Options { rate: None, ..o };
        assert_eq!(o.args().len(), 9);
    }

    #[test]
    fn options_parse_back_from_their_words() {
        let addr = "127.0.0.1:9".parse().unwrap();
        let every = Options {
            addr: "[::1]:80".parse().unwrap(),
            children: 10_000,
            loops: 1,
            bytes: 1 << 30,
            rate: Some(0.5),
            timeout: 0.001,
            json: true,
        };
        for o in [Options::new(addr), every] {
            labtest::parses_back("client", &o, o.args());
        }
    }
}
