//! Running the sweep's programs: the broker (or a server) and the load
//! generator for each run of a design, `load --floor` for the floor, and
//! `ctxswitch` for the cost of one switch just before each run of a design
//! (unless a cost is given). Each program's output is read as its own type.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use labkit::{Error, Result};
use mq::Stats;
use mq::load::LoadReport;
use mq::wire::Wire;

use super::servers::Server;
use super::{Args, Design, FLOOR, Found, Offer, Point, Run, SwitchCost};
use crate::engine::{Engine, Observed};
use crate::experiments::ctx_switch::ctxswitch_once;
use crate::report::Published;

/// What every run runs on: the programs, the flags, the servers found,
/// the seconds of sending and the cost of one switch: given, or measured
/// with `ctxswitch` just before each run, so that a run's share is
/// reckoned at what a switch cost on the machine as it then ran.
pub(super) struct Sweep<'a> {
    pub bins: &'a [PathBuf],
    pub args: &'a Args,
    pub installed: &'a [Found],
    pub duration: f64,
    pub cost: Cost,
}

/// The cost of one switch a run's share is reckoned at.
pub(super) enum Cost {
    /// Given (`--switch-cost-us`, `--switch-cost-from`), in µs.
    Given(f64),
    /// Measured with this `ctxswitch` just before each run.
    Measured(PathBuf),
}

impl Sweep<'_> {
    /// Measure `designs` (and the floor, if asked) at `offer`: each a
    /// condition, every round running each once, in the engine's order.
    pub(super) fn measure(
        &self,
        engine: &mut Engine,
        offer: Offer,
        designs: &[Design],
        floor: bool,
    ) -> Result<()> {
        let mut names: Vec<&str> =
            designs.iter().map(|d| d.condition.as_str()).collect();
        names.extend(floor.then_some(FLOOR));
        // A design's run or the floor's, each with metrics of its own.
        engine.measure(&offer.at(), &names, |k| -> Result<Box<dyn Observed>> {
            match designs.get(k) {
                Some(d) => Ok(Box::new(self.run(d.point, offer)?)),
                None => Ok(Box::new(self.floor(offer.pipeline)?)),
            }
        })?;
        Ok(())
    }

    /// One run: start the broker (or the server), run the load generator
    /// against it, stop it with SIGTERM and take its accounting: the lab
    /// broker's final stats (CPU time, switches, messages, checked against
    /// the load's), or the kernel's of the server (`wait4`).
    fn run(&self, p: Point, offer: Offer) -> Result<Run> {
        let cost = match &self.cost {
            Cost::Given(us) => *us,
            Cost::Measured(ctxswitch) => measure_switch(ctxswitch)?.us,
        };
        let start = Instant::now();
        let run = |load, broker, server| Run {
            load,
            broker,
            server,
            broker_wall_s: start.elapsed().as_secs_f64(),
            switch_cost_us: cost,
        };
        let queues = self.args.shape.queues;
        let mut options = mq::Options { queues, json: true, ..Default::default() };
        let what = match p {
            Point::Pool(t) => {
                (options.readers, options.writers, options.deliverers) = (t, t, t);
                format!("broker T={t}")
            }
            Point::EventLoop => {
                options.event_loop = true;
                "broker --event-loop".into()
            }
            Point::Server(s) => {
                // A failed load drops the server: stopped, reaped, its
                // folder gone.
                let inst = self.installed.iter().find(|(k, _)| *k == s.kind);
                let server = Server::start(&inst.expect("found").1, &s)?;
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, server.port));
                let load = self.load(addr, s.kind, offer, &s.label())?;
                return Ok(run(load, None, Some(server.stop()?)));
            }
        };
        let mut cmd = Command::new(&self.bins[0]);
        cmd.args(options.args());
        let broker = crate::service::Service::start(&mut cmd, &what)?;
        let printed = &broker.addr;
        let addr = printed.parse().map_err(|e| {
            Error::failed(format!("{what} printed no address ({e}): {printed:?}"))
        })?;
        let load = self.load(addr, Wire::Lab, offer, &what)?;
        // SIGTERM: the broker delivers what it holds, joins its threads and
        // prints its stats, as its own type; a missing or damaged line is
        // an error that shows what came instead.
        let last = broker.stop()?;
        let stats: Stats = serde_json::from_str(&last).map_err(|e| {
            Error::failed(format!("{what}: no JSON stats line ({e}): {last:?}"))
        })?;
        if stats.messages_out != load.received || stats.messages_in != load.sent {
            return Err(Error::failed(format!(
                "{what}: broker says {} in, {} out; load says {} sent, {} received",
                stats.messages_in, stats.messages_out, load.sent, load.received
            )));
        }
        Ok(run(load, Some(stats), None))
    }

    /// `load` against `addr` in `wire`'s protocol, with the sweep's shape,
    /// duration and the offer; a failed load is an error with its last
    /// line, and so is a report in another protocol than asked.
    fn load(
        &self,
        addr: SocketAddr,
        wire: Wire,
        offer: Offer,
        what: &str,
    ) -> Result<LoadReport> {
        let options = mq::load::Options {
            json: true,
            protocol: wire,
            shape: self.args.shape.clone(),
            duration: self.duration,
            rate: f64::from(offer.rate),
            pipeline: offer.pipeline,
            ..mq::load::Options::against(addr)
        };
        let mut cmd = Command::new(&self.bins[1]);
        cmd.args(options.args());
        let (report, _): (LoadReport, _) =
            crate::bins::run_json(cmd, &format!("load against {what}"))?;
        if report.protocol != wire {
            return Err(Error::failed(format!(
                "load against {what} spoke {}, not {}",
                report.protocol.name(),
                wire.name()
            )));
        }
        Ok(report)
    }

    /// The floor of the work itself for `pipeline` messages per write:
    /// `load --floor` (no broker), for at most a second.
    fn floor(&self, pipeline: u32) -> Result<mq::load::FloorReport> {
        let mut options = mq::load::Options {
            json: true,
            pipeline,
            duration: self.duration.min(1.0),
            ..mq::load::Options::without_broker()
        };
        options.shape.size = self.args.shape.size;
        let mut cmd = Command::new(&self.bins[1]);
        cmd.args(options.args());
        Ok(crate::bins::run_json(cmd, "load --floor")?.0)
    }
}

/// The cost of one switch when it is given: with `--switch-cost-us`, or
/// read from the ctx-switch results named with `--switch-cost-from`.
/// `None`: the sweep measures it before each run ([`Cost::Measured`]).
pub(super) fn given_switch_cost(args: &Args) -> Result<Option<SwitchCost>> {
    if let Some(us) = args.switch_cost_us {
        let source = "given with --switch-cost-us".into();
        return Ok(Some(SwitchCost { us, source }));
    }
    args.switch_cost_from.as_deref().map(from_ctx_switch).transpose()
}

/// What the sweep says of the costs it measured before its runs: their
/// median, and how they were had.
pub(super) fn measured_switch_cost(costs: &[f64]) -> SwitchCost {
    SwitchCost {
        us: crate::stats::median(costs),
        source: format!(
            "measured just before each of the {} runs: ctxswitch, two threads \
             pinned to one CPU, {ROUND_TRIPS} round trips, minus the pipe calls' \
             own cost (the median; each run's share is reckoned at its own)",
            costs.len()
        ),
    }
}

/// Microseconds per switch from a ctx-switch results file's headline
/// figures (each the median of its rounds), as [`switch_cost_of`] picks.
pub(super) fn from_ctx_switch(path: &Path) -> Result<SwitchCost> {
    let name = path.display();
    if !path.is_file() {
        let what = if path.is_dir() {
            "a folder, not a results file"
        } else {
            "no such file"
        };
        return Err(Error::usage(format!("--switch-cost-from {name}: {what}")));
    }
    let unusable = |why: String| {
        Error::failed(format!("{name}: no cost of one switch in it: {why}"))
    };
    let doc = crate::document::Document::read(path)
        .map_err(|e| unusable(e.message))?
        .ok_or_else(|| unusable("no such file".into()))?;
    let published = Published::of(&doc).map_err(|e| unusable(e.message))?;
    let figure = |key: &str| Some(published.figure(key).ok()??.value);
    let (us, key, pin) = switch_cost_of(figure)
        .ok_or_else(|| unusable("no threads figure with a positive cost".into()))?;
    Ok(SwitchCost {
        us,
        source: format!("from the ctx-switch results (threads, pin {pin}, {key})"),
    })
}

/// The best of ctx-switch's figures (`figure(key)`) for the sweep: threads
/// pinned to one CPU (there the time per switch is CPU time; unpinned
/// figures include waiting for the other CPU to wake), else unpinned; the
/// net cost per switch if positive, else the raw one. The figure, which it
/// is, and the placement.
pub(super) fn switch_cost_of(
    figure: impl Fn(&str) -> Option<f64>,
) -> Option<(f64, &'static str, &'static str)> {
    let usable = |pin: &str, key: &str| {
        figure(&format!("threads_{pin}_{key}")).filter(|v| v.is_finite() && *v > 0.0)
    };
    ["same", "none"].into_iter().find_map(|pin| {
        let net = usable(pin, "net_us").map(|us| (us, "net_us_per_switch", pin));
        net.or_else(|| usable(pin, "us").map(|us| (us, "us_per_switch", pin)))
    })
}

/// Round trips of each measurement with `ctxswitch`.
const ROUND_TRIPS: u64 = 20_000;

/// Run `ctxswitch --mode threads --pin same` (two threads pinned to one CPU
/// bouncing a byte over two pipes) once. On one CPU the processor is busy
/// the whole time, so the time per switch is also CPU time per switch; the
/// pipe calls' own cost is subtracted (lmbench's way) when that leaves a
/// positive figure. If it fails, or the kernel's switch count disagrees
/// with the method, there is no figure: an error that says how to give one.
fn measure_switch(program: &Path) -> Result<SwitchCost> {
    use ctxswitch::{Mode, Pin};
    let fail = |why: String| {
        Error::failed(format!(
            "cannot measure the cost of one switch: {why}; give it with \
             --switch-cost-us, or --switch-cost-from a ctx-switch run's results"
        ))
    };
    let r = ctxswitch_once(program, Mode::Threads, Pin::Same, None, ROUND_TRIPS)
        .map_err(|e| fail(e.message))?;
    if !r.switches.holds {
        return Err(fail(format!(
            "the kernel counted {:.2} switches per round trip, not 2",
            r.switches.per_round_trip
        )));
    }
    let (us, how) = if r.net_us_per_switch > 0.0 {
        (r.net_us_per_switch, "minus the pipe calls' own cost")
    } else {
        (r.us_per_switch, "raw, half a round trip")
    };
    let cpu = r.cpus.map_or("?".into(), |[a, _]| a.to_string());
    Ok(SwitchCost {
        us,
        source: format!(
            "measured here: ctxswitch, two threads pinned to CPU {cpu}, {} round \
             trips, {how}",
            r.iterations
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ctx-switch's headline figures for threads: (pin, net, raw).
    fn figures(cells: &[(&str, f64, f64)]) -> impl Fn(&str) -> Option<f64> {
        let mut map = std::collections::BTreeMap::new();
        for &(pin, net, raw) in cells {
            map.insert(format!("threads_{pin}_net_us"), net);
            map.insert(format!("threads_{pin}_us"), raw);
        }
        // Processes pinned to one CPU: never the sweep's cost.
        map.insert("processes_same_net_us".into(), 9.0);
        move |key: &str| map.get(key).copied()
    }

    #[test]
    fn the_switch_cost_prefers_threads_on_one_cpu_net_of_the_pipe() {
        let f = figures(&[
            ("none", 2.5, 3.0),
            ("same", 1.5, 2.0),
            ("cross", 90.0, 95.0),
        ]);
        assert_eq!(switch_cost_of(f), Some((1.5, "net_us_per_switch", "same")));
    }

    #[test]
    fn the_switch_cost_falls_back_and_refuses_nonsense() {
        // A net figure that came out negative: the raw one is used.
        let f = figures(&[("none", -0.2, 1.75)]);
        assert_eq!(switch_cost_of(f), Some((1.75, "us_per_switch", "none")));
        assert_eq!(switch_cost_of(figures(&[("same", 0.0, f64::NAN)])), None);
        assert_eq!(switch_cost_of(figures(&[])), None);
    }

    /// A stand-in for ctxswitch: a shell script that prints `stdout` and
    /// `stderr` and exits with `code`.
    fn fake_ctxswitch(dir: &Path, stdout: &str, stderr: &str, code: i32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("ctxswitch");
        let script = format!(
            "#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\necho '{stderr}' >&2\nexit {code}\n"
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap();
        path
    }

    #[test]
    fn a_failed_measurement_is_an_error_never_a_zero_cost() {
        let dir = labtest::tempdir();
        let crashed = fake_ctxswitch(dir.path(), "", "ctxswitch: boom", 1);
        let e = measure_switch(&crashed).unwrap_err();
        assert!(e.message.starts_with("cannot measure the cost of one switch: "));
        assert!(e.message.contains("ctxswitch: boom"), "{}", e.message);
        assert!(e.message.ends_with("a ctx-switch run's results"), "{}", e.message);
        // The kernel's count disagreed: ctxswitch printed figures and exit 1.
        let report = |holds: bool| {
            let switches = serde_json::json!({"expected": 42_000, "voluntary": 21_000,
                "involuntary": 0, "per_round_trip": 1.0, "holds": holds});
            let r = serde_json::json!({"mode": "threads", "pin": "same", "cpus": [0, 0],
                "last_cpus": [0, 0], "iterations": ROUND_TRIPS, "warmup": 1000, "elapsed_s": 0.1,
                "us_per_round_trip": 4.0, "us_per_switch": 2.0, "pipe_us": 0.5,
                "net_us_per_round_trip": 3.0, "net_us_per_switch": 1.5, "switches": switches});
            // As ctxswitch prints its own report.
            let r: ctxswitch::Report = serde_json::from_value(r).unwrap();
            serde_json::to_string(&r).unwrap()
        };
        let off =
            fake_ctxswitch(dir.path(), &report(false), "ctxswitch: mismatch", 1);
        let e = measure_switch(&off).unwrap_err();
        assert!(e.message.contains("counted 1.00 switches per round trip"), "{e:?}");
        // And when it holds, the net figure is the cost.
        let good = fake_ctxswitch(dir.path(), &report(true), "", 0);
        let cost = measure_switch(&good).unwrap();
        assert_eq!(cost.us, 1.5);
        assert!(
            cost.source.starts_with("measured here: ctxswitch"),
            "{}",
            cost.source
        );
    }

    #[test]
    fn a_results_file_that_is_not_ctx_switch_results_is_an_error() {
        let dir = labtest::tempdir();
        let path = dir.path().join("ctx-switch.json");
        for text in ["", "{", r#"{"experiment": "ctx-switch"}"#] {
            std::fs::write(&path, text).unwrap();
            let e = from_ctx_switch(&path).unwrap_err();
            assert!(e.message.contains("no cost of one switch in it"), "{e:?}");
        }
        let e = from_ctx_switch(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.message.contains("missing.json"), "{e:?}");
    }
}
