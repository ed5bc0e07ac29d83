//! The queues, who receives from them, and the writers' outboxes: the
//! broker's shared state and its back-pressure bookkeeping.

use super::*;

/// The queues and who receives from them.
pub(super) struct Hub {
    pub(super) state: Mutex<HubState>,
    /// Deliverers wait here for a queue with messages and a receiver with
    /// room.
    pub(super) not_empty: Condvar,
    pub(super) capacity: usize,
    pub(super) outbox: usize,
}

pub(super) struct HubState {
    pub(super) queues: Vec<VecDeque<Frame>>,
    pub(super) receivers: Vec<Vec<Receiver>>,
    pub(super) next: Vec<usize>,
    /// Per queue: the senders paused because it was full.
    pub(super) paused: Vec<VecDeque<Paused>>,
    pub(super) stop: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Receiver {
    pub(super) id: u64,
    pub(super) writer: usize,
    /// Messages handed to its outbox and not yet written.
    pub(super) held: usize,
}

impl Hub {
    // ANCHOR: push
    /// A reader's push of the frames of one read, each with the buffer
    /// offset where it ends, under one lock. Stops at the first frame for
    /// a full queue and pauses the connection (back pressure on this queue's senders only): then
    /// returns the offset where the frames taken end (the rest stay in the
    /// connection's buffer). Returns the offset where the frames taken
    /// end (`None`: none was) and whether it paused. Empties `batch`.
    pub(super) fn push_many(
        &self,
        batch: &mut Vec<(usize, Frame, usize)>,
        from: (u64, &Arc<Mutex<Conn>>),
        counters: &Counters,
    ) -> (Option<usize>, bool) {
        let mut st = lock(&self.state);
        let (mut woke, mut taken, mut paused) = (false, 0u64, false);
        let mut last = None;
        for (queue, frame, at) in batch.drain(..) {
            if paused {
                continue; // dropped: still in the connection's buffer
            }
            if st.queues[queue].len() >= self.capacity {
                st.paused[queue].push_back((from.0, from.1.clone()));
                paused = true;
                continue;
            }
            st.queues[queue].push_back(frame);
            woke |= st.queues[queue].len() == 1;
            taken += 1;
            last = Some(at);
        }
        drop(st);
        counters.msgs_in.fetch_add(taken, Relaxed);
        if woke {
            self.not_empty.notify_all();
        }
        (last, paused)
    }
    // ANCHOR_END: push

    /// At shutdown: keep a frame that arrived whole, even past the bound.
    pub(super) fn push_anyway(
        &self,
        queue: usize,
        frame: Frame,
        counters: &Counters,
    ) {
        lock(&self.state).queues[queue].push_back(frame);
        counters.msgs_in.fetch_add(1, Relaxed);
        self.not_empty.notify_one();
    }

    /// Put messages a receiver did not get back at the front of the queue.
    pub(super) fn requeue(
        &self,
        queue: usize,
        frames: impl DoubleEndedIterator<Item = Frame>,
    ) {
        let mut st = lock(&self.state);
        for f in frames.rev() {
            st.queues[queue].push_front(f);
        }
        drop(st);
        self.not_empty.notify_all();
    }

    pub(super) fn remove_receiver(&self, queue: usize, id: u64) {
        lock(&self.state).receivers[queue].retain(|r| r.id != id);
    }

    /// A writer wrote `n` of a receiver's messages: that much room again.
    pub(super) fn written(&self, queue: usize, id: u64, n: usize) {
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
    pub(super) fn next_ready(
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
pub(super) struct Writer {
    pub(super) state: Mutex<WriterState>,
    /// The writer waits here for a ready outbox.
    pub(super) work: Condvar,
}

pub(super) struct WriterState {
    pub(super) outs: HashMap<u64, Outbox>,
    /// Receivers with something to write, no write in progress and room in
    /// their socket.
    pub(super) ready: VecDeque<u64>,
    pub(super) stop: bool,
}

impl WriterState {
    /// Put a receiver on the ready list if it belongs there; true if it
    /// was added.
    pub(super) fn schedule(&mut self, id: u64) -> bool {
        let Some(out) = self.outs.get_mut(&id) else { return false };
        if out.queued || out.busy || out.stalled || out.pending.is_empty() {
            return false;
        }
        out.queued = true;
        self.ready.push_back(id);
        true
    }
}

pub(super) struct Outbox {
    pub(super) stream: Arc<TcpStream>,
    pub(super) peer: SocketAddr,
    pub(super) queue: usize,
    pub(super) pending: VecDeque<Frame>,
    /// Bytes of `pending[0]` already written.
    pub(super) off: usize,
    /// On the writer's ready list.
    pub(super) queued: bool,
    /// A writer is writing its frames (they are out of `pending`).
    pub(super) busy: bool,
    /// Its socket was full: it waits for epoll to say it is writable.
    pub(super) stalled: bool,
    pub(super) _slot: Slot,
}
