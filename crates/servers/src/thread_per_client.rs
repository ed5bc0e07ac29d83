//! serv06: a thread per connection. An acceptor thread accepts and starts
//! a thread to serve each connection; Stevens detached them, here the
//! acceptor keeps their handles and joins each one once it has finished,
//! and all of them before it returns, so that none is left at the end. The
//! main thread waits for the stop signal, then shuts the listener and the
//! live connections down.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use labkit::error::Result;

use crate::{Config, Live, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let listener = Arc::new(listener);
    let live = Arc::new(Live::default());
    let m = MetersRef::new(meters);
    let acceptor = {
        let (listener, live, cfg) = (listener.clone(), live.clone(), cfg.clone());
        crate::spawn("acceptor".into(), move || {
            accept_loop(&listener, &live, &cfg, m)
        })?
    };
    let stopped = crate::wait_for_stop();
    live.stop();
    crate::shutdown_fd(listener.as_raw_fd());
    let _ = acceptor.join();
    stopped?;
    Ok(Outcome::default())
}

// ANCHOR: accept_loop
fn accept_loop(
    listener: &TcpListener,
    live: &Arc<Live>,
    cfg: &Config,
    m: MetersRef,
) {
    let mut threads = Vec::new();
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) if live.stopping() => break,
            Err(e) => {
                crate::accept_failed(&e);
                continue;
            }
        };
        m.get().accepted(0);
        let (live, proto) = (live.clone(), cfg.proto);
        let started = std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || live.serve(stream, &proto, m.get(), 0));
        match started {
            Ok(t) => threads.push(t),
            Err(e) => crate::say(&[
                b"cannot start a thread, connection dropped: ",
                labkit::error::describe_io(&e).as_bytes(),
            ]),
        }
        // Join the threads that have finished (pthread_detach's work).
        let (done, running) = threads.into_iter().partition(|t| t.is_finished());
        threads = running;
        done.into_iter().for_each(|t: std::thread::JoinHandle<()>| drop(t.join()));
    }
    for t in threads {
        let _ = t.join();
    }
}
// ANCHOR_END: accept_loop

/// The meters, as threads carry them.
#[derive(Clone, Copy)]
pub(crate) struct MetersRef(&'static Meters);

impl MetersRef {
    pub(crate) fn new(m: &'static Meters) -> MetersRef {
        MetersRef(m)
    }

    pub(crate) fn get(&self) -> &'static Meters {
        self.0
    }
}
