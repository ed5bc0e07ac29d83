//! The acceptor and the readers: new connections, and the frames senders
//! send, onto their queues (or paused on a full one).

use super::*;

pub(super) fn acceptor(shared: &Shared, listener: &TcpListener) {
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
                no_fd.accept_failed(&e);
                std::thread::sleep(ACCEPT_BACKOFF);
            }
        }
    }
}

pub(super) fn register(
    shared: &Shared,
    stream: TcpStream,
    peer: SocketAddr,
) -> Result<()> {
    stream.set_nonblocking(true).map_err(|e| Error::io("O_NONBLOCK", e))?;
    let _ = stream.set_nodelay(true);
    crate::set_socket_buffers(&stream, shared.cfg.socket_buffer);
    let id = shared.next_id.fetch_add(1, Relaxed);
    let fd = stream.as_raw_fd();
    let slot = Some(Slot::new(&shared.counters));
    let conn = Conn { stream, peer, buf: Vec::new(), start: 0, sender: false, slot };
    lock(&shared.conns).insert(id, Arc::new(Mutex::new(conn)));
    // SAFETY: the borrow ends with epoll.add below; until then no reader
    // can get an event for `id`, so none removes the connection, and
    // shutdown takes the map only after joining this acceptor thread, so
    // the connection and its fd stay open.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    shared.epoll.add(fd, EpollEvent::new(interest(), id)).map_err(|e| {
        lock(&shared.conns).remove(&id);
        Error::failed(format!("epoll_ctl: {}", describe_errno(e)))
    })
}

pub(super) fn interest() -> EpollFlags {
    EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLONESHOT
}

pub(super) fn reader(shared: &Shared, mut chunk: Vec<u8>) {
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
                let (peer, slot) = (c.peer, c.slot.take());
                drop(c);
                match stream {
                    Ok(s) => add_receiver(shared, id, s, peer, queue, slot),
                    Err(e) => eprintln!("broker: {peer}: dup: {}", describe_io(&e)),
                }
                lock(&shared.conns).remove(&id);
            }
        }
    }
}

pub(super) fn forget(shared: &Shared, id: u64) {
    if let Some(conn) = lock(&shared.conns).remove(&id) {
        let _ = shared.epoll.delete(&lock(&conn).stream);
    }
}

/// Re-arm senders paused on a queue that has room again. EPOLLOUT is in
/// the mask because a sender's socket, never written to, is writable: the
/// event fires at once, even when the frames that wait are all in the
/// connection's buffer already and no new byte arrives.
pub(super) fn resume_senders(shared: &Shared, paused: Vec<Paused>) {
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
pub(super) fn serve(
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
/// The PUBLISH frames of one read go to the hub together, under one lock
/// ([`Hub::push_many`]), not one lock per message.
pub(super) fn take_frames(
    shared: &Shared,
    from: (u64, &Arc<Mutex<Conn>>),
    c: &mut Conn,
    ended: bool,
) -> Option<Next> {
    let (max, queues) = (shared.cfg.max_frame, shared.cfg.queues);
    let mut batch: Vec<(usize, Frame, usize)> = Vec::new();
    let mut start = c.start;
    let stop = loop {
        let parsed = match protocol::next_frame(&c.buf, &mut start, max, queues) {
            Ok(None) => break None,
            Ok(Some(parsed)) => parsed,
            Err(violation) => break Some(Next::Close(Some(violation.to_string()))),
        };
        match parsed {
            Parsed::Publish { queue, frame } if c.sender => {
                batch.push((usize::from(queue), frame, start));
                continue;
            }
            _ if !batch.is_empty() => {
                // A hello after publishes: push those first, then look at
                // it again from where they end.
                break None;
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
    };
    if batch.is_empty() {
        return stop;
    }
    let (end, paused) = shared.hub.push_many(&mut batch, from, &shared.counters);
    if let Some(end) = end {
        c.start = end;
    }
    if paused {
        // A frame for a full queue: it and those after it stay in `buf`.
        return Some(Next::Paused);
    }
    // Whatever stopped the parse (a violation, a hello after the
    // publishes) is met again on the next pass.
    match stop {
        Some(next) => Some(next),
        None => take_frames(shared, from, c, ended),
    }
}
// ANCHOR_END: serve
