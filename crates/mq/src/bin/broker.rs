//! `broker --readers R --writers W --deliverers D --queues Q`: see the
//! crate documentation.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use labkit::cli::seconds_in;
use labkit::limits::size_in;

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
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Address to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,

    /// Reader threads: parse frames from senders and enqueue them
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    readers: u32,

    /// Writer threads: write messages out to receivers
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    writers: u32,

    /// Deliverer threads: move messages from queues to receivers
    #[arg(short, long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    deliverers: u32,

    /// Queues (numbered 0 to Q-1)
    #[arg(short, long, default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    queues: u16,

    /// Messages a queue holds before the broker stops reading from senders
    #[arg(long, default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    capacity: u32,

    /// Messages waiting for one receiver before deliverers wait
    #[arg(long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    outbox: u32,

    /// Largest frame body accepted, e.g. 64K; a longer length closes the
    /// connection
    #[arg(long, value_name = "BYTES", default_value = "1M",
          value_parser = size_in(16, 1 << 30))]
    max_frame: u64,

    /// Connections served at once; one more is accepted and closed at once
    /// (keep it below the open-files limit, `ulimit -n`)
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,

    /// Send and receive buffer of each connection (SO_SNDBUF/SO_RCVBUF),
    /// e.g. 64K; 0 leaves them to the kernel's autotuning (megabytes)
    #[arg(long, value_name = "BYTES", default_value = "64K",
          value_parser = size_in(0, 1 << 30))]
    socket_buffer: u64,

    /// Serve everything from one thread on epoll instead of the pools
    #[arg(long)]
    event_loop: bool,

    /// After a stop signal, keep delivering accepted messages for at most
    /// this many seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0,
          value_parser = seconds_in(0.0, 3600.0))]
    drain: f64,

    /// Print the final stats as one JSON object instead of a text line
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("broker", |cli: &Cli| {
        let cfg = mq::Config {
            listen: cli.listen,
            readers: cli.readers as usize,
            writers: cli.writers as usize,
            deliverers: cli.deliverers as usize,
            queues: cli.queues,
            capacity: cli.capacity as usize,
            outbox: cli.outbox as usize,
            max_frame: cli.max_frame,
            max_connections: cli.max_connections as usize,
            event_loop: cli.event_loop,
            drain: Duration::from_secs_f64(cli.drain),
            socket_buffer: cli.socket_buffer as usize,
        };
        mq::run(&cfg).and_then(|stats| {
            labkit::cli::emit(cli.json, &stats, |s| s.line() + "\n")
        })
    })
}
