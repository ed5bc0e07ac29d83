//! The thread-pool broker: an acceptor, R readers, D deliverers and W
//! writers around Q bounded queues, the shape of the 2006 server.
//!
//! - Readers share one epoll set. Sender connections are registered
//!   `EPOLLONESHOT`, so that one reader at a time owns a connection: it
//!   reads what has arrived, parses whole frames and pushes them onto their
//!   queue. A frame for a full queue stays in the connection's buffer and
//!   the connection is *paused*: it is not re-armed, so it is not read,
//!   TCP's window closes and that sender's `write` blocks. The reader goes on
//!   with other connections; a deliverer re-arms the paused ones when the
//!   queue is down to half full. A full queue holds back its own senders
//!   only.
//! - Deliverers take batches off the queues and hand each batch to the next
//!   receiver of that queue with room in its outbox (round robin). A queue
//!   none of whose receivers has room waits; the other queues go on.
//! - Writers own the receiver connections (receiver `i` belongs to writer
//!   `i mod W`) and write outboxes out without blocking. A receiver whose
//!   socket is full waits until epoll says it is writable again (the
//!   readers' epoll set watches the receivers too: for that, and for the
//!   end of the connection) while its writer goes on with the others.
//!
//! A receiver that closes its connection, or whose write fails, is dropped,
//! and what it had not been sent goes back to the front of its queue for the
//! other receivers. See the crate documentation for the bounds.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use labkit::error::{Error, Result, describe_errno, describe_io};
use nix::sys::epoll::{
    Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout,
};
use nix::sys::signal::{SigSet, Signal};

use crate::protocol::{self, Frame, Parsed};
use crate::{ACCEPT_BACKOFF, Config, Counters, Slot, Stats, Throttle};

/// Messages a deliverer moves per trip to the queues.
const BATCH: usize = 32;
/// Bytes a reader asks for per read.
const CHUNK: usize = 64 << 10;
/// The epoll token of the readers' wake-up socket.
const WAKE: u64 = u64::MAX;
/// The bit that marks a receiver's epoll token (the rest is its id).
const RECEIVER: u64 = 1 << 62;
/// Stack of each pool thread: the threads only shuffle boxed frames, and a
/// 100-thread pool should not reserve 800 MiB of address space.
const STACK: usize = 256 << 10;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait<'a, T>(c: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    c.wait(g).unwrap_or_else(PoisonError::into_inner)
}

/// One line on stderr for a connection closed because of what it did.
pub(crate) fn log_close(counters: &Counters, peer: SocketAddr, why: &str) {
    counters.closed_bad.fetch_add(1, Relaxed);
    eprintln!("broker: closed connection from {peer}: {why}");
}

/// A sender connection paused on a full queue, kept until it is re-armed.
type Paused = (u64, Arc<Mutex<Conn>>);

/// The queues and who receives from them.
struct Hub {
    state: Mutex<HubState>,
    /// Deliverers wait here for a queue with messages and a receiver with
    /// room.
    not_empty: Condvar,
    capacity: usize,
    outbox: usize,
}

struct HubState {
    queues: Vec<VecDeque<Frame>>,
    receivers: Vec<Vec<Receiver>>,
    next: Vec<usize>,
    /// Per queue: the senders paused because it was full.
    paused: Vec<VecDeque<Paused>>,
    stop: bool,
}

#[derive(Clone, Copy)]
struct Receiver {
    id: u64,
    writer: usize,
    /// Messages handed to its outbox and not yet written.
    held: usize,
}

impl Hub {
    // ANCHOR: push
    /// A reader's push. A full queue takes nothing: the reader keeps the
    /// frame, and its connection waits in `paused` until a deliverer has
    /// made room (back pressure on this queue's senders only).
    fn push(
        &self,
        queue: usize,
        frame: Frame,
        from: (u64, &Arc<Mutex<Conn>>),
        counters: &Counters,
    ) -> bool {
        let mut st = lock(&self.state);
        if st.queues[queue].len() >= self.capacity {
            st.paused[queue].push_back((from.0, from.1.clone()));
            return false;
        }
        st.queues[queue].push_back(frame);
        counters.msgs_in.fetch_add(1, Relaxed);
        // Only a queue that was empty can give a waiting deliverer work.
        let first = st.queues[queue].len() == 1;
        drop(st);
        if first {
            self.not_empty.notify_one();
        }
        true
    }
    // ANCHOR_END: push

    /// At shutdown: keep a frame that arrived whole, even past the bound.
    fn push_anyway(&self, queue: usize, frame: Frame, counters: &Counters) {
        lock(&self.state).queues[queue].push_back(frame);
        counters.msgs_in.fetch_add(1, Relaxed);
        self.not_empty.notify_one();
    }

    /// Put messages a receiver did not get back at the front of the queue.
    fn requeue(&self, queue: usize, frames: impl DoubleEndedIterator<Item = Frame>) {
        let mut st = lock(&self.state);
        for f in frames.rev() {
            st.queues[queue].push_front(f);
        }
        drop(st);
        self.not_empty.notify_all();
    }

    fn remove_receiver(&self, queue: usize, id: u64) {
        lock(&self.state).receivers[queue].retain(|r| r.id != id);
    }

    /// A writer wrote `n` of a receiver's messages: that much room again.
    fn written(&self, queue: usize, id: u64, n: usize) {
        if n == 0 {
            return;
        }
        let mut st = lock(&self.state);
        let Some(r) = st.receivers[queue].iter_mut().find(|r| r.id == id) else {
            return;
        };
        let was_full = r.held >= self.outbox;
        r.held = r.held.saturating_sub(n);
        if was_full && !st.queues[queue].is_empty() {
            drop(st);
            self.not_empty.notify_one();
        }
    }
}

impl HubState {
    /// The first queue from `cursor` on that has messages and a receiver
    /// with room in its outbox, and that receiver (round robin).
    fn next_ready(
        &mut self,
        cursor: usize,
        outbox: usize,
    ) -> Option<(usize, usize)> {
        let queues = self.queues.len();
        for q in (0..queues).map(|i| (cursor + i) % queues) {
            let n = self.receivers[q].len();
            if self.queues[q].is_empty() || n == 0 {
                continue;
            }
            for k in (0..n).map(|j| (self.next[q] + j) % n) {
                if self.receivers[q][k].held < outbox {
                    self.next[q] = k + 1;
                    return Some((q, k));
                }
            }
        }
        None
    }
}

/// A writer's receivers and their outboxes.
struct Writer {
    state: Mutex<WriterState>,
    /// The writer waits here for a ready outbox.
    work: Condvar,
}

struct WriterState {
    outs: HashMap<u64, Outbox>,
    /// Receivers with something to write, no write in progress and room in
    /// their socket.
    ready: VecDeque<u64>,
    stop: bool,
}

impl WriterState {
    /// Put a receiver on the ready list if it belongs there; true if it
    /// was added.
    fn schedule(&mut self, id: u64) -> bool {
        let Some(out) = self.outs.get_mut(&id) else { return false };
        if out.queued || out.busy || out.stalled || out.pending.is_empty() {
            return false;
        }
        out.queued = true;
        self.ready.push_back(id);
        true
    }
}

struct Outbox {
    stream: Arc<TcpStream>,
    peer: SocketAddr,
    queue: usize,
    pending: VecDeque<Frame>,
    /// Bytes of `pending[0]` already written.
    off: usize,
    /// On the writer's ready list.
    queued: bool,
    /// A writer is writing its frames (they are out of `pending`).
    busy: bool,
    /// Its socket was full: it waits for epoll to say it is writable.
    stalled: bool,
    _slot: Slot,
}

/// A sender connection (or one that has not said hello yet).
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    start: usize,
    sender: bool,
    _slot: Slot,
}

struct Shared {
    cfg: Config,
    hub: Hub,
    writers: Vec<Writer>,
    conns: Mutex<HashMap<u64, Arc<Mutex<Conn>>>>,
    epoll: Epoll,
    counters: Arc<Counters>,
    closing: AtomicBool,
    next_id: AtomicU64,
}

/// What a reader decided about a connection after serving it.
enum Next {
    Keep,
    /// Its next frame is for a full queue: a deliverer re-arms it.
    Paused,
    Close(Option<String>),
    Receiver(u16),
}

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    signals: SigSet,
    counters: Arc<Counters>,
) -> Result<Stats> {
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| {
        Error::failed(format!("epoll_create1: {}", describe_errno(e)))
    })?;
    let (wake_tx, wake_rx) = UnixStream::pair()
        .map_err(|e| Error::io("cannot create the wake-up socket", e))?;
    epoll
        .add(&wake_rx, EpollEvent::new(EpollFlags::EPOLLIN, WAKE))
        .map_err(|e| Error::failed(format!("epoll_ctl: {}", describe_errno(e))))?;
    let q = usize::from(cfg.queues);
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        hub: Hub {
            state: Mutex::new(HubState {
                queues: vec![VecDeque::new(); q],
                receivers: vec![Vec::new(); q],
                next: vec![0; q],
                paused: vec![VecDeque::new(); q],
                stop: false,
            }),
            not_empty: Condvar::new(),
            capacity: cfg.capacity,
            outbox: cfg.outbox,
        },
        writers: (0..cfg.writers)
            .map(|_| Writer {
                state: Mutex::new(WriterState {
                    outs: HashMap::new(),
                    ready: VecDeque::new(),
                    stop: false,
                }),
                work: Condvar::new(),
            })
            .collect(),
        conns: Mutex::new(HashMap::new()),
        epoll,
        counters,
        closing: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
    });
    let listener = Arc::new(listener);
    let mut front = Vec::new(); // readers and acceptor: stopped first
    let mut back = Vec::new(); // deliverers and writers: drain, then stop
    let spawned = (|| -> std::result::Result<(), String> {
        let (r, d, w) = (cfg.readers, cfg.deliverers, cfg.writers);
        for i in 0..r {
            let chunk = buffer(CHUNK).map_err(|e| failed("reader", i, r, &e))?;
            let s = shared.clone();
            front.push(spawn("reader", i, r, move || reader(&s, chunk))?);
        }
        for i in 0..d {
            let s = shared.clone();
            back.push(spawn("deliverer", i, d, move || deliverer(&s, i))?);
        }
        for i in 0..w {
            let s = shared.clone();
            back.push(spawn("writer", i, w, move || writer(&s, i))?);
        }
        // Last: connections come in once the pools are there.
        let (s, l) = (shared.clone(), listener.clone());
        front.push(spawn("acceptor", 0, 1, move || acceptor(&s, &l))?);
        Ok(())
    })();
    let threads = front.len() + back.len();
    let result = match spawned {
        Ok(()) => signals
            .wait()
            .map(|_: Signal| ())
            .map_err(|e| Error::failed(format!("sigwait: {}", describe_errno(e)))),
        Err(what) => Err(Error::failed(format!(
            "{what}; stopped the {threads} threads already started"
        ))),
    };
    shutdown(&shared, &listener, (&wake_tx, &wake_rx), front, back);
    result?;
    Ok(Stats::now(cfg, &shared.counters, threads))
}

fn failed(role: &str, i: usize, n: usize, e: &std::io::Error) -> String {
    format!("cannot start {role} {} of {n}: {}", i + 1, describe_io(e))
}

/// A zeroed buffer whose allocation may fail without aborting.
fn buffer(len: usize) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| std::io::Error::from(ErrorKind::OutOfMemory))?;
    v.resize(len, 0);
    Ok(v)
}

/// Thread `i` of `n` of a pool, or the line that says why it cannot start.
fn spawn(
    role: &str,
    i: usize,
    n: usize,
    f: impl FnOnce() + Send + 'static,
) -> std::result::Result<JoinHandle<()>, String> {
    room_for_thread().map_err(|e| failed(role, i, n, &e))?;
    std::thread::Builder::new()
        .name(format!("{role}-{i}"))
        .stack_size(STACK)
        .spawn(f)
        .map_err(|e| failed(role, i, n, &e))
}

/// Whether the address space (RLIMIT_AS) has room for one more thread.
/// `Builder::spawn` returns pthread_create's error for the stack, but the
/// new thread then maps its own signal stack, and if that fails the
/// standard library panics inside the thread and the process aborts. So
/// ask first, with twice the stack as margin: a mapping of no pages, given
/// back at once.
fn room_for_thread() -> std::io::Result<()> {
    let len = 2 * STACK;
    // SAFETY: a new anonymous PROT_NONE mapping that nothing else refers
    // to; it is unmapped right away and only tests the address-space limit.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `p` is the mapping of `len` bytes made just above.
    unsafe { libc::munmap(p, len) };
    Ok(())
}

// ANCHOR: shutdown
/// Stop taking new work, deliver what was accepted (for at most `--drain`),
/// then stop and join every thread.
fn shutdown(
    shared: &Shared,
    listener: &TcpListener,
    (wake_tx, wake_rx): (&UnixStream, &UnixStream),
    front: Vec<JoinHandle<()>>,
    back: Vec<JoinHandle<()>>,
) {
    shared.closing.store(true, Relaxed);
    // SAFETY: shutdown(2) on a socket we own; it makes a blocked accept(2)
    // return, which is how the acceptor learns to stop.
    unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
    // The wake-up socket stays readable, so every reader sees it.
    let _ = { wake_tx }.write_all(b"x");
    for t in front {
        let _ = t.join();
    }
    let _ = shared.epoll.delete(wake_rx);
    // Every frame that arrived whole is kept, even past a queue's bound;
    // then the sender connections are closed.
    let senders = std::mem::take(&mut *lock(&shared.conns));
    for conn in senders.into_values() {
        keep_frames(shared, &mut lock(&conn));
    }
    lock(&shared.hub.state).paused.iter_mut().for_each(VecDeque::clear);
    // With the readers gone, this thread watches the receivers' sockets.
    let deadline = Instant::now() + shared.cfg.drain;
    let c = &shared.counters;
    let mut events = [EpollEvent::empty(); 64];
    while c.msgs_out.load(Relaxed) < c.msgs_in.load(Relaxed)
        && Instant::now() < deadline
    {
        let n = shared.epoll.wait(&mut events, EpollTimeout::from(2u8)).unwrap_or(0);
        for ev in &events[..n] {
            if ev.data() & RECEIVER != 0 {
                receiver_event(shared, ev.data() & !RECEIVER, ev.events());
            }
        }
    }
    lock(&shared.hub.state).stop = true;
    shared.hub.not_empty.notify_all();
    for w in &shared.writers {
        lock(&w.state).stop = true;
        w.work.notify_all();
    }
    for t in back {
        let _ = t.join();
    }
}
// ANCHOR_END: shutdown

/// At shutdown: queue the whole frames a sender connection still holds.
fn keep_frames(shared: &Shared, c: &mut Conn) {
    let (max, queues) = (shared.cfg.max_frame, shared.cfg.queues);
    while c.sender {
        match protocol::next_frame(&c.buf, &mut c.start, max, queues) {
            Ok(Some(Parsed::Publish { queue, frame })) => {
                shared.hub.push_anyway(usize::from(queue), frame, &shared.counters);
            }
            _ => return, // a partial frame, or bytes that are not a PUBLISH
        }
    }
}

fn acceptor(shared: &Shared, listener: &TcpListener) {
    let (mut no_fd, mut refused) = (Throttle::new(), Throttle::new());
    let max = shared.cfg.max_connections;
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                if shared.counters.open.load(Relaxed) >= max as u64 {
                    // Closed at once: the client sees the end of the stream.
                    shared.counters.refused.fetch_add(1, Relaxed);
                    refused.hit(|| {
                        format!(
                            "refused connection from {peer}: {max} connections \
                             open (--max-connections)"
                        )
                    });
                    continue;
                }
                shared.counters.connections.fetch_add(1, Relaxed);
                if let Err(e) = register(shared, stream, peer) {
                    eprintln!("broker: cannot serve {peer}: {e}");
                }
            }
            Err(_) if shared.closing.load(Relaxed) => return,
            Err(e) => {
                // EMFILE and friends: back off, and say so once in a while
                // rather than at every try.
                no_fd.hit(|| {
                    format!(
                        "accept: {}; retrying every {} ms",
                        describe_io(&e),
                        ACCEPT_BACKOFF.as_millis()
                    )
                });
                std::thread::sleep(ACCEPT_BACKOFF);
            }
        }
    }
}

fn register(shared: &Shared, stream: TcpStream, peer: SocketAddr) -> Result<()> {
    stream.set_nonblocking(true).map_err(|e| Error::io("O_NONBLOCK", e))?;
    let _ = stream.set_nodelay(true);
    crate::set_socket_buffers(&stream, shared.cfg.socket_buffer);
    let id = shared.next_id.fetch_add(1, Relaxed);
    let fd = stream.as_raw_fd();
    let slot = Slot::new(&shared.counters);
    let conn =
        Conn { stream, peer, buf: Vec::new(), start: 0, sender: false, _slot: slot };
    lock(&shared.conns).insert(id, Arc::new(Mutex::new(conn)));
    // SAFETY: the fd belongs to the connection just stored in the map, which
    // is only removed after it is deleted from the epoll set.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    shared.epoll.add(fd, EpollEvent::new(interest(), id)).map_err(|e| {
        lock(&shared.conns).remove(&id);
        Error::failed(format!("epoll_ctl: {}", describe_errno(e)))
    })
}

fn interest() -> EpollFlags {
    EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLONESHOT
}

fn reader(shared: &Shared, mut chunk: Vec<u8>) {
    let mut events = [EpollEvent::empty(); 1];
    loop {
        match shared.epoll.wait(&mut events, EpollTimeout::NONE) {
            Ok(1) => {}
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                eprintln!("broker: epoll_wait: {}", describe_errno(e));
                return;
            }
        }
        let (id, flags) = (events[0].data(), events[0].events());
        if id == WAKE {
            return;
        }
        if id & RECEIVER != 0 {
            receiver_event(shared, id & !RECEIVER, flags);
            continue;
        }
        if shared.closing.load(Relaxed) {
            continue; // shutdown takes the senders' last whole frames
        }
        let Some(conn) = lock(&shared.conns).get(&id).cloned() else { continue };
        let mut c = lock(&conn);
        match serve(shared, id, &conn, &mut c, &mut chunk) {
            Next::Keep => {
                let mut ev = EpollEvent::new(interest(), id);
                if shared.epoll.modify(&c.stream, &mut ev).is_ok() {
                    continue;
                }
                drop(c);
                forget(shared, id);
            }
            Next::Paused => {}
            Next::Close(why) => {
                if let Some(why) = why {
                    log_close(&shared.counters, c.peer, &why);
                }
                drop(c);
                forget(shared, id);
            }
            Next::Receiver(queue) => {
                let _ = shared.epoll.delete(&c.stream);
                let stream = c.stream.try_clone();
                let peer = c.peer;
                drop(c);
                match stream {
                    Ok(s) => add_receiver(shared, id, s, peer, queue),
                    Err(e) => eprintln!("broker: {peer}: dup: {}", describe_io(&e)),
                }
                lock(&shared.conns).remove(&id);
            }
        }
    }
}

fn forget(shared: &Shared, id: u64) {
    if let Some(conn) = lock(&shared.conns).remove(&id) {
        let _ = shared.epoll.delete(&lock(&conn).stream);
    }
}

/// Re-arm senders paused on a queue that has room again. EPOLLOUT is in
/// the mask because a sender's socket, never written to, is writable: the
/// event fires at once, even when the frames that wait are all in the
/// connection's buffer already and no new byte arrives.
fn resume_senders(shared: &Shared, paused: Vec<Paused>) {
    for (id, conn) in paused {
        let c = lock(&conn);
        let mut ev = EpollEvent::new(interest() | EpollFlags::EPOLLOUT, id);
        let _ = shared.epoll.modify(&c.stream, &mut ev);
    }
}

// ANCHOR: serve
/// Read what a connection has sent and act on every whole frame in it.
/// A frame for a full queue stays in the buffer and the connection is
/// paused: it is not read again until a deliverer resumes it.
fn serve(
    shared: &Shared,
    id: u64,
    conn: &Arc<Mutex<Conn>>,
    c: &mut Conn,
    chunk: &mut [u8],
) -> Next {
    // A resumed connection first pushes the frames it kept.
    if let Some(next) = take_frames(shared, (id, conn), c, false) {
        return next;
    }
    let (ended, error) = match (&c.stream).read(chunk) {
        Ok(0) => (true, None),
        Ok(n) => {
            c.buf.extend_from_slice(&chunk[..n]);
            (false, None)
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => (false, None),
        Err(e) if e.kind() == ErrorKind::Interrupted => (false, None),
        Err(e) => (true, Some(format!("read: {}", describe_io(&e)))),
    };
    if let Some(next) = take_frames(shared, (id, conn), c, ended) {
        return next;
    }
    protocol::compact(&mut c.buf, &mut c.start);
    match (ended, error) {
        (_, Some(e)) => Next::Close(Some(e)),
        (true, None) if !c.buf.is_empty() => Next::Close(Some(format!(
            "truncated frame: the connection ended {} bytes into a frame",
            c.buf.len()
        ))),
        (true, None) => Next::Close(None),
        (false, _) => Next::Keep,
    }
}

/// Act on the whole frames in the buffer: `None` once they are all taken.
fn take_frames(
    shared: &Shared,
    from: (u64, &Arc<Mutex<Conn>>),
    c: &mut Conn,
    ended: bool,
) -> Option<Next> {
    let (max, queues) = (shared.cfg.max_frame, shared.cfg.queues);
    loop {
        let mut start = c.start;
        let parsed = match protocol::next_frame(&c.buf, &mut start, max, queues) {
            Ok(None) => return None,
            Ok(Some(parsed)) => parsed,
            Err(violation) => return Some(Next::Close(Some(violation.to_string()))),
        };
        match parsed {
            Parsed::Publish { queue, frame } if c.sender => {
                let q = usize::from(queue);
                if !shared.hub.push(q, frame, from, &shared.counters) {
                    return Some(Next::Paused); // the frame stays in `buf`
                }
            }
            Parsed::HelloSend if !c.sender => c.sender = true,
            Parsed::HelloRecv { queue } if !c.sender => {
                if start < c.buf.len() {
                    let why = "receiver sent data after its hello";
                    return Some(Next::Close(Some(why.into())));
                }
                return Some(if ended {
                    Next::Close(None)
                } else {
                    Next::Receiver(queue)
                });
            }
            other => {
                let what = match other {
                    Parsed::Publish { .. } => "PUBLISH before HELLO_SEND",
                    _ => "a second hello",
                };
                return Some(Next::Close(Some(format!("protocol error: {what}"))));
            }
        }
        c.start = start;
    }
}
// ANCHOR_END: serve

fn add_receiver(
    shared: &Shared,
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    queue: u16,
) {
    let w = (id % shared.writers.len() as u64) as usize;
    let q = usize::from(queue);
    let outbox = Outbox {
        stream: Arc::new(stream),
        peer,
        queue: q,
        pending: VecDeque::new(),
        off: 0,
        queued: false,
        busy: false,
        stalled: false,
        _slot: Slot::new(&shared.counters),
    };
    let mut st = lock(&shared.writers[w].state);
    // Watched for the end of the connection from now on (see `arm`).
    let ev = EpollEvent::new(interest(), id | RECEIVER);
    if let Err(e) = shared.epoll.add(&*outbox.stream, ev) {
        eprintln!("broker: {peer}: epoll_ctl: {}", describe_errno(e));
        return;
    }
    st.outs.insert(id, outbox);
    drop(st);
    let receiver = Receiver { id, writer: w, held: 0 };
    lock(&shared.hub.state).receivers[q].push(receiver);
    shared.hub.not_empty.notify_all();
}

/// Re-arm a receiver's one-shot epoll entry, the writer's lock held: always
/// for the end of the connection, and for room to write when its socket
/// was full.
fn arm(shared: &Shared, out: &Outbox, id: u64) {
    let mut flags = interest();
    if out.stalled {
        flags |= EpollFlags::EPOLLOUT;
    }
    let _ = shared
        .epoll
        .modify(&*out.stream, &mut EpollEvent::new(flags, id | RECEIVER));
}

/// Epoll says a receiver's socket has room again, or that its peer closed
/// the connection (or sent something, which a receiver must not).
fn receiver_event(shared: &Shared, id: u64, flags: EpollFlags) {
    let w = (id % shared.writers.len() as u64) as usize;
    let writer = &shared.writers[w];
    let mut st = lock(&writer.state);
    let Some(out) = st.outs.get_mut(&id) else { return };
    let closed = EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLHUP;
    let why = if flags.contains(EpollFlags::EPOLLERR) {
        let e = out.stream.take_error().ok().flatten();
        Some(Some(e.map_or("connection error".into(), |e| describe_io(&e))))
    } else if flags.intersects(closed) {
        Some(None)
    } else if flags.contains(EpollFlags::EPOLLIN) {
        Some(Some("receiver sent data after its hello".to_string()))
    } else {
        None
    };
    if let Some(why) = why {
        drop(st);
        return drop_receiver(shared, w, id, why);
    }
    out.stalled = false;
    arm(shared, out, id);
    if st.schedule(id) {
        drop(st);
        writer.work.notify_one();
    }
}

/// Forget a receiver that has gone: what it had not been sent goes back to
/// the front of its queue.
fn drop_receiver(shared: &Shared, w: usize, id: u64, why: Option<String>) {
    let mut st = lock(&shared.writers[w].state);
    let Some(out) = st.outs.remove(&id) else { return };
    let _ = shared.epoll.delete(&*out.stream);
    drop(st);
    shared.hub.remove_receiver(out.queue, id);
    if let Some(why) = why {
        let back = out.pending.len();
        let why = format!("{why}; {back} messages go back to queue {}", out.queue);
        log_close(&shared.counters, out.peer, &why);
    }
    shared.hub.requeue(out.queue, out.pending.into_iter());
}

// ANCHOR: deliver
fn deliverer(shared: &Shared, me: usize) {
    let hub = &shared.hub;
    let queues = usize::from(shared.cfg.queues);
    let mut cursor = me % queues;
    loop {
        let mut st = lock(&hub.state);
        let (q, k) = loop {
            if st.stop {
                return;
            }
            if let Some(found) = st.next_ready(cursor, hub.outbox) {
                break found;
            }
            st = wait(&hub.not_empty, st);
        };
        cursor = q + 1;
        let room = hub.outbox - st.receivers[q][k].held;
        let n = st.queues[q].len().min(BATCH).min(room);
        st.receivers[q][k].held += n;
        let Receiver { id, writer, .. } = st.receivers[q][k];
        let batch: Vec<Frame> = st.queues[q].drain(..n).collect();
        // Below half full, let one paused sender of this queue in again
        // per batch taken (each brings up to a read's worth); all of them
        // once the queue is empty, so that none is forgotten.
        let left = st.queues[q].len();
        let k = match left {
            0 => st.paused[q].len(),
            _ if left <= hub.capacity / 2 => 1,
            _ => 0,
        };
        let k = k.min(st.paused[q].len());
        let resume: Vec<Paused> = st.paused[q].drain(..k).collect();
        drop(st);
        resume_senders(shared, resume);
        hand_over(shared, q, id, writer, batch);
    }
}

/// Put a batch in a receiver's outbox. The hub counted it against the
/// receiver's room, so this never waits.
fn hand_over(shared: &Shared, q: usize, id: u64, w: usize, batch: Vec<Frame>) {
    let writer = &shared.writers[w];
    let mut st = lock(&writer.state);
    let Some(out) = st.outs.get_mut(&id) else {
        // The receiver went away meanwhile: back to the queue.
        drop(st);
        return shared.hub.requeue(q, batch.into_iter());
    };
    out.pending.extend(batch);
    if st.schedule(id) {
        drop(st);
        writer.work.notify_one();
    }
}
// ANCHOR_END: deliver

// ANCHOR: write
fn writer(shared: &Shared, me: usize) {
    let writer = &shared.writers[me];
    loop {
        let mut st = lock(&writer.state);
        let id = loop {
            if st.stop {
                return;
            }
            if let Some(id) = st.ready.pop_front() {
                break id;
            }
            st = wait(&writer.work, st);
        };
        let Some(out) = st.outs.get_mut(&id) else { continue };
        out.queued = false;
        out.busy = true;
        let mut frames = std::mem::take(&mut out.pending);
        let mut off = std::mem::take(&mut out.off);
        let (stream, q) = (out.stream.clone(), out.queue);
        drop(st);
        let (done, result) = write_out(&stream, &mut frames, &mut off);
        shared.counters.msgs_out.fetch_add(done as u64, Relaxed);
        shared.hub.written(q, id, done);
        let mut st = lock(&writer.state);
        let Some(out) = st.outs.get_mut(&id) else {
            // Dropped while we wrote (its peer closed): the rest goes back.
            drop(st);
            shared.hub.requeue(q, frames.into_iter());
            continue;
        };
        out.busy = false;
        frames.append(&mut out.pending);
        (out.pending, out.off) = (frames, off);
        match result {
            Ok(true) => _ = st.schedule(id),
            Ok(false) => {
                out.stalled = true; // until epoll says it is writable
                arm(shared, out, id);
            }
            Err(why) => {
                drop(st);
                drop_receiver(shared, me, id, why);
            }
        }
    }
}

/// Write as much of `frames` as the socket takes without blocking. Returns
/// how many frames went out whole, and `Ok(true)` if all did, `Ok(false)`
/// if the socket is full, `Err` if the receiver has gone (`None`: it
/// closed its end, so nothing was written; `Some`: why the write failed).
fn write_out(
    stream: &TcpStream,
    frames: &mut VecDeque<Frame>,
    off: &mut usize,
) -> (usize, std::result::Result<bool, Option<String>>) {
    if *off == 0 && crate::peer_closed(stream) {
        return (0, Err(None));
    }
    let mut done = 0;
    while !frames.is_empty() {
        let mut slices = [IoSlice::new(&[]); 64];
        let n = frames.len().min(slices.len());
        for (i, f) in frames.iter().take(n).enumerate() {
            slices[i] = IoSlice::new(if i == 0 { &f[*off..] } else { f });
        }
        let mut wrote = match { stream }.write_vectored(&slices[..n]) {
            Ok(0) => return (done, Err(Some("write: wrote nothing".into()))),
            Ok(wrote) => wrote,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return (done, Ok(false)),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                return (done, Err(Some(format!("write: {}", describe_io(&e)))));
            }
        };
        while wrote > 0 {
            let left = frames[0].len() - *off;
            if wrote < left {
                *off += wrote;
                break;
            }
            wrote -= left;
            *off = 0;
            frames.pop_front();
            done += 1;
        }
    }
    (done, Ok(true))
}
// ANCHOR_END: write
