//! serv00: the iterative server, Stevens' baseline. One process, one
//! connection at a time: accept, serve to the end, close, accept again.
//! Whatever CPU it spends is the protocol's own (accept, read, write,
//! close); every other design's "process control" CPU is measured above it.
//!
//! The stop signals arrive on a signalfd polled beside the listener, so a
//! stop waits at most for the connection being served, and that one for at
//! most `--timeout` (a client that never sends is cut off then).

use std::net::TcpListener;
use std::os::fd::AsFd;

use labkit::error::{Error, Result, describe_errno};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::protocol::{self, Served};
use crate::{Config, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let stop = SignalFd::with_flags(&crate::stop_signals(), SfdFlags::SFD_CLOEXEC)
        .map_err(|e| {
        Error::failed(format!("signalfd: {}", describe_errno(e)))
    })?;
    // ANCHOR: loop
    loop {
        let [conn, signal] = crate::wait_readable([listener.as_fd(), stop.as_fd()])?;
        if signal {
            return Ok(Outcome::default());
        }
        if !conn {
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                meters.accepted(0);
                let served = match protocol::set_timeouts(&stream, cfg.proto.timeout)
                {
                    Ok(()) => protocol::serve(&stream, &cfg.proto, meters.get(0)),
                    Err(e) => Served {
                        error: Some(protocol::io_reason(&e, false)),
                        ..Served::default()
                    },
                };
                drop(stream);
                crate::account(meters, 0, &served);
            }
            Err(e) => crate::accept_failed(&e),
        }
    }
    // ANCHOR_END: loop
}
