//! The thread-pool broker: an acceptor, R readers, D deliverers and W
//! writers around Q bounded queues, the shape of the 2006 server.
//!
//! - Readers share one epoll set of sender connections, each registered
//!   `EPOLLONESHOT` so that one reader at a time owns a connection: it reads
//!   what has arrived, parses whole frames and pushes them onto their queue,
//!   waiting while the queue is full (back pressure: the connection is not
//!   read, TCP's window closes, the sender's `write` blocks).
//! - Deliverers take batches off the queues and hand each batch to the next
//!   receiver of that queue (round robin), waiting while that receiver's
//!   outbox is full.
//! - Writers own the receiver connections (receiver `i` belongs to writer
//!   `i mod W`) and write outboxes out with blocking writes.
//!
//! A receiver whose write fails is dropped and what it had not been sent
//! goes back to the front of its queue for the other receivers. (Once a
//! receiver has said hello its socket is only written to, so a receiver that
//! vanishes is noticed at the next write to it.)

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use labkit::error::{Error, Result, describe_errno, describe_io};
use nix::sys::epoll::{
    Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout,
};
use nix::sys::signal::{SigSet, Signal};

use crate::protocol::{self, Frame, Parsed};
use crate::{Config, Counters, Stats};

/// Messages a deliverer moves per trip to the queues.
const BATCH: usize = 32;
/// Bytes a reader asks for per read.
const CHUNK: usize = 64 << 10;
/// The epoll token of the readers' wake-up socket.
const WAKE: u64 = u64::MAX;

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

/// The queues and who receives from them.
struct Hub {
    state: Mutex<HubState>,
    /// Deliverers wait here for messages.
    not_empty: Condvar,
    /// Readers wait here for room.
    not_full: Condvar,
    capacity: usize,
}

struct HubState {
    queues: Vec<VecDeque<Frame>>,
    /// Per queue: (receiver id, its writer).
    receivers: Vec<Vec<(u64, usize)>>,
    next: Vec<usize>,
    closing: bool,
    stop: bool,
}

impl Hub {
    // ANCHOR: push
    /// A reader's push: wait while the queue is full (back pressure), except
    /// when the broker is closing and every parsed message must be kept.
    fn push(&self, queue: usize, frame: Frame, counters: &Counters) {
        let mut st = lock(&self.state);
        while st.queues[queue].len() >= self.capacity && !st.closing {
            st = wait(&self.not_full, st);
        }
        st.queues[queue].push_back(frame);
        counters.msgs_in.fetch_add(1, Relaxed);
        drop(st);
        self.not_empty.notify_one();
    }
    // ANCHOR_END: push

    /// Put messages a receiver did not get back at the front of the queue.
    fn requeue(&self, queue: usize, frames: Vec<Frame>) {
        let mut st = lock(&self.state);
        for f in frames.into_iter().rev() {
            st.queues[queue].push_front(f);
        }
        drop(st);
        self.not_empty.notify_all();
    }

    fn remove_receiver(&self, queue: usize, id: u64) {
        lock(&self.state).receivers[queue].retain(|&(r, _)| r != id);
    }
}

/// A writer's receivers and their outboxes.
struct Writer {
    state: Mutex<WriterState>,
    /// The writer waits here for a ready outbox.
    work: Condvar,
    /// Deliverers wait here for room in an outbox.
    space: Condvar,
}

struct WriterState {
    outs: HashMap<u64, Outbox>,
    /// Receivers with something to write and no write in progress.
    ready: VecDeque<u64>,
    stop: bool,
}

struct Outbox {
    stream: Arc<TcpStream>,
    peer: SocketAddr,
    queue: usize,
    pending: Vec<Frame>,
    busy: bool,
}

/// A sender connection (or one that has not said hello yet).
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    start: usize,
    sender: bool,
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
                closing: false,
                stop: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity: cfg.capacity,
        },
        writers: (0..cfg.writers)
            .map(|_| Writer {
                state: Mutex::new(WriterState {
                    outs: HashMap::new(),
                    ready: VecDeque::new(),
                    stop: false,
                }),
                work: Condvar::new(),
                space: Condvar::new(),
            })
            .collect(),
        conns: Mutex::new(HashMap::new()),
        epoll,
        counters,
        closing: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
    });
    let listener = Arc::new(listener);
    let mut front = Vec::new(); // acceptor and readers: stopped first
    let mut back = Vec::new(); // deliverers and writers: drain, then stop
    let spawned = (|| -> std::io::Result<()> {
        let (s, l) = (shared.clone(), listener.clone());
        front.push(spawn("acceptor".into(), move || acceptor(&s, &l))?);
        for i in 0..cfg.readers {
            let s = shared.clone();
            front.push(spawn(format!("reader-{i}"), move || reader(&s))?);
        }
        for i in 0..cfg.deliverers {
            let s = shared.clone();
            back.push(spawn(format!("deliverer-{i}"), move || deliverer(&s, i))?);
        }
        for i in 0..cfg.writers {
            let s = shared.clone();
            back.push(spawn(format!("writer-{i}"), move || writer(&s, i))?);
        }
        Ok(())
    })();
    let threads = front.len() + back.len();
    let result = match spawned {
        Ok(()) => signals
            .wait()
            .map(|_: Signal| ())
            .map_err(|e| Error::failed(format!("sigwait: {}", describe_errno(e)))),
        Err(e) => Err(Error::io(format!("cannot start thread {}", threads + 1), e)),
    };
    shutdown(&shared, &listener, &wake_tx, front, back);
    result?;
    Ok(Stats::now(cfg, &shared.counters, threads))
}

fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    // Small stacks: the threads only shuffle boxed frames, and a 100-thread
    // pool should not reserve 800 MiB of address space.
    std::thread::Builder::new().name(name).stack_size(256 << 10).spawn(f)
}

// ANCHOR: shutdown
/// Stop taking new work, deliver what was accepted (for at most `--drain`),
/// then stop and join every thread.
fn shutdown(
    shared: &Shared,
    listener: &TcpListener,
    wake: &UnixStream,
    front: Vec<JoinHandle<()>>,
    back: Vec<JoinHandle<()>>,
) {
    shared.closing.store(true, Relaxed);
    lock(&shared.hub.state).closing = true;
    shared.hub.not_full.notify_all();
    // SAFETY: shutdown(2) on a socket we own; it makes a blocked accept(2)
    // return, which is how the acceptor learns to stop.
    unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
    // The wake-up socket stays readable, so every reader sees it.
    let _ = (&*wake).write_all(b"x");
    for t in front {
        let _ = t.join();
    }
    lock(&shared.conns).clear(); // closes the sender connections
    let deadline = Instant::now() + shared.cfg.drain;
    let c = &shared.counters;
    while c.msgs_out.load(Relaxed) < c.msgs_in.load(Relaxed)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    lock(&shared.hub.state).stop = true;
    shared.hub.not_empty.notify_all();
    for w in &shared.writers {
        let mut st = lock(&w.state);
        st.stop = true;
        for out in st.outs.values() {
            // Unblocks a writer stuck on a receiver that stopped reading.
            let _ = out.stream.shutdown(Shutdown::Both);
        }
        drop(st);
        w.work.notify_all();
        w.space.notify_all();
    }
    for t in back {
        let _ = t.join();
    }
}
// ANCHOR_END: shutdown

fn acceptor(shared: &Shared, listener: &TcpListener) {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                shared.counters.connections.fetch_add(1, Relaxed);
                if let Err(e) = register(shared, stream, peer) {
                    eprintln!("broker: cannot serve {peer}: {e}");
                }
            }
            Err(_) if shared.closing.load(Relaxed) => return,
            Err(e) => {
                // EMFILE and friends: say so and breathe rather than spin.
                eprintln!("broker: accept: {}", describe_io(&e));
                std::thread::sleep(Duration::from_millis(50));
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
    let conn = Conn { stream, peer, buf: Vec::new(), start: 0, sender: false };
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

fn reader(shared: &Shared) {
    let mut events = [EpollEvent::empty(); 1];
    let mut chunk = vec![0u8; CHUNK];
    loop {
        match shared.epoll.wait(&mut events, EpollTimeout::NONE) {
            Ok(1) => {}
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                eprintln!("broker: epoll_wait: {}", describe_errno(e));
                return;
            }
        }
        let id = events[0].data();
        if id == WAKE || shared.closing.load(Relaxed) {
            return;
        }
        let Some(conn) = lock(&shared.conns).get(&id).cloned() else { continue };
        let mut c = lock(&conn);
        let next = serve(shared, &mut c, &mut chunk);
        match next {
            Next::Keep => {
                let mut ev = EpollEvent::new(interest(), id);
                if shared.epoll.modify(&c.stream, &mut ev).is_ok() {
                    continue;
                }
                drop(c);
                forget(shared, id);
            }
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
                lock(&shared.conns).remove(&id);
                match stream {
                    Ok(s) => add_receiver(shared, id, s, peer, queue),
                    Err(e) => eprintln!("broker: {peer}: dup: {}", describe_io(&e)),
                }
            }
        }
    }
}

fn forget(shared: &Shared, id: u64) {
    if let Some(conn) = lock(&shared.conns).remove(&id) {
        let _ = shared.epoll.delete(&lock(&conn).stream);
    }
}

// ANCHOR: serve
/// Read what a connection has sent and act on every whole frame in it.
fn serve(shared: &Shared, c: &mut Conn, chunk: &mut [u8]) -> Next {
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
    let (max, queues) = (shared.cfg.max_frame, shared.cfg.queues);
    loop {
        match protocol::next_frame(&c.buf, &mut c.start, max, queues) {
            Ok(None) => break,
            Ok(Some(Parsed::Publish { queue, frame })) if c.sender => {
                shared.hub.push(usize::from(queue), frame, &shared.counters);
            }
            Ok(Some(Parsed::HelloSend)) if !c.sender => c.sender = true,
            Ok(Some(Parsed::HelloRecv { queue })) if !c.sender => {
                if c.start < c.buf.len() {
                    let why = "receiver sent data after its hello";
                    return Next::Close(Some(why.into()));
                }
                return if ended {
                    Next::Close(None)
                } else {
                    Next::Receiver(queue)
                };
            }
            Ok(Some(other)) => {
                let what = match other {
                    Parsed::Publish { .. } => "PUBLISH before HELLO_SEND",
                    _ => "a second hello",
                };
                return Next::Close(Some(format!("protocol error: {what}")));
            }
            Err(violation) => return Next::Close(Some(violation.to_string())),
        }
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
// ANCHOR_END: serve

fn add_receiver(
    shared: &Shared,
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    queue: u16,
) {
    if let Err(e) = stream.set_nonblocking(false) {
        eprintln!("broker: {peer}: {}", describe_io(&e));
        return;
    }
    let w = (id % shared.writers.len() as u64) as usize;
    let q = usize::from(queue);
    let outbox = Outbox {
        stream: Arc::new(stream),
        peer,
        queue: q,
        pending: Vec::new(),
        busy: false,
    };
    lock(&shared.writers[w].state).outs.insert(id, outbox);
    lock(&shared.hub.state).receivers[q].push((id, w));
    shared.hub.not_empty.notify_all();
}

// ANCHOR: deliver
fn deliverer(shared: &Shared, me: usize) {
    let hub = &shared.hub;
    let queues = usize::from(shared.cfg.queues);
    let mut cursor = me % queues;
    loop {
        let mut st = lock(&hub.state);
        let q = loop {
            if st.stop {
                return;
            }
            let ready = |q: &usize| {
                !st.queues[*q].is_empty() && !st.receivers[*q].is_empty()
            };
            if let Some(q) = (0..queues).map(|i| (cursor + i) % queues).find(ready) {
                break q;
            }
            st = wait(&hub.not_empty, st);
        };
        cursor = q + 1;
        let n = st.queues[q].len().min(BATCH);
        let batch: Vec<Frame> = st.queues[q].drain(..n).collect();
        let k = st.next[q] % st.receivers[q].len();
        st.next[q] = st.next[q].wrapping_add(1);
        let (id, w) = st.receivers[q][k];
        drop(st);
        hub.not_full.notify_all();
        hand_over(shared, q, id, w, batch);
    }
}

/// Put a batch in a receiver's outbox, waiting while it is full.
fn hand_over(shared: &Shared, q: usize, id: u64, w: usize, batch: Vec<Frame>) {
    let writer = &shared.writers[w];
    let mut st = lock(&writer.state);
    loop {
        if st.stop {
            return;
        }
        match st.outs.get(&id) {
            None => {
                // The receiver went away meanwhile: back to the queue.
                drop(st);
                shared.hub.requeue(q, batch);
                return;
            }
            Some(out) if out.pending.len() >= shared.cfg.outbox => {
                st = wait(&writer.space, st);
            }
            Some(_) => break,
        }
    }
    let out = st.outs.get_mut(&id).expect("checked above");
    let was_idle = out.pending.is_empty() && !out.busy;
    out.pending.extend(batch);
    if was_idle {
        st.ready.push_back(id);
        drop(st);
        writer.work.notify_one();
    }
}
// ANCHOR_END: deliver

fn writer(shared: &Shared, me: usize) {
    let writer = &shared.writers[me];
    let mut buf = Vec::new();
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
        let frames = std::mem::take(&mut out.pending);
        out.busy = true;
        let stream = out.stream.clone();
        drop(st);
        writer.space.notify_all();
        buf.clear();
        for f in &frames {
            buf.extend_from_slice(f);
        }
        let written = (&*stream).write_all(&buf);
        let mut st = lock(&writer.state);
        match written {
            Ok(()) => {
                shared.counters.msgs_out.fetch_add(frames.len() as u64, Relaxed);
                let out = st.outs.get_mut(&id).expect("only this writer removes");
                out.busy = false;
                if !out.pending.is_empty() {
                    st.ready.push_back(id);
                }
            }
            Err(e) => {
                let out = st.outs.remove(&id).expect("only this writer removes");
                let stopping = st.stop;
                drop(st);
                writer.space.notify_all();
                shared.hub.remove_receiver(out.queue, id);
                if stopping {
                    continue;
                }
                log_close(
                    &shared.counters,
                    out.peer,
                    &format!(
                        "write: {}; {} messages go back to queue {}",
                        describe_io(&e),
                        frames.len() + out.pending.len(),
                        out.queue
                    ),
                );
                let mut back = frames;
                back.extend(out.pending);
                shared.hub.requeue(out.queue, back);
            }
        }
    }
}
