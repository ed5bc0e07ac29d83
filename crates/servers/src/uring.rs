//! One thread, every accept, receive and send an io_uring request: the
//! loop submits requests and handles their completions, and never asks
//! whether a socket is ready. Each connection has one request in flight at
//! a time (a receive or a send). A timeout request ticks every 100 ms so
//! that idle connections can be cut off after `--timeout` (their socket is
//! shut down, which completes the receive).
//!
//! If the kernel (or a sandbox's seccomp filter, or
//! `kernel.io_uring_disabled`) refuses io_uring, [`Ring::new`] says why and
//! the server exits 1 before printing an address.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use io_uring::{IoUring, opcode, squeue, types};
use labkit::error::{Error, Result, describe_io};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::protocol::{LineReader, Proto, Served, io_reason, reply_piece};
use crate::thread_per_client::MetersRef;
use crate::{Config, Meters, Outcome};

/// The ring, made before the server prints its address.
pub struct Ring(IoUring);

impl Ring {
    /// A ring of 256 entries, checked to support the requests the loop
    /// uses (accept and send/receive need Linux 5.5 and 5.6).
    pub fn new() -> Result<Ring> {
        let ring = IoUring::new(256).map_err(|e| {
            Error::failed(format!(
                "io-uring: io_uring_setup: {} (kernel.io_uring_disabled, seccomp \
                 or an old kernel)",
                describe_io(&e)
            ))
        })?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe).map_err(|e| {
            Error::failed(format!("io-uring: probe: {}", describe_io(&e)))
        })?;
        for (code, name) in [
            (opcode::Accept::CODE, "accept"),
            (opcode::Recv::CODE, "recv"),
            (opcode::Send::CODE, "send"),
            (opcode::Timeout::CODE, "timeout"),
            (opcode::AsyncCancel::CODE, "async cancel"),
            (opcode::Read::CODE, "read"),
        ] {
            if !probe.is_supported(code) {
                return Err(Error::failed(format!(
                    "io-uring: this kernel's io_uring has no {name} request"
                )));
            }
        }
        Ok(Ring(ring))
    }
}

// What a completion is for: user_data = token << 3 | kind.
const ACCEPT: u64 = 0;
const STOP: u64 = 1;
const TICK: u64 = 2;
const RECV: u64 = 3;
const SEND: u64 = 4;
const CANCEL: u64 = 5;

struct Conn {
    stream: TcpStream,
    lines: LineReader,
    reply: Option<(usize, usize)>,
    served: Served,
    last: Instant,
}

pub fn run(
    cfg: &Config,
    ring: Ring,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let stop = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC)
        .map_err(|e| Error::failed(format!("eventfd: {e}")))?;
    let stop_fd = stop.as_raw_fd();
    let m = MetersRef::new(meters);
    let proto = cfg.proto;
    let lsn = listener.as_raw_fd();
    let worker = crate::spawn("uring".into(), move || {
        if let Err(e) = ring_loop(ring.0, lsn, stop_fd, &proto, m) {
            crate::say(&[b"io-uring loop: ", describe_io(&e).as_bytes()]);
        }
    })?;
    let stopped = crate::wait_for_stop();
    let _ = stop.write(1);
    let _ = worker.join();
    drop(listener);
    stopped?;
    Ok(Outcome::default())
}

/// Queue `entry`, submitting what is queued first if the queue is full.
fn push(ring: &mut IoUring, entry: &squeue::Entry) -> std::io::Result<()> {
    loop {
        // SAFETY: every buffer an entry points to stays valid until its
        // request has completed: the stop counter and the timespec are heap
        // allocations that `ring_loop` frees only once no request is in
        // flight, and leaks if the loop fails; a connection's receive buffer
        // is inside its boxed `Conn`, dropped only after its request
        // completed, or leaked if the loop fails; replies are static.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// Run the loop until no request is in flight. The kernel writes the stop
/// counter and reads the timespec and the connections' buffers while their
/// requests are in flight, so if the loop fails (with requests still in
/// flight) they are leaked rather than freed; the connections are shut
/// down first so their clients are not left waiting, and the ring is then
/// dropped, which cancels what is left (the kernel may still complete
/// those requests into the leaked memory).
fn ring_loop(
    ring: IoUring,
    listener: i32,
    stop_fd: i32,
    proto: &Proto,
    m: MetersRef,
) -> std::io::Result<()> {
    let stop_value = Box::into_raw(Box::new(0u64));
    let tick = Box::into_raw(Box::new(types::Timespec::new().nsec(100_000_000)));
    let mut conns = HashMap::new();
    let run = Run { listener, stop_fd, stop_value, tick, proto, m };
    let result = drive(&run, ring, &mut conns);
    match result {
        Ok(()) => {
            // SAFETY: both were made by `Box::into_raw` above and are freed
            // once, here; `drive` returned Ok only with no request in
            // flight, so the kernel no longer refers to them.
            unsafe {
                drop(Box::from_raw(stop_value));
                drop(Box::from_raw(tick));
            }
        }
        Err(_) => {
            for c in conns.values() {
                crate::shutdown_fd(c.stream.as_raw_fd());
            }
            std::mem::forget(conns);
        }
    }
    result
}

/// What [`drive`] works with; `stop_value` and `tick` are owned by
/// `ring_loop`, which frees or leaks them.
struct Run<'a> {
    listener: i32,
    stop_fd: i32,
    stop_value: *mut u64,
    tick: *mut types::Timespec,
    proto: &'a Proto,
    m: MetersRef,
}

// ANCHOR: ring_loop
/// The loop: submit, wait, handle completions; `Ok` only once no request
/// is in flight.
fn drive(
    run: &Run<'_>,
    mut ring: IoUring,
    conns: &mut HashMap<u64, Box<Conn>>,
) -> std::io::Result<()> {
    let Run { listener, stop_fd, stop_value, tick, proto, m } = *run;
    let mut next_token = 1u64;
    let accept = || {
        opcode::Accept::new(
            types::Fd(listener),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(ACCEPT)
    };
    let read_stop = opcode::Read::new(types::Fd(stop_fd), stop_value.cast(), 8)
        .build()
        .user_data(STOP);
    push(&mut ring, &accept())?;
    push(&mut ring, &read_stop)?;
    push(&mut ring, &opcode::Timeout::new(tick).build().user_data(TICK))?;
    let mut in_flight = 3usize;
    let mut stopping = false;
    while in_flight > 0 {
        match ring.submit_and_wait(1) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r?,
        };
        let done: Vec<(u64, i32)> =
            ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (data, res) in done {
            in_flight -= 1;
            let (token, kind) = (data >> 3, data & 7);
            match kind {
                ACCEPT if stopping && res >= 0 => {
                    // Accepted just before the stop: close it unserved.
                    // SAFETY: the accepted descriptor is new and ours.
                    drop(unsafe { crate::stream_from_fd(res) });
                }
                ACCEPT if stopping => {}
                ACCEPT => {
                    if res >= 0 {
                        m.get().accepted(0);
                        let token = next_token;
                        next_token += 1;
                        // SAFETY: the accepted descriptor is new and ours.
                        let stream = unsafe { crate::stream_from_fd(res) };
                        let c = Box::new(Conn {
                            stream,
                            lines: LineReader::default(),
                            reply: None,
                            served: Served::default(),
                            last: Instant::now(),
                        });
                        conns.insert(token, c);
                        in_flight += advance(&mut ring, conns, token, proto, m)?;
                    } else {
                        crate::accept_failed(&std::io::Error::from_raw_os_error(
                            -res,
                        ));
                    }
                    push(&mut ring, &accept())?;
                    in_flight += 1;
                }
                STOP => {
                    stopping = true;
                    for entry in [
                        opcode::AsyncCancel::new(ACCEPT).build().user_data(CANCEL),
                        opcode::AsyncCancel::new(TICK).build().user_data(CANCEL),
                    ] {
                        push(&mut ring, &entry)?;
                        in_flight += 1;
                    }
                    for c in conns.values() {
                        crate::shutdown_fd(c.stream.as_raw_fd());
                    }
                }
                TICK if !stopping => {
                    for c in conns.values_mut() {
                        if c.last.elapsed() >= proto.timeout {
                            let e =
                                std::io::Error::from(std::io::ErrorKind::TimedOut);
                            c.served.error = Some(io_reason(&e, c.reply.is_some()));
                            crate::shutdown_fd(c.stream.as_raw_fd());
                        }
                    }
                    let again = opcode::Timeout::new(tick).build().user_data(TICK);
                    push(&mut ring, &again)?;
                    in_flight += 1;
                }
                RECV | SEND => {
                    let Some(c) = conns.get_mut(&token) else { continue };
                    if finish(c, kind, res) {
                        in_flight += advance(&mut ring, conns, token, proto, m)?;
                    } else {
                        close(conns, token, m);
                    }
                }
                _ => {} // CANCEL, and TICK while stopping
            }
        }
    }
    Ok(())
}
// ANCHOR_END: ring_loop

/// Take in the result of a connection's receive or send; `false` when the
/// connection must be closed.
fn finish(c: &mut Conn, kind: u64, res: i32) -> bool {
    let error = |c: &mut Conn, writing| {
        if c.served.error.is_none() {
            let e = std::io::Error::from_raw_os_error(-res);
            c.served.error = Some(io_reason(&e, writing));
        }
        false
    };
    match (kind, res) {
        (RECV, 0) => {
            if c.lines.pending() > 0 && c.served.error.is_none() {
                c.served.error = Some("half a request: the client closed mid-line");
            }
            false
        }
        (RECV, n) if n > 0 => {
            c.lines.filled(n as usize);
            c.last = Instant::now();
            true
        }
        (RECV, _) => error(c, false),
        (_, n) if n > 0 => {
            let (total, sent) =
                c.reply.expect("a send is in flight only with a reply");
            c.reply = Some((total, sent + n as usize));
            c.last = Instant::now();
            true
        }
        (_, 0) => error(c, true),
        _ => error(c, true),
    }
}

/// Queue the connection's next request (the rest of the reply, or a
/// receive) and return 1, or close it and return 0.
fn advance(
    ring: &mut IoUring,
    conns: &mut HashMap<u64, Box<Conn>>,
    token: u64,
    proto: &Proto,
    m: MetersRef,
) -> std::io::Result<usize> {
    let c = conns.get_mut(&token).expect("a live connection");
    let fd = types::Fd(c.stream.as_raw_fd());
    if let Some((total, sent)) = c.reply {
        if sent < total {
            let piece = reply_piece(sent, total);
            let send = opcode::Send::new(fd, piece.as_ptr(), piece.len() as u32)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(token << 3 | SEND);
            push(ring, &send)?;
            return Ok(1);
        }
        c.reply = None;
        c.served.requests += 1;
        c.served.bytes += total as u64;
        m.get().get(0).replied(total);
    }
    match c.lines.next(proto.max_bytes) {
        Some(Ok(count)) => {
            c.reply = Some((count, 0));
            advance(ring, conns, token, proto, m)
        }
        Some(Err(why)) => {
            c.served.error = Some(why);
            close(conns, token, m);
            Ok(0)
        }
        None => {
            let space = c.lines.space(proto.byte_reads);
            let recv = opcode::Recv::new(fd, space.as_mut_ptr(), space.len() as u32)
                .build()
                .user_data(token << 3 | RECV);
            push(ring, &recv)?;
            Ok(1)
        }
    }
}

fn close(conns: &mut HashMap<u64, Box<Conn>>, token: u64, m: MetersRef) {
    if let Some(c) = conns.remove(&token) {
        crate::account(m.get(), 0, &c.served);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring made disabled (`IORING_SETUP_R_DISABLED`) refuses
    /// `io_uring_enter` with EBADFD, so the loop fails at its first wait
    /// with its three requests queued: it must return that error (taking
    /// the path that leaks its buffers) instead of spinning or crashing.
    /// The queued requests never reach the kernel, so this cannot show a
    /// completion landing in the leaked memory.
    #[test]
    fn a_failing_loop_returns_its_error() {
        let ring = IoUring::builder().setup_r_disabled().build(8);
        labtest::require!(ring.is_ok(), "io_uring refused: {:?}", ring.err());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stop = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC).unwrap();
        let proto = Proto {
            max_bytes: 100,
            byte_reads: false,
            timeout: std::time::Duration::from_secs(1),
        };
        let meters = MetersRef::new(Meters::new(1).unwrap());
        let err = ring_loop(
            ring.unwrap(),
            listener.as_raw_fd(),
            stop.as_raw_fd(),
            &proto,
            meters,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADFD), "{err}");
    }
}
