//! serv01: fork a child per connection. The parent accepts, forks, closes
//! its copy of the connection and goes back to accept; the child closes
//! the listener, serves the client and exits. Stevens reaps the children in
//! a SIGCHLD handler; here SIGCHLD, like the stop signals, arrives on a
//! signalfd polled beside the listener, which does the same work without
//! an asynchronous handler. On a stop the children still serving finish
//! their connection (for at most `--timeout` and a second, then SIGTERM)
//! and every one is reaped before the CPU times are read.

use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd};

use labkit::error::{Error, Result, describe_errno};
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::prefork::{Children, serve};
use crate::{Config, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let mut mask = crate::stop_signals();
    mask.add(Signal::SIGCHLD);
    let flags = SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK;
    let signals = SignalFd::with_flags(&mask, flags)
        .map_err(|e| Error::failed(format!("signalfd: {}", describe_errno(e))))?;
    let mut kids = Children::default();
    let result = serve_until_stopped(cfg, &listener, &signals, &mut kids, meters);
    // The children still serving finish their connection.
    kids.wind_down(cfg.proto.timeout);
    result.map(|()| Outcome::default())
}

fn serve_until_stopped(
    cfg: &Config,
    listener: &TcpListener,
    signals: &SignalFd,
    kids: &mut Children,
    meters: &Meters,
) -> Result<()> {
    loop {
        let [conn, signal] =
            crate::wait_readable([listener.as_fd(), signals.as_fd()])?;
        if signal {
            while let Ok(Some(info)) = signals.read_signal() {
                if info.ssi_signo != Signal::SIGCHLD as u32 {
                    return Ok(());
                }
            }
            kids.reap_finished();
        }
        if !conn {
            continue;
        }
        // ANCHOR: accept_fork
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) => {
                crate::accept_failed(&e);
                continue;
            }
        };
        meters.accepted(0);
        let body = || {
            // The child: close the listener, serve, exit.
            // SAFETY: close(2) of the child's copy of the listener, which
            // the child never uses again.
            unsafe { libc::close(listener.as_raw_fd()) };
            serve(&stream, cfg, meters, 0);
        };
        // SAFETY: `body` is async-signal-safe and allocates nothing: close,
        // then `serve` (setsockopt, recv, send, close, atomics in the
        // shared meters, `say`'s one write from a stack buffer).
        let forked = unsafe { kids.fork(body) };
        drop(stream); // the parent's copy
        // ANCHOR_END: accept_fork
        if let Err(e) = forked {
            // EAGAIN at the process limit: this client is dropped, the
            // server goes on (and the children it has finish).
            crate::say(&[e.message.as_bytes(), b"; connection dropped"]);
        }
    }
}
