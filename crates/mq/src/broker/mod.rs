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
//! Batching, for pipelined senders: a reader takes up to 64 KiB per
//! `read` and pushes all the frames of it under one lock of the queues
//! (`Hub::push_many`); a deliverer moves up to 32 per trip; a writer
//! writes a receiver's waiting frames with one `writev` of up to 64, and
//! never waits for more (what the outbox holds when it wakes goes out).
//! Frames are still allocated by a reader and freed by a writer: with the
//! pools, a box crosses threads, and reusing it would take a shared pool
//! and its lock.
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

mod hub;
mod readers;
mod writers;

use hub::*;
use readers::*;
use writers::*;

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

/// A sender connection (or one that has not said hello yet).
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    start: usize,
    sender: bool,
    /// Its place under `--max-connections`, handed on to the receiver it
    /// may become: one connection is counted once, whatever it is.
    slot: Option<Slot>,
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
    // Returns once the thread runs, so that it has mapped its signal stack
    // (see `room_for_thread`) before the next thread's room is asked for:
    // threads created faster than they start would otherwise all pass the
    // check and then race for the last of the address space.
    let (started, running) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name(format!("{role}-{i}"))
        .stack_size(STACK)
        .spawn(move || {
            let _ = started.send(());
            f()
        })
        .map_err(|e| failed(role, i, n, &e))?;
    let _ = running.recv();
    Ok(thread)
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
