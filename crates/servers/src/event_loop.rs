//! Today's answer to the same problem: non-blocking sockets and an event
//! loop per thread, no thread or process per connection.
//!
//! - `epoll`: one thread, one epoll set holding the listener and every
//!   connection.
//! - `epoll-exclusive`: `--pool` threads, each with its own epoll set and
//!   its own connections; the one listener is in every set, registered with
//!   `EPOLLEXCLUSIVE` (Linux 4.5), so a new connection wakes one loop, not
//!   all. With `--herd` the flag is left out and every loop wakes: the
//!   thundering herd that blocking `accept` no longer has, back again.
//! - `reuseport`: `--pool` threads, each with its own listener bound to the
//!   same port with `SO_REUSEPORT` (Linux 3.9); the kernel spreads new
//!   connections over the listeners by a hash of the addresses, so no loop
//!   wakes for another's connection, but a busy loop keeps getting its
//!   share (the balance against tail latency).
//!
//! Each wake-up on a listener counts in the meter, so wake-ups per
//! connection show the herd, or its absence.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno};
use nix::sys::epoll::{
    Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout,
};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::meter::Meter;
use crate::protocol::{LineReader, Proto, Served, io_reason, reply_piece};
use crate::thread_per_client::MetersRef;
use crate::{Config, Design, Meters, Outcome};

const LISTENER: u64 = 0;
const STOP: u64 = 1;

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let loops = if cfg.design == Design::Epoll { 1 } else { cfg.pool };
    let stop = EventFd::from_value_and_flags(
        0,
        EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
    )
    .map_err(errno("eventfd"))?;
    let listener = std::sync::Arc::new(listener);
    let addr = listener.local_addr().map_err(|e| Error::io("getsockname", e))?;
    // One (epoll set, listener) per loop.
    let mut sets = Vec::new();
    for i in 0..loops {
        let own = if cfg.design == Design::Reuseport && i > 0 {
            std::sync::Arc::new(crate::listen(addr, true)?)
        } else {
            listener.clone()
        };
        own.set_nonblocking(true).map_err(|e| Error::io("O_NONBLOCK", e))?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
            .map_err(errno("epoll_create1"))?;
        // ANCHOR: exclusive
        let mut flags = EpollFlags::EPOLLIN;
        if cfg.design == Design::EpollExclusive && !cfg.herd {
            flags |= EpollFlags::EPOLLEXCLUSIVE;
        }
        epoll
            .add(&*own, EpollEvent::new(flags, LISTENER))
            .map_err(errno("epoll_ctl"))?;
        // ANCHOR_END: exclusive
        epoll
            .add(&stop, EpollEvent::new(EpollFlags::EPOLLIN, STOP))
            .map_err(errno("epoll_ctl"))?;
        sets.push((epoll, own));
    }
    let m = MetersRef::new(meters);
    let stop = std::sync::Arc::new(stop);
    let mut threads = Vec::new();
    let mut started = Ok(());
    for (i, (epoll, own)) in sets.into_iter().enumerate() {
        let proto = cfg.proto;
        match crate::spawn(format!("loop-{i}"), move || {
            event_loop(i, &epoll, &own, &proto, m)
        }) {
            Ok(t) => threads.push(t),
            Err(e) => {
                started = Err(e);
                break;
            }
        }
    }
    let stopped = started.and_then(|()| crate::wait_for_stop().map(drop));
    let _ = stop.write(1); // level-triggered and never read: every loop sees it
    for t in threads {
        let _ = t.join();
    }
    stopped?;
    Ok(Outcome { members: loops, counts_wakeups: true })
}

fn errno(what: &'static str) -> impl Fn(nix::errno::Errno) -> Error {
    move |e| Error::failed(format!("{what}: {}", describe_errno(e)))
}

/// A connection of an event loop.
struct Conn {
    stream: TcpStream,
    lines: LineReader,
    /// The reply being written: (total, sent).
    reply: Option<(usize, usize)>,
    served: Served,
    /// Registered for EPOLLOUT (waiting for room) instead of EPOLLIN.
    writing: bool,
    last: Instant,
}

/// What to do with a connection after driving it.
enum Next {
    Wait { writing: bool },
    Close,
}

// ANCHOR: event_loop
fn event_loop(
    i: usize,
    epoll: &Epoll,
    listener: &TcpListener,
    proto: &Proto,
    m: MetersRef,
) {
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut next_token = 2;
    let mut events = [EpollEvent::empty(); 64];
    let mut swept = Instant::now();
    loop {
        let n = match epoll.wait(&mut events, EpollTimeout::from(100u16)) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => {
                crate::say(&[b"epoll_wait: ", describe_errno(e).as_bytes()]);
                return;
            }
        };
        for ev in &events[..n] {
            match ev.data() {
                STOP => return, // dropping `conns` closes every connection
                LISTENER => {
                    m.get().woke(i);
                    accept_all(i, epoll, listener, &mut conns, &mut next_token, m);
                }
                token => {
                    let Some(c) = conns.get_mut(&token) else { continue };
                    match drive(c, proto, m.get().get(i)) {
                        Next::Wait { writing } if writing != c.writing => {
                            c.writing = writing;
                            let _ = epoll
                                .modify(&c.stream, &mut interest(writing, token));
                        }
                        Next::Wait { .. } => {}
                        Next::Close => close(epoll, &mut conns, token, m, i),
                    }
                }
            }
        }
        if swept.elapsed() >= proto.timeout / 4 {
            swept = Instant::now();
            let idle: Vec<u64> = conns
                .iter()
                .filter(|(_, c)| c.last.elapsed() >= proto.timeout)
                .map(|(&t, _)| t)
                .collect();
            for token in idle {
                if let Some(c) = conns.get_mut(&token) {
                    let e = std::io::Error::from(ErrorKind::TimedOut);
                    c.served.error = Some(io_reason(&e, c.reply.is_some()));
                }
                close(epoll, &mut conns, token, m, i);
            }
        }
    }
}
// ANCHOR_END: event_loop

fn interest(writing: bool, token: u64) -> EpollEvent {
    let flags = if writing { EpollFlags::EPOLLOUT } else { EpollFlags::EPOLLIN };
    EpollEvent::new(flags, token)
}

/// Accept every connection waiting on the listener.
fn accept_all(
    i: usize,
    epoll: &Epoll,
    listener: &TcpListener,
    conns: &mut HashMap<u64, Conn>,
    next_token: &mut u64,
    m: MetersRef,
) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) => {
                crate::accept_failed(&e); // silent for EAGAIN
                return;
            }
        };
        m.get().accepted(i);
        let token = *next_token;
        *next_token += 1;
        if stream.set_nonblocking(true).is_err()
            || epoll.add(&stream, interest(false, token)).is_err()
        {
            crate::log_close("cannot register the connection with epoll");
            continue;
        }
        let c = Conn {
            stream,
            lines: LineReader::default(),
            reply: None,
            served: Served::default(),
            writing: false,
            last: Instant::now(),
        };
        conns.insert(token, c);
    }
}

fn close(
    epoll: &Epoll,
    conns: &mut HashMap<u64, Conn>,
    token: u64,
    m: MetersRef,
    i: usize,
) {
    if let Some(c) = conns.remove(&token) {
        let _ = epoll.delete(&c.stream);
        crate::account(m.get(), i, &c.served);
    }
}

// ANCHOR: drive
/// Do all the work a connection allows without blocking: write what is
/// left of the reply, parse the next request, read.
fn drive(c: &mut Conn, proto: &Proto, meter: &Meter) -> Next {
    loop {
        if let Some((total, mut sent)) = c.reply {
            while sent < total {
                match (&c.stream).write(reply_piece(sent, total)) {
                    Ok(n) => {
                        sent += n;
                        c.last = Instant::now();
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        c.reply = Some((total, sent));
                        return Next::Wait { writing: true };
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        c.served.bytes += sent as u64;
                        c.served.error = Some(io_reason(&e, true));
                        return Next::Close;
                    }
                }
            }
            c.reply = None;
            c.served.requests += 1;
            c.served.bytes += total as u64;
            meter.replied(total);
        }
        match c.lines.next(proto.max_bytes) {
            Some(Ok(count)) => {
                c.reply = Some((count, 0));
                continue;
            }
            Some(Err(why)) => {
                c.served.error = Some(why);
                return Next::Close;
            }
            None => {}
        }
        match (&c.stream).read(c.lines.space(proto.byte_reads)) {
            Ok(0) => {
                if c.lines.pending() > 0 {
                    c.served.error =
                        Some("half a request: the client closed mid-line");
                }
                return Next::Close;
            }
            Ok(n) => {
                c.lines.filled(n);
                c.last = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                return Next::Wait { writing: false };
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                c.served.error = Some(io_reason(&e, false));
                return Next::Close;
            }
        }
    }
}
// ANCHOR_END: drive
