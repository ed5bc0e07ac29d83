//! The production brokers beside the lab's: `redis-server` (pub/sub) and
//! `nats-server` (core pub/sub), driven by the same `load` ([`mq::wire`]).
//!
//! Each run of a design starts one on a free loopback port, persistence off,
//! its configuration and log in a temporary directory, waits until it
//! answers (Redis's `PING`, NATS's `INFO`), and after the load stops it with
//! SIGTERM and reaps it: `wait4` gives the kernel's accounting of the whole
//! server, every thread included (CPU time, voluntary and involuntary
//! switches). It runs in a tracked process group with the death signal set,
//! so an interrupt of `lab`, a failed run, or a `kill -9` of `lab` leaves no
//! server running, and the directory goes with it.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use labkit::cleanup::{TempDir, Tracked};
use labkit::measure::Usage;
use labkit::{Error, Result};
use mq::wire::Wire;
use serde::Serialize;

/// The server the load speaks `kind`'s protocol to.
pub(super) fn program(kind: Wire) -> String {
    format!("{}-server", kind.name())
}

/// What to install where it is missing (Debian and Ubuntu).
pub(super) fn install(kind: Wire) -> String {
    format!("apt-get install {}", program(kind))
}

/// One server setting of the sweep: Redis's `io-threads` and
/// `io-threads-do-reads`, or NATS's `GOMAXPROCS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Setting {
    /// Redis or NATS, by its protocol (never the lab's).
    pub kind: Wire,
    /// io-threads, or GOMAXPROCS.
    pub threads: u32,
    /// Redis only: the I/O threads also read and parse (they always write).
    pub reads: bool,
}

impl Setting {
    /// Its condition, which the book's pointers name: `redis-1`,
    /// `redis-2-reads`, `nats-2`.
    pub(super) fn key(&self) -> String {
        let reads = if self.reads { "-reads" } else { "" };
        format!("{}-{}{reads}", self.kind.name(), self.threads)
    }

    /// How the tables name it.
    pub(super) fn label(&self) -> String {
        match (self.kind, self.threads, self.reads) {
            (Wire::Redis, 1, _) => {
                "Redis, io-threads 1 (all in the main thread)".into()
            }
            (Wire::Redis, t, true) => {
                format!("Redis, io-threads {t}, reads in them too")
            }
            (Wire::Redis, t, false) => format!("Redis, io-threads {t}, writes only"),
            (_, t, _) => format!("NATS, GOMAXPROCS {t}"),
        }
    }

    /// The settings as the server was given them, for the results.
    fn recorded(&self) -> Vec<(String, String)> {
        let threads = self.threads.to_string();
        let pairs = match self.kind {
            Wire::Redis => vec![
                ("io-threads", threads.as_str()),
                ("io-threads-do-reads", if self.reads { "yes" } else { "no" }),
                ("save", "\"\" (no snapshots)"),
                ("appendonly", "no"),
                ("client-output-buffer-limit pubsub", PUBSUB_LIMIT),
            ],
            _ => vec![
                ("GOMAXPROCS", threads.as_str()),
                ("max_payload", "1048576"),
                ("persistence", "none (core NATS, no JetStream)"),
            ],
        };
        pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

/// Redis drops a subscriber whose unsent replies pass 256 MiB, or stay
/// above 64 MiB for 60 s (its default is 32 MiB and 8 MiB): room for a
/// burst, and still a bound on the server's memory. A dropped subscriber's
/// messages count as lost.
const PUBSUB_LIMIT: &str = "256mb 64mb 60";

/// A server found on this machine.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(super) struct Installed {
    pub program: String,
    pub path: PathBuf,
    /// As it gave it: `7.0.15`, `2.9.10`.
    pub version: String,
}

/// What the results record of the server a design ran on.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(super) struct ServerInfo {
    pub program: String,
    pub version: String,
    pub settings: Vec<(String, String)>,
}

impl Installed {
    pub(super) fn info(&self, s: &Setting) -> ServerInfo {
        let (program, version) = (self.program.clone(), self.version.clone());
        ServerInfo { program, version, settings: s.recorded() }
    }
}

/// Find `kind`'s server: `$LAB_REDIS_SERVER` (or `$LAB_NATS_SERVER`) when
/// set, else the first on `PATH` or in the system's sbin folders (Debian
/// installs nats-server in /usr/sbin, which an ordinary user's `PATH` may
/// lack). `None`: not installed. A server that is there but cannot say its
/// version is an error.
pub(super) fn find(kind: Wire) -> Result<Option<Installed>> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let program = program(kind);
    let env = format!("LAB_{}_SERVER", kind.name().to_uppercase());
    let path = match std::env::var_os(env) {
        Some(p) => Some(PathBuf::from(p)).filter(|p| runnable(p)),
        None => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let sbin = ["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from);
            std::env::split_paths(&path)
                .chain(sbin)
                .map(|d| d.join(&program))
                .find(|p| runnable(p))
        }
    };
    let Some(path) = path else { return Ok(None) };
    let shown = path.display();
    let out = labkit::cleanup::output(Command::new(&path).arg("--version"))
        .map_err(|e| Error::io(format!("cannot run {shown} --version"), e))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = version_of(&text).ok_or_else(|| {
        let first = text.lines().next().unwrap_or("");
        Error::failed(format!("{shown} --version gave no version: {first:?}"))
    })?;
    Ok(Some(Installed { program, path, version }))
}

/// The version in `redis-server --version` (`Redis server v=7.0.15 sha=...`)
/// or `nats-server --version` (`nats-server: v2.9.10`).
fn version_of(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|w| {
        let v = w.strip_prefix("v=").or_else(|| w.strip_prefix('v'))?;
        v.starts_with(|c: char| c.is_ascii_digit()).then(|| v.to_string())
    })
}

/// A server running for one run.
pub(super) struct Server {
    kind: Wire,
    started: Instant,
    child: Option<Tracked>,
    pub port: u16,
    log: PathBuf,
    what: String,
    /// Its configuration and log; removed when the server is gone.
    _dir: TempDir,
}

/// How long a server may take to answer after it starts.
const START_WITHIN: Duration = Duration::from_secs(10);

impl Server {
    /// Start `installed` with `setting` on a free loopback port and wait
    /// until it answers. A port taken between the probe and the server's
    /// bind is tried again with another, twice.
    pub(super) fn start(installed: &Installed, setting: &Setting) -> Result<Server> {
        let mut tries = 0;
        loop {
            match Server::start_once(installed, setting) {
                Err(e) if e.message.contains("in use") && tries < 2 => tries += 1,
                done => return done,
            }
        }
    }

    fn start_once(installed: &Installed, setting: &Setting) -> Result<Server> {
        let what = format!("{} ({})", installed.program, setting.label());
        let program = program(setting.kind);
        let dir = labkit::cleanup::tempdir(&format!("lab-{program}-"))
            .map_err(|e| Error::io("cannot make a temporary directory", e))?;
        let port = free_port()?;
        let log = dir.path().join(format!("{program}.log"));
        let path = dir.path().join(format!("{}.conf", setting.kind.name()));
        let mut cmd = Command::new(&installed.path);
        let conf = match setting.kind {
            Wire::Redis => {
                cmd.arg(&path);
                format!(
                    "bind 127.0.0.1\nport {port}\nprotected-mode yes\ndaemonize no\n\
                 save \"\"\nappendonly no\ndir {dir}\nlogfile {log}\n\
                 io-threads {threads}\nio-threads-do-reads {reads}\n\
                 client-output-buffer-limit pubsub {PUBSUB_LIMIT}\n",
                    dir = dir.path().display(),
                    log = log.display(),
                    threads = setting.threads,
                    reads = if setting.reads { "yes" } else { "no" },
                )
            }
            _ => {
                cmd.arg("-c")
                    .arg(&path)
                    .env("GOMAXPROCS", setting.threads.to_string());
                format!(
                    "listen: \"127.0.0.1:{port}\"\nmax_payload: 1048576\nlog_file: \"{}\"\n",
                    log.display()
                )
            }
        };
        std::fs::write(&path, conf).map_err(|e| Error::io(path.display(), e))?;
        // Whatever it prints before its log is open goes to the log too.
        let out = File::create(dir.path().join("console.log"))
            .map_err(|e| Error::io("cannot create the server's console log", e))?;
        let err = out.try_clone().map_err(|e| Error::io("dup", e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = labkit::cleanup::spawn(&mut cmd)
            .map_err(|e| Error::io(format!("cannot start {what}"), e))?;
        let (kind, started) = (setting.kind, Instant::now());
        let mut server =
            Server { kind, started, child: Some(child), port, log, what, _dir: dir };
        server.wait_until_it_answers()?;
        Ok(server)
    }

    /// Poll until the server answers on its port; one that exits first, or
    /// says nothing by [`START_WITHIN`], is an error with its last line.
    fn wait_until_it_answers(&mut self) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.exited()? {
                self.child = None; // reaped
                let last = self.last_words();
                return Err(Error::failed(format!(
                    "{} exited at start ({status}): {last}",
                    self.what
                )));
            }
            if answers(self.kind, self.port) {
                return Ok(());
            }
            if start.elapsed() > START_WITHIN {
                return Err(Error::failed(format!(
                    "{} did not answer on 127.0.0.1:{} within {} s: {}",
                    self.what,
                    self.port,
                    START_WITHIN.as_secs(),
                    self.last_words()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its exit status, if it has ended (and is then reaped).
    fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        let child = self.child.as_mut().expect("running");
        child.try_wait().map_err(|e| Error::io(format!("{}: wait", self.what), e))
    }

    /// Stop it with SIGTERM and reap it: the kernel's accounting of it
    /// (`wait4`, every thread included), or an error if it had died already
    /// or ends other than by that signal or with 0.
    pub(super) fn stop(mut self) -> Result<Usage> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.exited()? {
            let last = self.last_words();
            return Err(Error::failed(format!(
                "{} had ended during the run ({status}): {last}",
                self.what
            )));
        }
        let mut child = self.child.take().expect("running");
        crate::service::terminate(&child, &self.what)?;
        let (status, ru) = child
            .wait4()
            .map_err(|e| Error::io(format!("{}: wait", self.what), e))?;
        // nats-server shuts down on SIGTERM and then exits with status 1
        // (its signal handler's os.Exit(1)), having logged "Server Exiting".
        let nats_done = self.kind == Wire::Nats
            && status.code() == Some(1)
            && self.last_words().contains("Exiting");
        if !(status.success() || status.signal() == Some(libc::SIGTERM) || nats_done)
        {
            let last = self.last_words();
            return Err(Error::failed(format!(
                "{} ended with {status} when stopped: {last}",
                self.what
            )));
        }
        Ok(labkit::measure::usage_from(self.started.elapsed(), &ru))
    }

    /// The last line of its log, or of what it printed before the log.
    fn last_words(&self) -> String {
        let console = self.log.with_file_name("console.log");
        [&self.log, &console]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .filter_map(|t| {
                t.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string)
            })
            .next()
            .unwrap_or_else(|| "it said nothing".into())
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::io("cannot find a free port on 127.0.0.1", e))?;
    Ok(l.local_addr().map_err(|e| Error::io("local address", e))?.port())
}

/// Does the server answer on `port`: Redis a `PING` with `+PONG`, NATS a
/// connection with its `INFO` line?
fn answers(kind: Wire, port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if kind == Wire::Redis && s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    let read = BufReader::new(&mut s).read_line(&mut line).is_ok();
    read && line.starts_with(if kind == Wire::Redis { "+PONG" } else { "INFO " })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_either_server() {
        let redis =
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64\n";
        assert_eq!(version_of(redis).as_deref(), Some("7.0.15"));
        assert_eq!(version_of("nats-server: v2.9.10\n").as_deref(), Some("2.9.10"));
        assert_eq!(version_of("nothing here\n"), None);
    }

    #[test]
    fn settings_have_keys_and_labels() {
        let r = Setting { kind: Wire::Redis, threads: 2, reads: true };
        assert_eq!(r.key(), "redis-2-reads");
        assert!(r.label().contains("io-threads 2"));
        assert!(
            r.recorded().contains(&("io-threads-do-reads".into(), "yes".into()))
        );
        let n = Setting { kind: Wire::Nats, threads: 1, reads: false };
        assert_eq!(n.key(), "nats-1");
        assert_eq!(n.recorded()[0], ("GOMAXPROCS".into(), "1".into()));
    }

    #[test]
    fn a_server_named_but_missing_is_not_installed() {
        let _serial = labtest::serial();
        // SAFETY: no other test of this binary reads or writes this
        // variable, and the ones that change the environment hold the lock.
        unsafe { std::env::set_var("LAB_NATS_SERVER", "/nonexistent/nats-server") };
        let found = find(Wire::Nats);
        // SAFETY: as above.
        unsafe { std::env::remove_var("LAB_NATS_SERVER") };
        assert!(found.unwrap().is_none());
    }
}
