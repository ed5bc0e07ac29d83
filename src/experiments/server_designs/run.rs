//! Running the servers and the client: one run, the probe, the loads the
//! designs are measured at, and the ports a run may use.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::engine::{Engine, setting};
use crate::service::Service;
use labkit::{Error, Result};
use servers::Design;

use super::{BASELINE, Load, MODERN_POOLED, Ports, Run, closed, overload};

/// The programs and the pool sizes.
pub(super) struct Ctx {
    pub(super) server: PathBuf,
    pub(super) client: PathBuf,
    pub(super) pool: u32,
    pub(super) modern_pool: u32,
    pub(super) byte_reads: bool,
}

impl Ctx {
    /// Start `server --design D` and read the address it prints: a
    /// running server, killed and reaped if a run fails half-way.
    fn start(&self, design: &str) -> Result<Service> {
        let modern = MODERN_POOLED.contains(&design);
        let options = servers::Options {
            pool: if modern { self.modern_pool } else { self.pool },
            byte_reads: self.byte_reads,
            json: true,
            ..server_design(design)?
        };
        let mut cmd = Command::new(&self.server);
        cmd.args(options.args());
        Service::start(&mut cmd, &format!("server --design {design}"))
    }

    /// Can this design start here? `Err(reason)` for one the kernel
    /// refuses (io_uring under seccomp, say); other designs must start.
    pub(super) fn probe(&self, design: &str) -> std::result::Result<(), String> {
        if design != "io-uring" {
            return Ok(());
        }
        // A server that starts is killed and reaped as it drops.
        self.start(design).map(drop).map_err(|e| e.message)
    }

    /// One run: start the server, run the client against it, stop the
    /// server with SIGTERM and read what it printed (CPU, meter).
    fn run_once(&self, design: &str, load: &Load) -> Result<Run> {
        let start = Instant::now();
        let server = self.start(design)?;
        let addr = server.addr.parse().map_err(|e| {
            Error::failed(format!(
                "server {design} printed no address ({e}): {:?}",
                server.addr
            ))
        })?;
        let options = servers::client::Options {
            children: load.children,
            loops: load.loops,
            bytes: load.bytes,
            rate: load.rate,
            json: true,
            ..servers::client::Options::new(addr)
        };
        let mut cmd = Command::new(&self.client);
        cmd.args(options.args());
        let output = labkit::cleanup::output(&mut cmd)
            .map_err(|e| Error::io("cannot run client", e))?;
        let client: servers::client::Report = serde_json::from_slice(&output.stdout)
            .map_err(|e| {
                let said = String::from_utf8_lossy(&output.stderr);
                Error::failed(format!(
                    "client against {design}: {e}: {}",
                    said.trim()
                ))
            })?;
        if client.error_total > 0 {
            return Err(Error::failed(format!(
                "client against {design}: {} connections failed or got a \
                 short reply",
                client.error_total
            )));
        }
        let last = server.stop()?;
        let wall = start.elapsed().as_secs_f64();
        let stats: servers::Stats =
            serde_json::from_str(&last).ok().ok_or_else(|| {
                Error::failed(format!("server {design} printed no stats"))
            })?;
        check(design, &stats, &client)?;
        Ok(Run { server: stats, client, server_wall_s: wall })
    }
}

/// The server's options for one of [`super::DESIGNS`]: the design of that
/// name, or for `epoll-herd`, the runner's own, epoll-exclusive with
/// `--herd` (without EPOLLEXCLUSIVE); every other flag at its default.
fn server_design(design: &str) -> Result<servers::Options> {
    if design == "epoll-herd" {
        let herd = servers::Options::new(Design::EpollExclusive);
        return Ok(servers::Options { herd: true, ..herd });
    }
    Design::ALL
        .into_iter()
        .find(|d| d.name() == design)
        .map(servers::Options::new)
        .ok_or_else(|| Error::failed(format!("no server design is named {design}")))
}

/// Nothing lost, nothing left: the server answered every request the
/// client counted and left no child or thread behind.
fn check(
    design: &str,
    s: &servers::Stats,
    c: &servers::client::Report,
) -> Result<()> {
    if s.requests != c.connections_ok || s.bad_connections != 0 {
        return Err(Error::failed(format!(
            "server {design}: answered {} requests ({} closed early); client got {}",
            s.requests, s.bad_connections, c.connections_ok
        )));
    }
    if s.children_left != 0 || s.threads_left != 0 {
        return Err(Error::failed(format!(
            "server {design} left {} children and {} threads",
            s.children_left, s.threads_left
        )));
    }
    Ok(())
}

/// The designs an open loop sweeps, at fractions of the best closed-loop
/// rate.
pub(super) const SWEPT: [&str; 6] =
    ["fork", "prefork", "thread", "prethread-mutex", "epoll", "tokio"];
const FRACTIONS: [f64; 4] = [0.25, 0.5, 0.75, 1.0];

/// Measure `conditions` (the baseline first, with one client making every
/// connection) under `load`; given `overloaded` clients (--full), also the
/// same with that many clients, and the open-loop sweep of [`SWEPT`].
pub(super) fn measure(
    engine: &mut Engine,
    ctx: &Ctx,
    conditions: &[&str],
    load: &Load,
    overloaded: Option<u32>,
) -> Result<()> {
    let swept: Vec<&str> =
        SWEPT.into_iter().filter(|d| conditions.contains(d)).collect();
    let mut runs = engine.runs_for(conditions.len());
    if overloaded.is_some() {
        runs += engine.runs_for(conditions.len());
        runs += FRACTIONS.len() * engine.runs_for(swept.len());
    }
    engine.progress(runs, super::EXPERIMENT.name);
    let total = u64::from(load.children) * load.loops;
    let closed_loop = |engine: &mut Engine, at, load: &Load| {
        let loops = u64::from(load.children) * load.loops;
        let base = Load { children: 1, loops, ..load.clone() };
        engine.measure(&at, conditions, |k| {
            ctx.run_once(
                conditions[k],
                if conditions[k] == BASELINE { &base } else { load },
            )
        })
    };
    closed_loop(engine, closed(), load)?;
    let Some(children) = overloaded else { return Ok(()) };
    let loops = (total / u64::from(children)).max(1);
    let over = Load { children, loops, ..load.clone() };
    closed_loop(engine, overload(children.into()), &over)?;
    let obs = engine.observations();
    let cps = |d: &&str| obs.median(&closed(), d, "connections_per_s");
    let best = conditions[1..].iter().filter_map(cps).fold(0.0, f64::max);
    for fraction in FRACTIONS.into_iter().filter(|_| !swept.is_empty()) {
        let rate = (best * fraction).max(1.0);
        let open = Load { rate: Some(rate), ..load.clone() };
        let at = setting([
            ("load", "open".into()),
            ("fraction", fraction.into()),
            ("offered_per_s", rate.into()),
        ]);
        engine.measure(&at, &swept, |k| ctx.run_once(swept[k], &open))?;
    }
    Ok(())
}

/// The ephemeral port range and whether TIME_WAIT ports are reused.
pub(super) fn ports() -> Ports {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let range: Vec<u32> = read("/proc/sys/net/ipv4/ip_local_port_range")
        .map(|t| t.split_whitespace().filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    let (low, high) = match range[..] {
        [l, h] if h >= l => (l, h),
        _ => (32768, 60999), // the kernel's default
    };
    Ports {
        low,
        high,
        count: high - low + 1,
        tw_reuse: read("/proc/sys/net/ipv4/tcp_tw_reuse")
            .and_then(|t| t.trim().parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_design_names_a_server_and_epoll_herd_is_the_runners_own() {
        for d in super::super::DESIGNS {
            let o = server_design(d).unwrap();
            assert_eq!(o.herd, *d == "epoll-herd", "{d}");
        }
        let o =
            servers::Options { json: true, ..server_design("epoll-herd").unwrap() };
        assert_eq!(
            labtest::line(o.args()),
            "--design epoll-exclusive --herd --json --pool 15"
        );
        assert!(server_design("epoll-flock").is_err());
    }
}
