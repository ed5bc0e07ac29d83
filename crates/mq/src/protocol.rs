//! The wire protocol: length-prefixed frames over TCP.
//!
//! ```text
//! frame   = length:u32 (big-endian) body[length]      1 <= length <= max
//! body    = kind:u8 rest
//! kind 1  HELLO_SEND                  client -> broker, first frame: "I publish"
//! kind 2  HELLO_RECV  queue:u16       client -> broker, first frame: "give me
//!                                     the messages of this queue"
//! kind 3  PUBLISH     queue:u16 data  sender -> broker
//! kind 4  DELIVER     queue:u16 data  broker -> receiver (the PUBLISH frame with
//!                                     its kind byte changed)
//! ```
//!
//! A connection says what it is with its first frame and keeps that role.
//! A queue is point to point: each message goes to exactly one of the
//! receivers of its queue. The data is opaque to the broker; the load
//! generator puts a 20-byte header in it ([`Stamp`]). A receiver sends
//! nothing after its hello. Anything else (a zero or oversized length, an
//! unknown kind, a queue that does not exist, a frame before the hello, a
//! connection that ends inside a frame) closes that connection only; every
//! frame received whole before it was already accepted and is delivered.
//!
//! There are no acknowledgements: a message counts as delivered once it is
//! written whole to a receiver's socket. Messages a broker had not yet
//! written to a receiver that vanished go back to the front of the queue;
//! what already sat in that receiver's socket buffers is gone with it. The
//! broker peeks at a receiver's socket before it writes, so it writes
//! nothing to (and counts nothing on) a connection its receiver has closed.

/// Bytes of the length prefix.
pub const LEN: usize = 4;
pub const HELLO_SEND: u8 = 1;
pub const HELLO_RECV: u8 = 2;
pub const PUBLISH: u8 = 3;
pub const DELIVER: u8 = 4;
/// Bytes before the data of a PUBLISH or DELIVER frame: length, kind, queue.
pub const HEADER: usize = LEN + 1 + 2;
/// Default largest frame body the broker accepts.
pub const DEFAULT_MAX_FRAME: u64 = 1 << 20;

/// A whole frame as it travels, length prefix included.
pub type Frame = Box<[u8]>;

/// What a connection's next frame says.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    HelloSend,
    HelloRecv {
        queue: u16,
    },
    /// A PUBLISH frame for `queue`, turned into the DELIVER frame to forward.
    Publish {
        queue: u16,
        frame: Frame,
    },
}

/// Why a connection was closed.
#[derive(Debug, PartialEq, Eq)]
pub enum Violation {
    ZeroLength,
    Oversized { length: u64, max: u64 },
    UnknownKind(u8),
    ShortBody { kind: u8, length: usize },
    NoSuchQueue { queue: u16, queues: u16 },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::ZeroLength => write!(f, "malformed frame: length 0"),
            Violation::Oversized { length, max } => {
                write!(f, "oversized frame: length {length} > max {max}")
            }
            Violation::UnknownKind(k) => {
                write!(f, "malformed frame: unknown kind {k}")
            }
            Violation::ShortBody { kind, length } => {
                write!(f, "malformed frame: kind {kind} with a {length}-byte body")
            }
            Violation::NoSuchQueue { queue, queues } => {
                write!(f, "no such queue {queue} (the broker has {queues})")
            }
        }
    }
}

// ANCHOR: parse
/// Take the next whole frame off the front of `buf`: `Ok(None)` when it
/// holds only part of one (read more), `Err` when the bytes break the
/// protocol. `start` moves past each frame taken; [`compact`] later drops
/// the consumed bytes.
pub fn next_frame(
    buf: &[u8],
    start: &mut usize,
    max: u64,
    queues: u16,
) -> Result<Option<Parsed>, Violation> {
    next_frame_reusing(buf, start, max, queues, &mut Vec::new())
}

/// [`next_frame`], taking a PUBLISH frame's box from `spare` when one of
/// the right length is on top (the event loop gives back the boxes of
/// frames it has written), so that a steady stream of messages of one size
/// allocates nothing per message.
pub fn next_frame_reusing(
    buf: &[u8],
    start: &mut usize,
    max: u64,
    queues: u16,
    spare: &mut Vec<Frame>,
) -> Result<Option<Parsed>, Violation> {
    let rest = &buf[*start..];
    if rest.len() < LEN {
        return Ok(None);
    }
    let length = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if length == 0 {
        return Err(Violation::ZeroLength);
    }
    if u64::from(length) > max {
        return Err(Violation::Oversized { length: length.into(), max });
    }
    let total = LEN + length as usize;
    if rest.len() < total {
        return Ok(None);
    }
    let body = &rest[LEN..total];
    let queue = |body: &[u8]| -> Result<u16, Violation> {
        if body.len() < 3 {
            return Err(Violation::ShortBody { kind: body[0], length: body.len() });
        }
        let q = u16::from_be_bytes([body[1], body[2]]);
        if q >= queues {
            Err(Violation::NoSuchQueue { queue: q, queues })
        } else {
            Ok(q)
        }
    };
    let parsed = match body[0] {
        HELLO_SEND => Parsed::HelloSend,
        HELLO_RECV => Parsed::HelloRecv { queue: queue(body)? },
        PUBLISH => {
            let q = queue(body)?;
            let mut frame: Frame = match spare.pop() {
                Some(mut f) if f.len() == total => {
                    f.copy_from_slice(&rest[..total]);
                    f
                }
                _ => rest[..total].into(),
            };
            frame[LEN] = DELIVER;
            Parsed::Publish { queue: q, frame }
        }
        kind => return Err(Violation::UnknownKind(kind)),
    };
    *start += total;
    Ok(Some(parsed))
}
// ANCHOR_END: parse

/// Spare capacity a connection's buffer keeps once a frame is through.
pub const KEEP: usize = 64 << 10;

/// Drop the bytes before `start` once parsing has consumed them. The buffer
/// only ever grows with the bytes that arrived (never with the length a
/// frame announces), and gives back what a large frame made it grow.
pub fn compact(buf: &mut Vec<u8>, start: &mut usize) {
    if *start > 0 {
        buf.drain(..*start);
        *start = 0;
    }
    if buf.capacity() > 2 * KEEP && buf.len() <= KEEP {
        buf.shrink_to(KEEP);
    }
}

/// A HELLO frame.
pub fn hello(kind: u8, queue: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(7);
    if kind == HELLO_RECV {
        f.extend_from_slice(&3u32.to_be_bytes());
        f.push(kind);
        f.extend_from_slice(&queue.to_be_bytes());
    } else {
        f.extend_from_slice(&1u32.to_be_bytes());
        f.push(kind);
    }
    f
}

/// What the load generator puts at the start of each message's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub sender: u32,
    pub seq: u64,
    /// Nanoseconds since the load generator started.
    pub sent_ns: u64,
}

impl Stamp {
    pub const SIZE: usize = 20;

    /// Append a PUBLISH frame for `queue` with `size` bytes of data: the
    /// stamp, then a filler the receiver checks.
    pub fn publish(&self, queue: u16, size: usize, out: &mut Vec<u8>) {
        let length = (1 + 2 + size) as u32;
        out.extend_from_slice(&length.to_be_bytes());
        out.push(PUBLISH);
        out.extend_from_slice(&queue.to_be_bytes());
        self.data(size, out);
    }

    /// Append a message's `size` bytes of data: the stamp, then the filler
    /// (the part every broker's protocol carries, [`crate::wire`]).
    pub fn data(&self, size: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sender.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.sent_ns.to_be_bytes());
        let fill = self.filler();
        pattern(size, |p| {
            out.extend_from_slice(&p[usize::from(fill)..][Stamp::SIZE..size])
        });
    }

    fn filler(&self) -> u8 {
        (self.sender as u8) ^ (self.seq as u8)
    }

    /// Read the stamp back from a DELIVER body (kind byte onwards) and
    /// check its filler; `None` if the body is not one the load generator
    /// sent.
    pub fn check(body: &[u8], queue: u16, size: usize) -> Option<Stamp> {
        if body.len() != 3 + size || body[0] != DELIVER {
            return None;
        }
        if u16::from_be_bytes([body[1], body[2]]) != queue {
            return None;
        }
        Stamp::check_data(&body[3..], size)
    }

    /// Read the stamp back from a message's data and check its filler;
    /// `None` if the data are not `size` bytes the load generator sent.
    pub fn check_data(d: &[u8], size: usize) -> Option<Stamp> {
        if d.len() != size || size < Stamp::SIZE {
            return None;
        }
        let stamp = Stamp {
            sender: u32::from_be_bytes(d[0..4].try_into().ok()?),
            seq: u64::from_be_bytes(d[4..12].try_into().ok()?),
            sent_ns: u64::from_be_bytes(d[12..20].try_into().ok()?),
        };
        let fill = usize::from(stamp.filler());
        let ok = pattern(size, |p| d[Stamp::SIZE..] == p[fill..][Stamp::SIZE..size]);
        ok.then_some(stamp)
    }
}

/// Call `f` with the bytes 0, 1, ..., 255, 0, 1, ... (at least `size` +
/// 256 of them): byte `i` of a message's filler is `fill + i` (mod 256),
/// which is `pattern[fill + i]`, so making and checking the filler are one
/// copy and one comparison (memcpy, memcmp) rather than a loop per byte,
/// which at 1 KiB cost the load generator more than a syscall.
fn pattern<T>(size: usize, f: impl FnOnce(&[u8]) -> T) -> T {
    thread_local! {
        static PATTERN: std::cell::RefCell<Vec<u8>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    PATTERN.with_borrow_mut(|p| {
        if p.len() < size + 256 {
            *p = (0..size + 256).map(|i| i as u8).collect();
        }
        f(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Option<Parsed>, Violation> {
        next_frame(bytes, &mut 0, 64, 4)
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = hello(HELLO_SEND, 0);
        buf.extend(hello(HELLO_RECV, 3));
        let stamp = Stamp { sender: 7, seq: 9, sent_ns: 11 };
        stamp.publish(2, 40, &mut buf);
        let mut start = 0;
        let mut next = || next_frame(&buf, &mut start, 64, 4).unwrap();
        assert_eq!(next(), Some(Parsed::HelloSend));
        assert_eq!(next(), Some(Parsed::HelloRecv { queue: 3 }));
        let Some(Parsed::Publish { queue: 2, frame }) = next() else { panic!() };
        assert_eq!(Stamp::check(&frame[LEN..], 2, 40), Some(stamp));
        assert_eq!(Stamp::check(&frame[LEN..], 1, 40), None);
        assert_eq!(next(), None);
    }

    #[test]
    fn bad_frames_are_named() {
        assert_eq!(parse(&[0, 0, 0, 0]), Err(Violation::ZeroLength));
        assert_eq!(
            parse(&[255, 255, 255, 255]),
            Err(Violation::Oversized { length: u32::MAX.into(), max: 64 })
        );
        assert_eq!(parse(&[0, 0, 0, 1, 9]), Err(Violation::UnknownKind(9)));
        assert_eq!(
            parse(&[0, 0, 0, 3, 3, 0, 4]),
            Err(Violation::NoSuchQueue { queue: 4, queues: 4 })
        );
        assert_eq!(
            parse(&[0, 0, 0, 1, 3]),
            Err(Violation::ShortBody { kind: 3, length: 1 })
        );
        assert_eq!(parse(&[0, 0, 0, 9, 3, 0]), Ok(None), "partial frame");
    }

    #[test]
    fn corrupted_data_is_caught() {
        let mut buf = Vec::new();
        Stamp { sender: 1, seq: 2, sent_ns: 3 }.publish(0, 64, &mut buf);
        buf[LEN] = DELIVER;
        buf[40] ^= 1;
        assert_eq!(Stamp::check(&buf[LEN..], 0, 64), None);
    }
}
