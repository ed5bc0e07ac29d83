//! `client --addr A --children 5 --loops 500 --bytes 4000`: see
//! `servers::client`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

/// Stevens' client: CHILDREN concurrent clients each connect LOOPS times,
/// ask for BYTES bytes, check every byte and close. Closed-loop by default;
/// with --rate, open-loop with latency counted from the intended start.
/// Exit status: 0 every reply exact, 1 some connection failed or a reply
/// was short or wrong, 2 bad usage.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The server's address
    #[arg(long)]
    addr: SocketAddr,

    /// Concurrent clients
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    children: u32,

    /// Connections per client
    #[arg(long, default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    loops: u64,

    /// Bytes to ask for per connection
    #[arg(long, default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    bytes: u64,

    /// Open loop: connections per second for all clients together
    #[arg(long, value_name = "CONN_PER_S", value_parser = rate)]
    rate: Option<f64>,

    /// Seconds to wait for a connect, a write or the reply
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = rate)]
    timeout: f64,

    /// Print the report as one JSON object
    #[arg(long)]
    json: bool,
}

fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1e9 => Ok(r),
        _ => Err(format!("'{text}' is not a positive number")),
    }
}

fn main() -> std::process::ExitCode {
    labkit::cli::main("client", |cli: &Cli| {
        let cfg = servers::client::Config {
            addr: cli.addr,
            children: cli.children as usize,
            loops: cli.loops,
            bytes: cli.bytes as usize,
            rate: cli.rate,
            timeout: Duration::from_secs_f64(cli.timeout),
        };
        servers::client::run(&cfg).and_then(|report| {
            labkit::cli::emit(cli.json, &report, servers::client::Report::text)?;
            match report.error_total {
                0 => Ok(()),
                n => Err(labkit::Error::failed(format!(
                    "{n} of {} connections failed or got a short or wrong reply",
                    n + report.connections_ok
                ))),
            }
        })
    })
}
