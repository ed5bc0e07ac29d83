//! `load --addr HOST:PORT --senders 100 --receivers 100 --queues 4 --size
//! 1024 --duration 10`: see the crate documentation.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use labkit::Error;
use labkit::cli::seconds_in;
use labkit::limits::size_in;

/// Load generator for `broker` (the 2006 message-queue post's client): senders publish
/// stamped messages for --duration, receivers take them; then exactly-once
/// delivery is checked and messages/s and latency percentiles reported.
/// Nothing waits past --duration + --drain (and 0.1 s): against a broker
/// that stopped or never reads, the run ends then, reports what it could
/// not send or receive, and fails. Exit status: 0 ok, 1 a message was lost,
/// duplicated or damaged (or the broker failed or timed out), 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The broker's address, as it printed it
    #[arg(long, required_unless_present = "floor")]
    addr: Option<SocketAddr>,

    /// No broker: measure the floor of the work itself instead (four
    /// copies of each message: memcpy, and one loopback TCP hop with
    /// --pipeline messages per write), for --duration seconds
    #[arg(long, conflicts_with = "addr")]
    floor: bool,

    #[command(flatten)]
    shape: mq::load::Shape,

    /// The broker's protocol: the lab's broker, Redis pub/sub (a channel
    /// per receiver) or NATS core pub/sub (a queue group per queue)
    #[arg(long, value_enum, default_value_t = mq::wire::Wire::Lab)]
    protocol: mq::wire::Wire,

    /// Seconds of sending
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0,
          value_parser = seconds_in(0.0, 86_400.0))]
    duration: f64,

    /// Messages per write call of a sender (pipelining: N PUBLISH commands
    /// or PUB frames in one write on Redis and NATS); 1 is one message per
    /// write
    #[arg(long, value_name = "N", default_value_t = 1, alias = "batch",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pipeline: u32,

    /// Messages per second, all senders together, spread evenly; 0 sends
    /// as fast as the broker takes them (saturation)
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 0.0,
          value_parser = rate)]
    rate: f64,

    /// After the sending window, wait at most this many seconds without
    /// progress for the last messages; a connect or a write still blocked
    /// by then gives up and the run fails
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0,
          value_parser = seconds_in(0.0, 86_400.0))]
    drain: f64,

    /// Send and receive buffer of each connection (SO_SNDBUF/SO_RCVBUF),
    /// e.g. 64K; 0 leaves them to the kernel's autotuning (megabytes)
    #[arg(long, value_name = "BYTES", default_value = "64K",
          value_parser = size_in(0, 1 << 30))]
    socket_buffer: u64,

    /// Print one JSON object instead of the text report
    #[arg(long)]
    json: bool,
}

fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1e9).contains(&r) => Ok(r),
        _ => Err(format!("'{text}' is not a rate from 0 to 1e9 messages/s")),
    }
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("load", run)
}

fn run(cli: &Cli) -> labkit::Result<()> {
    cli.shape.check()?;
    let Some(addr) = cli.addr.filter(|_| !cli.floor) else {
        let d = Duration::from_secs_f64(cli.duration.max(0.01));
        let f = mq::load::floor(cli.shape.size as usize, cli.pipeline as usize, d)?;
        return labkit::cli::emit(cli.json, &f, mq::load::FloorReport::human);
    };
    let cfg = mq::load::LoadConfig {
        addr,
        wire: cli.protocol,
        senders: cli.shape.senders,
        receivers: cli.shape.receivers,
        queues: cli.shape.queues,
        size: cli.shape.size as usize,
        duration: Duration::from_secs_f64(cli.duration),
        batch: cli.pipeline as usize,
        rate: cli.rate,
        drain: Duration::from_secs_f64(cli.drain),
        socket_buffer: cli.socket_buffer as usize,
    };
    let report = mq::load::run(&cfg)?;
    labkit::cli::emit(cli.json, &report, mq::load::LoadReport::human)?;
    if let Some(e) = &report.error {
        return Err(Error::failed(e.clone()));
    }
    if !report.ok() {
        return Err(Error::failed(format!(
            "delivery check failed: {} lost, {} duplicated, {} corrupt of {} sent",
            report.lost, report.duplicated, report.corrupt, report.sent
        )));
    }
    Ok(())
}
