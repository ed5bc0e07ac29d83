//! The receivers' side: deliverers move batches from the queues into
//! outboxes, writers write them out without blocking.

use super::*;

/// Connection `id`, which said it receives from `queue`, becomes a
/// receiver; it keeps the slot it was counted with as a connection (a new
/// one would count it twice until the connection is dropped, and a
/// connection accepted meanwhile could be refused).
pub(super) fn add_receiver(
    shared: &Shared,
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    queue: u16,
    slot: Option<Slot>,
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
        _slot: slot.unwrap_or_else(|| Slot::new(&shared.counters)),
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
pub(super) fn arm(shared: &Shared, out: &Outbox, id: u64) {
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
pub(super) fn receiver_event(shared: &Shared, id: u64, flags: EpollFlags) {
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
pub(super) fn drop_receiver(
    shared: &Shared,
    w: usize,
    id: u64,
    why: Option<String>,
) {
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

// ANCHOR: deliverer
pub(super) fn deliverer(shared: &Shared, me: usize) {
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
// ANCHOR_END: deliverer

// ANCHOR: hand_over
/// Put a batch in a receiver's outbox. The hub counted it against the
/// receiver's room, so this never waits.
pub(super) fn hand_over(
    shared: &Shared,
    q: usize,
    id: u64,
    w: usize,
    batch: Vec<Frame>,
) {
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
// ANCHOR_END: hand_over

// ANCHOR: write
pub(super) fn writer(shared: &Shared, me: usize) {
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
pub(super) fn write_out(
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
