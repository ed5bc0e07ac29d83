//! serv08: prethreaded, the main thread accepts. One acceptor thread (the
//! main thread in Stevens) accepts and puts each connection into a ring of
//! 32 slots; `--pool` workers wait on a condition variable and take
//! connections out. Stevens' ring ended the server when it overflowed;
//! here the acceptor waits for room instead.

use std::collections::VecDeque;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use labkit::error::Result;

use crate::thread_per_client::MetersRef;
use crate::{Config, Live, Meters, Outcome};

/// Stevens' `MAXNCLI`.
const RING: usize = 32;

struct Ring {
    state: Mutex<(VecDeque<TcpStream>, bool)>,
    not_empty: Condvar,
    not_full: Condvar,
}

impl Ring {
    fn lock(&self) -> MutexGuard<'_, (VecDeque<TcpStream>, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(
        c: &Condvar,
        g: MutexGuard<'a, (VecDeque<TcpStream>, bool)>,
    ) -> MutexGuard<'a, (VecDeque<TcpStream>, bool)> {
        c.wait(g).unwrap_or_else(PoisonError::into_inner)
    }

    // ANCHOR: ring
    /// The acceptor's `iput`: wait for room, then add a connection.
    fn put(&self, stream: TcpStream) {
        let mut st = self.lock();
        while st.0.len() == RING && !st.1 {
            st = Ring::wait(&self.not_full, st);
        }
        if !st.1 {
            st.0.push_back(stream);
            self.not_empty.notify_one();
        }
    }

    /// A worker's `iget`: wait for a connection; `None` once stopping.
    fn take(&self) -> Option<TcpStream> {
        let mut st = self.lock();
        loop {
            if st.1 {
                return None;
            }
            if let Some(s) = st.0.pop_front() {
                self.not_full.notify_one();
                return Some(s);
            }
            st = Ring::wait(&self.not_empty, st);
        }
    }
    // ANCHOR_END: ring

    fn stop(&self) {
        let mut st = self.lock();
        st.1 = true;
        st.0.clear(); // connections not yet taken are closed
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }
}

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let ring = Arc::new(Ring {
        state: Mutex::new((VecDeque::with_capacity(RING), false)),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let live = Arc::new(Live::default());
    let m = MetersRef::new(meters);
    let listener = Arc::new(listener);
    let mut threads = Vec::new();
    let started = (|| -> Result<()> {
        for i in 0..cfg.pool {
            let (ring, live, proto) = (ring.clone(), live.clone(), cfg.proto);
            threads.push(crate::spawn(format!("worker-{i}"), move || {
                while let Some(stream) = ring.take() {
                    m.get().accepted(i);
                    live.serve(stream, &proto, m.get(), i);
                }
            })?);
        }
        let (ring, live, listener) = (ring.clone(), live.clone(), listener.clone());
        threads.push(crate::spawn("acceptor".into(), move || {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => ring.put(stream),
                    Err(_) if live.stopping() => return,
                    Err(e) => crate::accept_failed(&e),
                }
            }
        })?);
        Ok(())
    })();
    let stopped = started.and_then(|()| crate::wait_for_stop().map(drop));
    live.stop();
    ring.stop();
    crate::shutdown_fd(listener.as_raw_fd());
    for t in threads {
        let _ = t.join();
    }
    stopped?;
    Ok(Outcome { members: cfg.pool, counts_wakeups: false })
}
