//! A program the runner starts and talks to: a server that prints its
//! address on its first line, serves until SIGTERM, then prints its stats
//! as its last line (mq-sweep's broker, server-designs' servers).
//!
//! It runs as a tracked process group ([`labkit::cleanup`]): an interrupt
//! of `lab`, or an early return that drops it, stops and reaps it.

use std::io::{BufRead, BufReader, Read};
use std::process::{ChildStdout, Command, Stdio};

use labkit::cleanup::Tracked;
use labkit::{Error, Result};

pub struct Service {
    child: Tracked,
    stdout: BufReader<ChildStdout>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// What it printed first: the address it listens on.
    pub addr: String,
    /// Its name in messages ("broker T=10").
    what: String,
}

impl Service {
    /// Start `cmd` and read its address; a program that ends without one
    /// is an error with the last line it said.
    pub fn start(cmd: &mut Command, what: &str) -> Result<Service> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = labkit::cleanup::spawn(cmd)
            .map_err(|e| Error::io(format!("cannot start {what}"), e))?;
        let stdout = BufReader::new(child.take_stdout().expect("piped"));
        let stderr = labkit::cleanup::drain(child.take_stderr());
        let mut service = Service {
            child,
            stdout,
            stderr: Some(stderr),
            addr: String::new(),
            what: what.to_string(),
        };
        let mut addr = String::new();
        service
            .stdout
            .read_line(&mut addr)
            .map_err(|e| Error::io(format!("{what}: stdout"), e))?;
        if addr.trim().is_empty() {
            let _ = service.child.wait4();
            let said = service.said();
            let last = said.lines().last().unwrap_or("").trim().to_string();
            return Err(Error::failed(format!("{what} did not start: {last}")));
        }
        service.addr = addr.trim().to_string();
        Ok(service)
    }

    /// Stop it with SIGTERM, wait for it, and return its last line (the
    /// stats); exiting other than 0 is an error with what it said.
    pub fn stop(mut self) -> Result<String> {
        let what = self.what.clone();
        terminate(&self.child, &what)?;
        let mut rest = String::new();
        self.stdout
            .read_to_string(&mut rest)
            .map_err(|e| Error::io(format!("{what}: stdout"), e))?;
        let (status, _) =
            self.child.wait4().map_err(|e| Error::io(format!("{what}: wait"), e))?;
        let said = self.said();
        if !status.success() {
            let last = said.lines().last().unwrap_or("");
            return Err(Error::failed(format!("{what}: {status} {last}")));
        }
        Ok(rest.lines().last().unwrap_or("").to_string())
    }

    /// What it said on stderr, once it has ended.
    fn said(&mut self) -> String {
        let raw = self.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default();
        String::from_utf8_lossy(&raw).into_owned()
    }
}

/// Send `child` (named `what` in the error) SIGTERM: how the runner asks
/// a server it started to stop (a [`Service`], mq-sweep's Redis and NATS).
pub fn terminate(child: &Tracked, what: &str) -> Result<()> {
    let pid = nix::unistd::Pid::from_raw(child.pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).map_err(|e| {
        Error::failed(format!("kill {what}: {}", labkit::error::describe_errno(e)))
    })
}
