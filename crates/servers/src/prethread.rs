//! serv07 and serv09: prethreaded. `--pool` threads are started up front;
//! each loops accepting on the shared listener and serving.
//!
//! - `prethread-mutex` (serv07): a mutex around `accept`, so that one
//!   thread at a time waits in it (Stevens' guard against the herd).
//! - `prethread-nolock` (serv09): every thread blocks in `accept` itself;
//!   Linux wakes one of them per connection.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, PoisonError};

use labkit::error::Result;

use crate::thread_per_client::MetersRef;
use crate::{Config, Design, Live, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let shared = Arc::new((listener, Mutex::new(())));
    let live = Arc::new(Live::default());
    let m = MetersRef::new(meters);
    let locked = cfg.design == Design::PrethreadMutex;
    let mut threads = Vec::new();
    let mut started = Ok(());
    for i in 0..cfg.pool {
        let (shared, live, proto) = (shared.clone(), live.clone(), cfg.proto);
        let t = crate::spawn(format!("worker-{i}"), move || {
            worker(i, &shared.0, locked.then_some(&shared.1), &live, &proto, m)
        });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                started = Err(e);
                break;
            }
        }
    }
    let stopped = started.and_then(|()| crate::wait_for_stop().map(drop));
    live.stop();
    crate::shutdown_fd(shared.0.as_raw_fd());
    for t in threads {
        let _ = t.join();
    }
    stopped?;
    Ok(Outcome { members: cfg.pool, counts_wakeups: false })
}

// ANCHOR: worker
fn worker(
    i: usize,
    listener: &TcpListener,
    lock: Option<&Mutex<()>>,
    live: &Live,
    proto: &crate::Proto,
    m: MetersRef,
) {
    loop {
        let guard = lock.map(|l| l.lock().unwrap_or_else(PoisonError::into_inner));
        let accepted = listener.accept();
        drop(guard);
        match accepted {
            Ok((stream, _)) => {
                m.get().accepted(i);
                live.serve(stream, proto, m.get(), i);
            }
            Err(_) if live.stopping() => return,
            Err(e) => crate::accept_failed(&e),
        }
    }
}
// ANCHOR_END: worker
