//! The same broker as one thread on epoll: every socket non-blocking, one
//! `epoll_wait` loop reads senders, moves messages from the queues to the
//! receivers' outboxes and writes them out. No thread ever waits for
//! another, so the only context switches left are the ones into and out of
//! the kernel's idle loop when there is nothing to do.
//!
//! Batching, for pipelined senders: each `read` takes up to 64 KiB (many
//! frames), each receiver's waiting frames go out in one `writev` of up
//! to 64, and the flush policy is to never wait for more: frames read in
//! one pass over the ready sockets are written at the end of that pass,
//! so batching adds at most one pass of latency. The boxes of frames
//! written are kept for the next frames read, so a steady stream of
//! one-size messages allocates nothing per message; no lock is taken.
//!
//! Back pressure: a sender whose next frame is for a full queue is taken
//! out of the epoll set ("paused") until that queue has room, so its bytes
//! stay in the kernel and TCP slows the sender down.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno, describe_io};
use nix::sys::epoll::{
    Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout,
};
use nix::sys::signal::SigSet;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::broker::log_close;
use crate::protocol::{self, Frame, Parsed};
use crate::{ACCEPT_BACKOFF, Config, Counters, Stats, Throttle};

const LISTENER: u64 = u64::MAX;
const SIGNALS: u64 = u64::MAX - 1;
const CHUNK: usize = 64 << 10;
const BATCH: usize = 32;

#[derive(Clone, Copy, PartialEq)]
enum Role {
    New,
    Sender,
    Receiver(usize),
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    role: Role,
    buf: Vec<u8>,
    start: usize,
    /// The peer has closed its side (or failed); close once `buf` is used.
    ended: Option<Option<String>>,
    paused: bool,
    out: VecDeque<Frame>,
    /// Bytes of `out[0]` already written.
    out_off: usize,
    want_write: bool,
}

struct Loop<'a> {
    cfg: &'a Config,
    epoll: Epoll,
    conns: HashMap<u64, Conn>,
    queues: Vec<VecDeque<Frame>>,
    receivers: Vec<Vec<u64>>,
    next: Vec<usize>,
    paused: Vec<u64>,
    counters: Arc<Counters>,
    chunk: Vec<u8>,
    /// Boxes of frames written out, for the next frames read
    /// ([`protocol::next_frame_reusing`]): at most [`SPARE`] of them.
    spare: Vec<Frame>,
}

/// Frame boxes kept for reuse. A box is kept only once its frame is
/// written, and reused before any new one is allocated, so the boxes alive
/// (in flight and kept) never outnumber the most frames ever in flight,
/// which the queues' and outboxes' bounds already limit.
const SPARE: usize = 4096;

fn ctl(what: &str, e: nix::errno::Errno) -> Error {
    Error::failed(format!("{what}: {}", describe_errno(e)))
}

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    signals: SigSet,
    counters: Arc<Counters>,
) -> Result<Stats> {
    listener.set_nonblocking(true).map_err(|e| Error::io("O_NONBLOCK", e))?;
    let sfd = SignalFd::with_flags(
        &signals,
        SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC,
    )
    .map_err(|e| ctl("signalfd", e))?;
    let epoll =
        Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| ctl("epoll", e))?;
    let readable = EpollFlags::EPOLLIN;
    epoll
        .add(&listener, EpollEvent::new(readable, LISTENER))
        .map_err(|e| ctl("epoll_ctl", e))?;
    epoll
        .add(&sfd, EpollEvent::new(readable, SIGNALS))
        .map_err(|e| ctl("epoll_ctl", e))?;
    let q = usize::from(cfg.queues);
    let mut lp = Loop {
        cfg,
        epoll,
        conns: HashMap::new(),
        queues: vec![VecDeque::new(); q],
        receivers: vec![Vec::new(); q],
        next: vec![0; q],
        paused: Vec::new(),
        counters,
        chunk: vec![0; CHUNK],
        spare: Vec::with_capacity(SPARE),
    };
    let mut next_id = 0u64;
    let mut deadline: Option<Instant> = None;
    // Out of descriptors, the listener leaves the epoll set until then.
    let mut listen_again: Option<Instant> = None;
    let (mut no_fd, mut refused) = (Throttle::new(), Throttle::new());
    let mut events = vec![EpollEvent::empty(); 256];
    // ANCHOR: loop
    loop {
        let timeout = if deadline.is_some() || listen_again.is_some() {
            EpollTimeout::from(5u8)
        } else {
            EpollTimeout::NONE
        };
        let n = match lp.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(ctl("epoll_wait", e)),
        };
        for ev in &events[..n] {
            match ev.data() {
                LISTENER => loop {
                    match listener.accept() {
                        Ok((stream, peer))
                            if lp.conns.len() >= cfg.max_connections =>
                        {
                            lp.refuse(stream, peer, &mut refused);
                        }
                        Ok((stream, peer)) => {
                            lp.add(next_id, stream, peer);
                            next_id += 1;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => {
                            // EMFILE and friends: stop listening for a while
                            // rather than spin on a listener that stays
                            // readable; say so once in a while.
                            no_fd.accept_failed(&e);
                            let _ = lp.epoll.delete(&listener);
                            listen_again = Some(Instant::now() + ACCEPT_BACKOFF);
                            break;
                        }
                    }
                },
                SIGNALS => {
                    while let Ok(Some(_)) = sfd.read_signal() {}
                    if deadline.is_none() {
                        listen_again = None;
                        deadline = Some(Instant::now() + cfg.drain);
                        let _ = lp.epoll.delete(&listener);
                        lp.close_senders();
                    }
                }
                id => lp.event(id, ev.events()),
            }
        }
        while lp.pump() {}
        if listen_again.is_some_and(|t| Instant::now() >= t) {
            listen_again = None;
            if deadline.is_none() {
                let ev = EpollEvent::new(readable, LISTENER);
                lp.epoll.add(&listener, ev).map_err(|e| ctl("epoll_ctl", e))?;
            }
        }
        if let Some(deadline) = deadline {
            let c = &lp.counters;
            let drained = c.msgs_out.load(Relaxed) >= c.msgs_in.load(Relaxed);
            if drained || Instant::now() >= deadline {
                break;
            }
        }
    }
    // ANCHOR_END: loop
    let counters = lp.counters.clone();
    drop(lp);
    Ok(Stats::now(cfg, &counters, 0))
}

impl Loop<'_> {
    /// `--max-connections` are open: close this one at once.
    fn refuse(&mut self, stream: TcpStream, peer: SocketAddr, log: &mut Throttle) {
        drop(stream);
        self.counters.refused.fetch_add(1, Relaxed);
        let max = self.cfg.max_connections;
        log.hit(|| {
            format!(
                "refused connection from {peer}: {max} connections open \
                 (--max-connections)"
            )
        });
    }

    fn add(&mut self, id: u64, stream: TcpStream, peer: SocketAddr) {
        self.counters.connections.fetch_add(1, Relaxed);
        if let Err(e) = stream.set_nonblocking(true) {
            eprintln!("broker: {peer}: O_NONBLOCK: {}", describe_io(&e));
            return;
        }
        let _ = stream.set_nodelay(true);
        crate::set_socket_buffers(&stream, self.cfg.socket_buffer);
        let ev = EpollEvent::new(EpollFlags::EPOLLIN, id);
        if let Err(e) = self.epoll.add(&stream, ev) {
            eprintln!("broker: {peer}: epoll_ctl: {}", describe_errno(e));
            return;
        }
        self.conns.insert(
            id,
            Conn {
                stream,
                peer,
                role: Role::New,
                buf: Vec::new(),
                start: 0,
                ended: None,
                paused: false,
                out: VecDeque::new(),
                out_off: 0,
                want_write: false,
            },
        );
    }

    fn event(&mut self, id: u64, flags: EpollFlags) {
        if flags.contains(EpollFlags::EPOLLOUT) {
            self.flush(id);
        }
        let Some(c) = self.conns.get_mut(&id) else { return };
        let input =
            EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR;
        if c.paused || !flags.intersects(input) {
            return;
        }
        match (&c.stream).read(&mut self.chunk) {
            Ok(0) => c.ended = Some(None),
            Ok(n) => c.buf.extend_from_slice(&self.chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => return,
            Err(e) => c.ended = Some(Some(format!("read: {}", describe_io(&e)))),
        }
        self.process(id);
    }

    // ANCHOR: process
    /// Act on the whole frames a connection has sent, stopping (and pausing
    /// the sender) at the first one for a full queue.
    fn process(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let (max, nq) = (self.cfg.max_frame, self.cfg.queues);
        loop {
            let mut start = c.start;
            let spare = &mut self.spare;
            match protocol::next_frame_reusing(&c.buf, &mut start, max, nq, spare) {
                Ok(None) => break,
                Ok(Some(Parsed::Publish { queue, frame }))
                    if c.role == Role::Sender =>
                {
                    let q = usize::from(queue);
                    if self.queues[q].len() >= self.cfg.capacity {
                        if !c.paused {
                            c.paused = true;
                            let _ = self.epoll.delete(&c.stream);
                            self.paused.push(id);
                        }
                        return;
                    }
                    self.queues[q].push_back(frame);
                    self.counters.msgs_in.fetch_add(1, Relaxed);
                }
                Ok(Some(Parsed::HelloSend)) if c.role == Role::New => {
                    c.role = Role::Sender;
                }
                Ok(Some(Parsed::HelloRecv { queue })) if c.role == Role::New => {
                    c.role = Role::Receiver(usize::from(queue));
                    self.receivers[usize::from(queue)].push(id);
                }
                Ok(Some(Parsed::Publish { .. })) => {
                    let why = if matches!(c.role, Role::Receiver(_)) {
                        "receiver sent data after its hello"
                    } else {
                        "protocol error: PUBLISH before HELLO_SEND"
                    };
                    return self.close(id, Some(why.into()));
                }
                Ok(Some(_)) => {
                    return self
                        .close(id, Some("protocol error: a second hello".into()));
                }
                Err(v) => return self.close(id, Some(v.to_string())),
            }
            c.start = start;
        }
        protocol::compact(&mut c.buf, &mut c.start);
        if matches!(c.role, Role::Receiver(_)) && !c.buf.is_empty() {
            return self
                .close(id, Some("receiver sent data after its hello".into()));
        }
        if c.paused {
            c.paused = false;
            self.paused.retain(|&p| p != id);
            let ev = EpollEvent::new(EpollFlags::EPOLLIN, id);
            let _ = self.epoll.add(&c.stream, ev);
        }
        if let Some(why) = c.ended.take() {
            let why = match why {
                Some(e) => Some(e),
                None if !c.buf.is_empty() => Some(format!(
                    "truncated frame: the connection ended {} bytes into a frame",
                    c.buf.len()
                )),
                None => None,
            };
            self.close(id, why);
        }
    }
    // ANCHOR_END: process

    /// Close a connection; a receiver's unwritten messages go back to the
    /// front of its queue.
    fn close(&mut self, id: u64, why: Option<String>) {
        let Some(mut c) = self.conns.remove(&id) else { return };
        if let Some(why) = &why {
            log_close(&self.counters, c.peer, why);
        }
        let _ = self.epoll.delete(&c.stream);
        self.paused.retain(|&p| p != id);
        if let Role::Receiver(q) = c.role {
            self.receivers[q].retain(|&r| r != id);
            while let Some(f) = c.out.pop_back() {
                self.queues[q].push_front(f);
            }
        }
    }

    fn close_senders(&mut self) {
        let senders: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| !matches!(c.role, Role::Receiver(_)))
            .map(|(&id, _)| id)
            .collect();
        for id in senders {
            self.close(id, None);
        }
    }

    // ANCHOR: pump
    /// Move messages from the queues to receivers with room, write what can
    /// be written without blocking, and resume paused senders. True if
    /// anything moved: then the caller pumps again, since resumed senders
    /// may have filled the queues that this pass emptied.
    fn pump(&mut self) -> bool {
        let before = (
            self.counters.msgs_in.load(Relaxed),
            self.counters.msgs_out.load(Relaxed),
        );
        let mut moved = false;
        for q in 0..self.queues.len() {
            let n = self.receivers[q].len();
            let mut tried = 0;
            while !self.queues[q].is_empty() && tried < n {
                let id = self.receivers[q][self.next[q] % n];
                self.next[q] = self.next[q].wrapping_add(1);
                let c = self.conns.get_mut(&id).expect("receivers are open");
                if c.out.len() >= self.cfg.outbox {
                    tried += 1;
                    continue;
                }
                tried = 0;
                let k = self.queues[q].len().min(BATCH);
                c.out.extend(self.queues[q].drain(..k));
                moved = true;
            }
        }
        let busy: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.out.is_empty() && !c.want_write)
            .map(|(&id, _)| id)
            .collect();
        for id in busy {
            self.flush(id);
        }
        let paused = self.paused.clone();
        for id in paused {
            self.process(id);
        }
        let after = (
            self.counters.msgs_in.load(Relaxed),
            self.counters.msgs_out.load(Relaxed),
        );
        moved || after != before
    }
    // ANCHOR_END: pump

    fn flush(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        // Nothing is written to, or counted as delivered on, a connection
        // whose receiver has closed it: its messages go back to the queue.
        if c.out_off == 0 && !c.out.is_empty() && crate::peer_closed(&c.stream) {
            return self.close(id, None);
        }
        while !c.out.is_empty() {
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(64);
            slices.push(IoSlice::new(&c.out[0][c.out_off..]));
            slices.extend(c.out.iter().skip(1).take(63).map(|f| IoSlice::new(f)));
            let written = (&c.stream).write_vectored(&slices);
            drop(slices);
            match written {
                Ok(mut n) => {
                    while n > 0 {
                        let left = c.out[0].len() - c.out_off;
                        if n >= left {
                            n -= left;
                            if let Some(f) = c.out.pop_front()
                                && self.spare.len() < SPARE
                            {
                                self.spare.push(f);
                            }
                            c.out_off = 0;
                            self.counters.msgs_out.fetch_add(1, Relaxed);
                        } else {
                            c.out_off += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    let why = format!(
                        "write: {}; {} messages go back to the queue",
                        describe_io(&e),
                        c.out.len()
                    );
                    return self.close(id, Some(why));
                }
            }
        }
        let want = !c.out.is_empty();
        if want != c.want_write {
            c.want_write = want;
            let mut flags = EpollFlags::EPOLLIN;
            if want {
                flags |= EpollFlags::EPOLLOUT;
            }
            let _ = self.epoll.modify(&c.stream, &mut EpollEvent::new(flags, id));
        }
    }
}
