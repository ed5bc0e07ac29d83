//! Benchmark: what connections that stop in the middle of a frame cost the
//! broker. Starts the broker given (with its flags), opens N connections
//! that each say HELLO_SEND, announce a frame of 1 MiB - 1 bytes and send
//! BODY bytes of it, then prints the broker's RSS before and after, and its
//! stats line (connections served, refused).
//!
//! ```text
//! cargo run --release -p mq --example unfinished_frames -- \
//!     300 100 target/release/broker --event-loop
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(body), Some(broker)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.get(2),
    ) else {
        eprintln!(
            "usage: unfinished_frames CONNECTIONS BODY_BYTES BROKER [FLAGS...]"
        );
        return std::process::ExitCode::from(2);
    };
    let mut child = match Command::new(broker)
        .args(&args[3..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("unfinished_frames: cannot start {broker}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut addr = String::new();
    let _ = out.read_line(&mut addr);
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_kib(child.id());
    let length: u32 = (1 << 20) - 1;
    let mut frame = vec![0, 0, 0, 1, mq::protocol::HELLO_SEND];
    frame.extend(length.to_be_bytes());
    frame.extend([mq::protocol::PUBLISH, 0, 0]);
    frame.resize(frame.len() + body.min(length as usize - 3), 7);
    let mut held = Vec::new();
    for _ in 0..n {
        match TcpStream::connect(addr.trim()) {
            Ok(mut s) => {
                let _ = s.write_all(&frame);
                held.push(s);
            }
            Err(e) => eprintln!("unfinished_frames: connect: {e}"),
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_kib(child.id());
    // SAFETY: kill(2) on the child we started and have not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let _ = child.wait();
    drop(held);
    println!(
        "{n} connections x {body} of {length} announced bytes: broker RSS {:.1} MiB \
         before, {:.1} MiB after ({:+.1} MiB)\n{}",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after as f64 - before as f64) / 1024.0,
        rest.trim()
    );
    std::process::ExitCode::SUCCESS
}
