//! Running the sweep's programs: the broker and the load generator, and
//! `ctxswitch` for the cost of one switch when no ctx-switch results give
//! it. Every program's output is read as that program's own type.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ctxswitch::{Mode, Pin};
use labkit::{Error, Result};
use mq::Stats;
use mq::load::LoadReport;

use mq::wire::Wire;

use super::servers::{Installed, Server, Setting};
use super::{Args, Offer, Run, SwitchCost};
use crate::experiments::ctx_switch;

/// `broker` and `load`, the two binaries of the package `mq`.
pub(super) fn programs() -> Result<Vec<PathBuf>> {
    crate::bins::package_programs("mq", &["broker", "load"])
}

// ANCHOR: run_once
/// One run: start the broker, run the load generator against it, stop the
/// broker with SIGTERM and read its final stats (CPU time, switches).
pub(super) fn run_once(
    broker: &Path,
    load: &Path,
    threads: Option<u32>,
    a: &Args,
    duration: f64,
    offer: Offer,
) -> Result<Run> {
    let mut cmd = Command::new(broker);
    match threads {
        Some(t) => {
            let t = t.to_string();
            cmd.args(["--readers", &t, "--writers", &t, "--deliverers", &t]);
        }
        None => {
            cmd.arg("--event-loop");
        }
    }
    cmd.args(["--queues", &a.shape.queues.to_string(), "--json"]);
    let what =
        threads.map_or("broker --event-loop".into(), |t| format!("broker T={t}"));
    let start = Instant::now();
    let broker = crate::service::Service::start(&mut cmd, &what)?;
    let load = run_load(load, &broker.addr, Wire::Lab, a, duration, offer, &what)?;
    // SIGTERM: the broker delivers what it holds, joins its threads and
    // prints its stats.
    let last = broker.stop()?;
    let wall = start.elapsed().as_secs_f64();
    // The broker's --json stats, as its own type; a missing or damaged
    // line is an error that shows what came instead.
    let stats: Stats = serde_json::from_str(&last).map_err(|e| {
        Error::failed(format!("{what}: no JSON stats line ({e}): {last:?}"))
    })?;
    if stats.messages_out != load.received || stats.messages_in != load.sent {
        return Err(Error::failed(format!(
            "{what}: broker says {} in, {} out; load says {} sent, {} received",
            stats.messages_in, stats.messages_out, load.sent, load.received
        )));
    }
    Ok(Run { load, broker: Some(stats), server: None, broker_wall_s: wall })
}
// ANCHOR_END: run_once

/// `load` against `addr` in `wire`'s protocol, with the sweep's shape,
/// duration and rate; a failed load is an error with its last line.
fn run_load(
    load: &Path,
    addr: &str,
    wire: Wire,
    a: &Args,
    duration: f64,
    offer: Offer,
    what: &str,
) -> Result<LoadReport> {
    let mut cmd = Command::new(load);
    cmd.args(["--addr", addr, "--json", "--protocol", wire.name()])
        .args(a.shape.args())
        .args(["--duration", &duration.to_string()])
        .args(["--rate", &offer.rate.to_string()])
        .args(["--pipeline", &offer.pipeline.to_string()]);
    let output =
        labkit::cleanup::output(&mut cmd).map_err(|e| Error::io("cannot run load", e))?;
    let said = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(Error::failed(format!(
            "load against {what}: {} {}",
            output.status,
            said.lines().last().unwrap_or("")
        )));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::failed(format!("load against {what}: bad JSON: {e}")))
}

/// One run on Redis or NATS: start the server for this point, run the same
/// load against it in its protocol, stop and reap it, and take its CPU
/// time and switches from the kernel's accounting of it.
pub(super) fn run_server(
    installed: &Installed,
    setting: &Setting,
    load: &Path,
    a: &Args,
    duration: f64,
    offer: Offer,
) -> Result<Run> {
    let what = setting.label();
    let start = Instant::now();
    let server = Server::start(installed, setting)?;
    let addr = format!("127.0.0.1:{}", server.port);
    // A failed load drops the server: stopped, reaped, its folder gone.
    let load =
        run_load(load, &addr, setting.kind.wire(), a, duration, offer, &what)?;
    let usage = server.stop()?;
    Ok(Run {
        load,
        broker: None,
        server: Some(usage),
        broker_wall_s: start.elapsed().as_secs_f64(),
    })
}

/// The floor of the work itself for `pipeline` messages per write: `load
/// --floor` (no broker), for `duration` seconds.
pub(super) fn run_floor(
    load: &Path,
    a: &Args,
    pipeline: u32,
    duration: f64,
) -> Result<mq::load::FloorReport> {
    let mut cmd = Command::new(load);
    cmd.args(["--floor", "--json", "--size", &a.shape.size.to_string()])
        .args(["--pipeline", &pipeline.to_string()])
        .args(["--duration", &duration.to_string()]);
    let output =
        labkit::cleanup::output(&mut cmd).map_err(|e| Error::io("cannot run load", e))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        return Err(Error::failed(format!(
            "load --floor: {} {}",
            output.status,
            said.lines().last().unwrap_or("")
        )));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::failed(format!("load --floor: bad JSON: {e}")))
}

/// The cost of one switch: given with `--switch-cost-us`, read from the
/// ctx-switch results named with `--switch-cost-from` (or else this run's,
/// never another run's), or measured with `ctxswitch`. A figure that
/// cannot be had is an error, never a zero.
pub(super) fn switch_cost(args: &Args, run: Option<&Path>) -> Result<SwitchCost> {
    if let Some(us) = args.switch_cost_us {
        return Ok(SwitchCost { us, source: "given with --switch-cost-us".into() });
    }
    if let Some(path) = &args.switch_cost_from {
        return from_ctx_switch(path);
    }
    match crate::runs::earlier_result(run, "ctx-switch") {
        Some(path) => from_ctx_switch(&path).or_else(|e| {
            eprintln!(
                "lab: note: {}; measuring it with ctxswitch instead",
                e.message
            );
            measure_switch()
        }),
        None => measure_switch(),
    }
}

/// Microseconds per switch from a ctx-switch results file: threads pinned
/// to one CPU (there the time per switch is CPU time; unpinned figures
/// include waiting for the other CPU to wake), else unpinned, with the pipe
/// calls' own cost subtracted when that is positive.
pub(super) fn from_ctx_switch(path: &Path) -> Result<SwitchCost> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    let unusable = |why: String| {
        Error::failed(format!(
            "{}: no cost of one switch in it: {why}",
            path.display()
        ))
    };
    let data: ctx_switch::Data =
        serde_json::from_str(&text).map_err(|e| unusable(e.to_string()))?;
    let (us, key, pin) = switch_cost_of(&data)
        .ok_or_else(|| unusable("no threads cell with a positive cost".into()))?;
    Ok(SwitchCost {
        us,
        source: format!(
            "from the ctx-switch results (threads, pin {}, {key})",
            pin.name()
        ),
    })
}

/// The best cell of ctx-switch results for the sweep: threads on one CPU,
/// else unpinned; its net cost per switch if positive, else the raw one.
pub(super) fn switch_cost_of(data: &ctx_switch::Data) -> Option<(f64, &str, Pin)> {
    let usable = |v: f64| (v.is_finite() && v > 0.0).then_some(v);
    [Pin::Same, Pin::None].into_iter().find_map(|pin| {
        let c =
            data.cells.iter().find(|c| c.mode == Mode::Threads && c.pin == pin)?;
        match (usable(c.net_us_per_switch), usable(c.us_per_switch)) {
            (Some(us), _) => Some((us, "net_us_per_switch", pin)),
            (None, Some(us)) => Some((us, "us_per_switch", pin)),
            _ => None,
        }
    })
}

/// Round trips of the fallback measurement.
const ROUND_TRIPS: u64 = 20_000;

// ANCHOR: measure_switch
/// No ctx-switch results: run `ctxswitch --mode threads --pin same` (two
/// threads pinned to one CPU bouncing a byte over two pipes) once. On one
/// CPU the processor is busy the whole time, so the time per switch is
/// also CPU time per switch; the pipe calls' own cost is subtracted
/// (lmbench's way) when that leaves a positive figure. If it fails, or the
/// kernel's switch count disagrees with the method, there is no figure:
/// an error that says how to give one.
fn measure_switch() -> Result<SwitchCost> {
    measure_switch_with(&crate::bins::programs(&["ctxswitch"])?.remove(0))
}

fn measure_switch_with(program: &Path) -> Result<SwitchCost> {
    let fail = |why: String| {
        Error::failed(format!(
            "cannot measure the cost of one switch: {why}; run `lab run \
             ctx-switch` first, or give --switch-cost-us"
        ))
    };
    let r = ctx_switch::ctxswitch_once(
        program,
        Mode::Threads,
        Pin::Same,
        None,
        ROUND_TRIPS,
    )
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
             trips, {how} (no usable ctx-switch results)",
            r.iterations
        ),
    })
}
// ANCHOR_END: measure_switch

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ctx_switch::{Cell, Data, PerfInfo};
    use crate::stats::Summary;

    fn cell(mode: Mode, pin: Pin, net: f64, raw: f64) -> Cell {
        let s = Summary::of(&[2.0 * raw]).unwrap();
        Cell {
            mode,
            pin,
            iterations: 10,
            cpus: None,
            us_per_switch: raw,
            net_us_per_switch: net,
            us_per_round_trip: s,
            pipe_us: s,
            kernel_switches_per_round_trip: s,
            counts_hold: true,
            perf: None,
            vs_perf: None,
            runs: Vec::new(),
        }
    }

    fn data(cells: Vec<Cell>) -> Data {
        Data {
            iterations: 10,
            rounds: 1,
            full: false,
            perf: PerfInfo { used: false, version: None, note: String::new() },
            us_per_switch: Default::default(),
            net_us_per_switch: Default::default(),
            cells,
            skipped: Vec::new(),
        }
    }

    #[test]
    fn the_switch_cost_prefers_threads_on_one_cpu_net_of_the_pipe() {
        let d = data(vec![
            cell(Mode::Processes, Pin::Same, 9.0, 9.5),
            cell(Mode::Threads, Pin::None, 2.5, 3.0),
            cell(Mode::Threads, Pin::Same, 1.5, 2.0),
            cell(Mode::Threads, Pin::Cross, 90.0, 95.0),
        ]);
        assert_eq!(switch_cost_of(&d), Some((1.5, "net_us_per_switch", Pin::Same)));
    }

    #[test]
    fn the_switch_cost_falls_back_and_refuses_nonsense() {
        // A net figure that came out negative: the raw one is used.
        let d = data(vec![cell(Mode::Threads, Pin::None, -0.2, 1.75)]);
        assert_eq!(switch_cost_of(&d), Some((1.75, "us_per_switch", Pin::None)));
        let d = data(vec![cell(Mode::Threads, Pin::Same, 0.0, f64::NAN)]);
        assert_eq!(switch_cost_of(&d), None);
        let d = data(vec![cell(Mode::Processes, Pin::Same, 3.0, 3.0)]);
        assert_eq!(switch_cost_of(&d), None);
        assert_eq!(switch_cost_of(&data(Vec::new())), None);
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
        let e = measure_switch_with(&crashed).unwrap_err();
        assert!(e.message.starts_with("cannot measure the cost of one switch: "));
        assert!(e.message.contains("ctxswitch: boom"), "{}", e.message);
        assert!(e.message.ends_with("or give --switch-cost-us"), "{}", e.message);
        // The kernel's count disagreed: ctxswitch printed figures and exit 1.
        let mut report = ctxswitch::Report {
            mode: Mode::Threads,
            pin: Pin::Same,
            cpus: Some([0, 0]),
            last_cpus: [0, 0],
            iterations: ROUND_TRIPS,
            warmup: 1000,
            elapsed_s: 0.1,
            us_per_round_trip: 4.0,
            us_per_switch: 2.0,
            pipe_us: 0.5,
            net_us_per_round_trip: 3.0,
            net_us_per_switch: 1.5,
            switches: ctxswitch::Switches {
                expected: 42_000,
                voluntary: 21_000,
                involuntary: 0,
                per_round_trip: 1.0,
                holds: false,
            },
        };
        let json = serde_json::to_string(&report).unwrap();
        let off = fake_ctxswitch(dir.path(), &json, "ctxswitch: mismatch", 1);
        let e = measure_switch_with(&off).unwrap_err();
        assert!(e.message.contains("counted 1.00 switches per round trip"), "{e:?}");
        // And when it holds, the net figure is the cost.
        report.switches.holds = true;
        let json = serde_json::to_string(&report).unwrap();
        let good = fake_ctxswitch(dir.path(), &json, "", 0);
        let cost = measure_switch_with(&good).unwrap();
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
