//! The wire protocols `load` speaks: the lab broker's frames
//! ([`crate::protocol`]), Redis pub/sub (RESP: `PUBLISH`, `SUBSCRIBE`) and
//! NATS core pub/sub (`PUB`, `SUB` with a queue group), spoken directly
//! rather than through a client crate, so that every broker gets the same
//! load generator: one connection per sender and per receiver, one
//! message per write (or `--pipeline N`: N in one write, as a client that
//! buffers its publishes sends them), no flushing policy of a library's own.
//!
//! A queue of the lab broker is point to point: each message goes to one
//! of its receivers. NATS gives the same with a queue group: the receivers
//! of queue `q` subscribe to subject `q<q>` in group `g<q>`, and the server
//! hands each message to one member. Redis pub/sub has no such groups (a
//! message goes to every subscriber of its channel), so the receivers of
//! queue `q` each subscribe to a channel of their own, `q<q>.<lane>`, and
//! a sender spreads its messages over the queue's lanes in turn. Either
//! way each message is meant for exactly one receiver, which the load
//! generator's stamps check.

use std::io::{self, BufRead, ErrorKind, Read, Write};
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

use crate::protocol::{self, HELLO_RECV, HELLO_SEND, Stamp};

/// Which broker's protocol the load generator speaks.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Wire {
    /// The lab's broker (`broker`)
    #[default]
    Lab,
    /// Redis pub/sub
    Redis,
    /// NATS core pub/sub with queue groups
    Nats,
}

impl Wire {
    /// Its `--protocol` spelling: `lab`.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Lab => "lab",
            Wire::Redis => "redis",
            Wire::Nats => "nats",
        }
    }
}

/// How many receivers serve `queue` when `receivers` are dealt over
/// `queues` in turn (receiver `j` takes queue `j mod queues`, as lane
/// `j / queues`).
pub fn lanes(queue: u16, receivers: u32, queues: u16) -> u32 {
    let q = u32::from(queues);
    receivers / q + u32::from(u32::from(queue) < receivers % q)
}

/// A Redis channel: one per receiver.
fn channel(queue: u16, lane: u32) -> String {
    format!("q{queue}.{lane}")
}

/// A NATS subject: one per queue.
fn subject(queue: u16) -> String {
    format!("q{queue}")
}

/// The bytes of one message for `queue` (to `lane`, on Redis), appended
/// to `out`.
pub fn publish(
    wire: Wire,
    stamp: &Stamp,
    queue: u16,
    lane: u32,
    size: usize,
    out: &mut Vec<u8>,
) {
    match wire {
        Wire::Lab => stamp.publish(queue, size, out),
        Wire::Redis => {
            let ch = channel(queue, lane);
            let head = format!(
                "*3\r\n$7\r\nPUBLISH\r\n${}\r\n{ch}\r\n${size}\r\n",
                ch.len()
            );
            out.extend_from_slice(head.as_bytes());
            stamp.data(size, out);
            out.extend_from_slice(b"\r\n");
        }
        Wire::Nats => {
            out.extend_from_slice(
                format!("PUB {} {size}\r\n", subject(queue)).as_bytes(),
            );
            stamp.data(size, out);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Say what a new sender connection is: the lab broker's hello; NATS's
/// handshake (its INFO, our CONNECT, a PING answered, so the server has
/// taken the connection); nothing on Redis.
pub fn sender_hello(wire: Wire, stream: &mut TcpStream) -> io::Result<()> {
    match wire {
        Wire::Lab => stream.write_all(&protocol::hello(HELLO_SEND, 0)),
        Wire::Redis => Ok(()),
        Wire::Nats => {
            let mut r = io::BufReader::new(stream.try_clone()?);
            nats_handshake(stream, &mut r, "")
        }
    }
}

/// Subscribe a receiver to `queue` as lane `lane`, and wait until the
/// server says the subscription stands (Redis's confirmation, a NATS PONG
/// after the SUB): a message published after this returns reaches it.
pub fn receiver_hello(
    wire: Wire,
    r: &mut io::BufReader<TcpStream>,
    queue: u16,
    lane: u32,
) -> io::Result<()> {
    match wire {
        Wire::Lab => r.get_mut().write_all(&protocol::hello(HELLO_RECV, queue)),
        Wire::Redis => {
            let ch = channel(queue, lane);
            let cmd = format!("*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{ch}\r\n", ch.len());
            r.get_mut().write_all(cmd.as_bytes())?;
            // *3 $9 subscribe $len channel :1
            let mut line = Vec::new();
            expect_line(r, &mut line, b"*3")?;
            let kind = bulk(r, &mut line)?;
            let name = bulk(r, &mut line)?;
            if kind != b"subscribe" || name != ch.as_bytes() {
                return Err(bad(format!(
                    "redis: unexpected reply to SUBSCRIBE {ch}"
                )));
            }
            read_line(r, &mut line)?;
            if !line.starts_with(b":") {
                return Err(bad(format!("redis: SUBSCRIBE {ch}: {}", show(&line))));
            }
            Ok(())
        }
        Wire::Nats => {
            let sub = format!("SUB {} g{queue} 1\r\n", subject(queue));
            let mut stream = r.get_ref().try_clone()?;
            nats_handshake(&mut stream, r, &sub)
        }
    }
}

/// NATS: read the server's INFO, send CONNECT (no acknowledgements, no
/// echo), then `extra` (a SUB) and a PING, and read up to the PONG.
fn nats_handshake(
    w: &mut TcpStream,
    r: &mut io::BufReader<TcpStream>,
    extra: &str,
) -> io::Result<()> {
    let mut line = Vec::new();
    read_line(r, &mut line)?;
    if !line.starts_with(b"INFO ") {
        return Err(bad(format!("nats: expected INFO, got {}", show(&line))));
    }
    let connect = r#"CONNECT {"verbose":false,"pedantic":false,"echo":false,"lang":"rust","name":"lab-load"}"#;
    w.write_all(format!("{connect}\r\n{extra}PING\r\n").as_bytes())?;
    loop {
        read_line(r, &mut line)?;
        match &line[..] {
            b"PONG" => return Ok(()),
            l if l.starts_with(b"-ERR") => {
                return Err(bad(format!("nats: {}", show(l))));
            }
            _ => {} // +OK, INFO updates
        }
    }
}

/// The end of a sender's stream, once its last message is written: the
/// lab broker gets an end of stream at a frame boundary; Redis's replies
/// are read to the last (each PUBLISH answered: the server has taken it);
/// NATS answers a PING only after every PUB before it. `replies` holds
/// the Redis replies still unread.
pub fn sender_done(
    wire: Wire,
    stream: &mut TcpStream,
    replies: &mut Replies,
) -> io::Result<()> {
    match wire {
        Wire::Lab => stream.shutdown(std::net::Shutdown::Write),
        Wire::Redis => replies.read_all(stream),
        Wire::Nats => {
            stream.write_all(b"PING\r\n")?;
            let mut r = io::BufReader::new(stream.try_clone()?);
            let mut line = Vec::new();
            loop {
                read_line(&mut r, &mut line)?;
                match &line[..] {
                    b"PONG" => return Ok(()),
                    b"PING" => stream.write_all(b"PONG\r\n")?,
                    l if l.starts_with(b"-ERR") => {
                        return Err(bad(format!("nats: {}", show(l))));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A Redis sender's replies (`:N`, one per PUBLISH), read as they come
/// without waiting ([`Replies::read_ready`]) so that they never pile up in
/// the socket, and to the last at the end ([`Replies::read_all`]).
#[derive(Default)]
pub struct Replies {
    /// PUBLISHes written whose reply has not been read.
    pub pending: u64,
    /// Inside a reply line (its first byte already seen).
    in_line: bool,
    buf: Vec<u8>,
}

impl Replies {
    /// Count `n` more PUBLISHes written.
    pub fn sent(&mut self, n: u64) {
        self.pending += n;
    }

    /// Read what replies have arrived, without blocking.
    pub fn read_ready(&mut self, stream: &TcpStream) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.buf.is_empty() {
            self.buf.resize(64 << 10, 0);
        }
        loop {
            // SAFETY: recv into our own buffer of buf.len() bytes, on a
            // socket the stream owns; MSG_DONTWAIT never blocks.
            let n = unsafe {
                libc::recv(
                    stream.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    ErrorKind::WouldBlock => Ok(()),
                    ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            self.count(n as usize)?;
        }
    }

    /// Read replies, waiting for them, until every PUBLISH has its own.
    /// The socket's read timeout, if set, ends a wait with an error.
    pub fn read_all(&mut self, mut stream: &TcpStream) -> io::Result<()> {
        if self.buf.is_empty() {
            self.buf.resize(64 << 10, 0);
        }
        while self.pending > 0 {
            let n = match stream.read(&mut self.buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.count(n)?;
        }
        Ok(())
    }

    /// Count the reply lines in the first `n` bytes of the buffer; a reply
    /// other than an integer (`-ERR ...`) is an error.
    fn count(&mut self, n: usize) -> io::Result<()> {
        for &b in &self.buf[..n] {
            if !self.in_line {
                if b != b':' {
                    let text = String::from_utf8_lossy(&self.buf[..n]);
                    let line =
                        text.lines().find(|l| !l.starts_with(':')).unwrap_or("");
                    return Err(bad(format!("redis: PUBLISH answered {line:?}")));
                }
                self.in_line = true;
            } else if b == b'\n' {
                self.in_line = false;
                self.pending = self.pending.saturating_sub(1);
            }
        }
        Ok(())
    }
}

/// What a receiver read next.
pub enum Next {
    /// A message's data, for the receiver's own queue (and lane).
    Data,
    /// A message for another queue or channel, or not a message at all.
    Wrong(String),
}

/// Read the next message a receiver of `queue` (lane `lane`) is given into
/// `body` (its data only), answering a NATS server's PING on the way.
/// An end of stream or a read error is an `Err`, and so are bytes that
/// break the protocol (`InvalidData`: nothing after them can be framed).
pub fn next_message(
    wire: Wire,
    r: &mut io::BufReader<TcpStream>,
    line: &mut Vec<u8>,
    body: &mut Vec<u8>,
    queue: u16,
    lane: u32,
    size: usize,
) -> io::Result<Next> {
    match wire {
        Wire::Lab => {
            let mut len = [0u8; protocol::LEN];
            r.read_exact(&mut len)?;
            let n = u32::from_be_bytes(len) as usize;
            if n != 3 + size {
                return Err(bad(format!(
                    "frame of {n} bytes, expected {}",
                    3 + size
                )));
            }
            // The kind and queue apart from the data, so that the data
            // land where the caller checks them, with no move after.
            let mut head = [0u8; 3];
            r.read_exact(&mut head)?;
            body.resize(size, 0);
            r.read_exact(body)?;
            let q = u16::from_be_bytes([head[1], head[2]]);
            if head[0] != protocol::DELIVER || q != queue {
                return Ok(Next::Wrong(format!(
                    "frame of kind {} for queue {q}",
                    head[0]
                )));
            }
            Ok(Next::Data)
        }
        Wire::Redis => {
            // *3 $7 message $len channel $size data
            // Into the caller's buffers: no allocation per message.
            expect_line(r, line, b"*3")?;
            bulk_into(r, line, body)?;
            if body != b"message" {
                return Ok(Next::Wrong(format!("a {} push", show(body))));
            }
            bulk_into(r, line, body)?;
            let ch = channel(queue, lane);
            if body != ch.as_bytes() {
                let why = format!("a message on channel {}", show(body));
                bulk_into(r, line, body)?;
                return Ok(Next::Wrong(why));
            }
            bulk_into(r, line, body)?;
            Ok(Next::Data)
        }
        Wire::Nats => loop {
            read_line(r, line)?;
            if line == b"PING" {
                r.get_mut().write_all(b"PONG\r\n")?;
                continue;
            }
            if line.starts_with(b"-ERR") {
                return Err(bad(format!("nats: {}", show(line))));
            }
            if !line.starts_with(b"MSG ") {
                continue; // +OK, INFO
            }
            // MSG <subject> <sid> [reply-to] <bytes>, read in place.
            let mut words = line.split(|&b| b == b' ');
            let subj = words.nth(1).unwrap_or_default();
            let n = words
                .next_back()
                .and_then(|w| std::str::from_utf8(w).ok()?.parse::<usize>().ok())
                .ok_or_else(|| bad(format!("nats: bad MSG line {}", show(line))))?;
            let wrong = (subj != subject(queue).as_bytes())
                .then(|| format!("a message on subject {}", show(subj)));
            body.resize(n + 2, 0);
            r.read_exact(body)?;
            body.truncate(n);
            return Ok(wrong.map_or(Next::Data, Next::Wrong));
        },
    }
}

/// One CRLF-terminated line into `line`, without its CRLF.
fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<()> {
    line.clear();
    if r.read_until(b'\n', line)? == 0 {
        return Err(ErrorKind::UnexpectedEof.into());
    }
    if line.ends_with(b"\r\n") {
        line.truncate(line.len() - 2);
        Ok(())
    } else {
        Err(ErrorKind::UnexpectedEof.into())
    }
}

fn expect_line(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    want: &[u8],
) -> io::Result<()> {
    read_line(r, line)?;
    if line == want {
        Ok(())
    } else {
        Err(bad(format!("redis: expected {}, got {}", show(want), show(line))))
    }
}

/// A RESP bulk string into `out`, which keeps its allocation.
fn bulk_into(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    read_line(r, line)?;
    let len = line
        .strip_prefix(b"$")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            bad(format!("redis: expected a bulk string, got {}", show(line)))
        })?;
    out.resize(len + 2, 0);
    r.read_exact(out)?;
    out.truncate(len);
    Ok(())
}

/// A RESP bulk string: `$len`, then `len` bytes and CRLF.
fn bulk(r: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    read_line(r, line)?;
    let len = line
        .strip_prefix(b"$")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            bad(format!("redis: expected a bulk string, got {}", show(line)))
        })?;
    let mut data = vec![0u8; len + 2];
    r.read_exact(&mut data)?;
    data.truncate(len);
    Ok(data)
}

fn show(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]);
    format!("{text:?}")
}

fn bad(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_are_dealt_over_the_queues_in_turn() {
        // 10 receivers on 4 queues: 3, 3, 2, 2.
        let l: Vec<u32> = (0..4).map(|q| lanes(q, 10, 4)).collect();
        assert_eq!(l, [3, 3, 2, 2]);
        assert_eq!(l.iter().sum::<u32>(), 10);
        assert_eq!(lanes(0, 100, 4), 25);
    }

    #[test]
    fn messages_are_framed_for_each_protocol() {
        let stamp = Stamp { sender: 3, seq: 7, sent_ns: 9 };
        let mut data = Vec::new();
        stamp.data(24, &mut data);
        assert_eq!(data.len(), 24);
        assert_eq!(Stamp::check_data(&data, 24), Some(stamp));

        let mut redis = Vec::new();
        publish(Wire::Redis, &stamp, 2, 1, 24, &mut redis);
        let head = b"*3\r\n$7\r\nPUBLISH\r\n$4\r\nq2.1\r\n$24\r\n";
        assert!(redis.starts_with(head));
        assert_eq!(&redis[head.len()..redis.len() - 2], &data[..]);
        assert!(redis.ends_with(b"\r\n"));

        let mut nats = Vec::new();
        publish(Wire::Nats, &stamp, 2, 1, 24, &mut nats);
        assert!(nats.starts_with(b"PUB q2 24\r\n"));
        assert_eq!(nats.len(), "PUB q2 24\r\n".len() + 24 + 2);
    }

    #[test]
    fn redis_replies_are_counted_and_an_error_is_named() {
        let mut r = Replies::default();
        r.sent(3);
        r.buf = b":1\r\n:1\r".to_vec();
        r.count(7).unwrap();
        assert_eq!(r.pending, 2, "a line cut short is not yet a reply");
        r.buf = b"\n:0\r\n".to_vec();
        r.count(5).unwrap();
        assert_eq!(r.pending, 0);
        r.sent(1);
        r.buf = b"-ERR wrong number of arguments\r\n".to_vec();
        let e = r.count(32).unwrap_err();
        assert!(e.to_string().contains("ERR wrong number"), "{e}");
    }

    #[test]
    fn resp_bulk_strings_and_lines_parse() {
        let mut input: &[u8] = b"*3\r\n$7\r\nmessage\r\n$4\r\nq0.0\r\n$3\r\nabc\r\n";
        let mut line = Vec::new();
        expect_line(&mut input, &mut line, b"*3").unwrap();
        assert_eq!(bulk(&mut input, &mut line).unwrap(), b"message");
        assert_eq!(bulk(&mut input, &mut line).unwrap(), b"q0.0");
        assert_eq!(bulk(&mut input, &mut line).unwrap(), b"abc");
        let mut cut: &[u8] = b"$10\r\nabc";
        assert!(bulk(&mut cut, &mut line).is_err());
        let mut no_crlf: &[u8] = b"*3";
        assert_eq!(
            read_line(&mut no_crlf, &mut line).unwrap_err().kind(),
            ErrorKind::UnexpectedEof
        );
    }
}
