//! The protocol of Stevens' `web_child.c`: the client sends a line holding a
//! byte count, the server answers with exactly that many bytes, and so on
//! until the client closes.
//!
//! Every design shares this module, so they differ only in how they get a
//! connection to serve. Two things differ from the original on purpose:
//!
//! - A bad request (not a number, zero, more than `--max-bytes`, a line
//!   longer than [`MAX_LINE`], a connection that ends mid-line) closes that
//!   one connection. `web_child.c` called `err_quit`, which ended the whole
//!   child process, so one garbage line took a pool member down.
//! - Every blocking read and write has a timeout (`SO_RCVTIMEO`,
//!   `SO_SNDTIMEO`, `--timeout`): a client that connects and never sends
//!   would otherwise hold an iterative server, or a pool member, forever.
//!
//! The reply is not zeros: byte `i` of every reply is `ALPHABET[i % 64]`,
//! so the client can check that it got exactly the bytes asked for.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::meter::Meter;

/// The longest request line, newline included; a longer one is garbage.
pub const MAX_LINE: usize = 32;

/// The largest reply Stevens' server would send (`MAXN`).
pub const STEVENS_MAX: usize = 16384;

/// The reply's repeating pattern.
pub const ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// What every reply is cut from: [`STEVENS_MAX`] bytes of the pattern.
/// Longer replies are written from it in pieces; since 16384 is a multiple
/// of 64 the pattern runs on unbroken from one piece to the next.
pub static REPLY: [u8; STEVENS_MAX] = {
    let mut r = [0u8; STEVENS_MAX];
    let mut i = 0;
    while i < STEVENS_MAX {
        r[i] = ALPHABET[i % 64];
        i += 1;
    }
    r
};

/// How a connection is served, the same for every design.
#[derive(Clone, Copy, Debug)]
pub struct Proto {
    /// The largest count a client may ask for.
    pub max_bytes: usize,
    /// Read the request one byte per `read(2)`, as Stevens' threaded
    /// servers did (their `readline` was the unbuffered one).
    pub byte_reads: bool,
    /// Longest wait for a request or for room to write the reply.
    pub timeout: Duration,
}

// ANCHOR: parse
/// The count in a request line (without its newline; a trailing `\r` is
/// allowed), or why the line is refused.
pub fn parse(line: &[u8], max: usize) -> Result<usize, &'static str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() || !line.iter().all(u8::is_ascii_digit) {
        return Err("garbage request: not a byte count");
    }
    // At most MAX_LINE digits: a u64 holds 19, so saturate instead.
    let n = line
        .iter()
        .fold(0u64, |n, d| n.saturating_mul(10).saturating_add(u64::from(d - b'0')));
    if n == 0 || n > max as u64 {
        return Err("absurd request: count is 0 or above --max-bytes");
    }
    Ok(n as usize)
}
// ANCHOR_END: parse

/// A request line being assembled from reads, for the blocking and the
/// event-driven designs alike.
pub struct LineReader {
    buf: [u8; MAX_LINE],
    have: usize,
}

impl Default for LineReader {
    fn default() -> Self {
        LineReader { buf: [0; MAX_LINE], have: 0 }
    }
}

impl LineReader {
    /// The next whole request in what has been read, if any: `Ok(count)`,
    /// or `Err(why)` for a line that must close the connection.
    pub fn next(&mut self, max: usize) -> Option<Result<usize, &'static str>> {
        match self.buf[..self.have].iter().position(|&b| b == b'\n') {
            Some(nl) => {
                let parsed = parse(&self.buf[..nl], max);
                self.buf.copy_within(nl + 1..self.have, 0);
                self.have -= nl + 1;
                Some(parsed)
            }
            None if self.have == MAX_LINE => {
                Some(Err("garbage request: line too long"))
            }
            None => None,
        }
    }

    /// Where the next read goes: one byte with `byte_reads`, else the rest
    /// of the buffer.
    pub fn space(&mut self, byte_reads: bool) -> &mut [u8] {
        let end = if byte_reads { self.have + 1 } else { MAX_LINE };
        &mut self.buf[self.have..end]
    }

    /// Count `n` bytes just read into [`LineReader::space`].
    pub fn filled(&mut self, n: usize) {
        self.have += n;
    }

    /// Bytes of an unfinished line (at end of file: half a request).
    pub fn pending(&self) -> usize {
        self.have
    }
}

/// The bytes `offset..` of a reply of `total` bytes, at most one piece.
pub fn reply_piece(offset: usize, total: usize) -> &'static [u8] {
    let start = offset % STEVENS_MAX;
    let len = (total - offset).min(STEVENS_MAX - start);
    &REPLY[start..start + len]
}

/// What serving one connection did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Served {
    pub requests: u64,
    pub bytes: u64,
    /// Why the server closed the connection early; `None` when the client
    /// closed it after whole requests.
    pub error: Option<&'static str>,
}

/// The reason for an I/O error, as a fixed string (no allocation, so a
/// forked child may use it).
pub fn io_reason(e: &std::io::Error, writing: bool) -> &'static str {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut if writing => {
            "timed out writing the reply (client not reading)"
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            "timed out waiting for a request"
        }
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset if writing => {
            "the client left mid-reply"
        }
        ErrorKind::ConnectionReset => "the client reset the connection",
        _ => "I/O error on the connection",
    }
}

/// Set the read and write timeouts of an accepted connection.
pub fn set_timeouts(stream: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))
}

// ANCHOR: serve
/// Serve one connection with blocking calls until the client closes it
/// (`web_child.c`). Only `read(2)` and `write(2)` on a fixed buffer: no
/// allocation, no lock, so a forked child may call it.
pub fn serve(mut stream: &TcpStream, proto: &Proto, meter: &Meter) -> Served {
    let mut served = Served::default();
    let mut lines = LineReader::default();
    loop {
        let count = match lines.next(proto.max_bytes) {
            Some(Ok(count)) => count,
            Some(Err(why)) => return Served { error: Some(why), ..served },
            None => match stream.read(lines.space(proto.byte_reads)) {
                Ok(0) if lines.pending() == 0 => return served,
                Ok(0) => {
                    let why = "half a request: the client closed mid-line";
                    return Served { error: Some(why), ..served };
                }
                Ok(n) => {
                    lines.filled(n);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Served { error: Some(io_reason(&e, false)), ..served };
                }
            },
        };
        let mut sent = 0;
        while sent < count {
            match stream.write(reply_piece(sent, count)) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    served.bytes += sent as u64;
                    return Served { error: Some(io_reason(&e, true)), ..served };
                }
            }
        }
        served.requests += 1;
        served.bytes += count as u64;
        meter.replied(count);
    }
}
// ANCHOR_END: serve

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_like_atol_but_strictly() {
        assert_eq!(parse(b"4000", STEVENS_MAX), Ok(4000));
        assert_eq!(parse(b"4000\r", STEVENS_MAX), Ok(4000));
        assert_eq!(parse(b"16384", STEVENS_MAX), Ok(16384));
        assert!(parse(b"16385", STEVENS_MAX).is_err());
        assert!(parse(b"0", STEVENS_MAX).is_err());
        assert!(parse(b"", STEVENS_MAX).is_err());
        assert!(parse(b"-5", STEVENS_MAX).is_err());
        assert!(parse(b"12ab", STEVENS_MAX).is_err());
        assert!(parse(b"99999999999999999999999999999", 1 << 30).is_err());
    }

    #[test]
    fn lines_split_across_reads_and_overflow() {
        let mut l = LineReader::default();
        for chunk in [&b"40"[..], b"00\n7\n", b"1"] {
            let space = l.space(false);
            space[..chunk.len()].copy_from_slice(chunk);
            l.filled(chunk.len());
        }
        assert_eq!(l.next(STEVENS_MAX), Some(Ok(4000)));
        assert_eq!(l.next(STEVENS_MAX), Some(Ok(7)));
        assert_eq!(l.next(STEVENS_MAX), None);
        assert_eq!(l.pending(), 1);
        assert_eq!(l.space(true).len(), 1);
        let mut long = LineReader::default();
        let n = long.space(false).len();
        long.filled(n);
        assert!(matches!(long.next(STEVENS_MAX), Some(Err(_))));
    }

    #[test]
    fn reply_pieces_continue_the_pattern() {
        let total = 40_000;
        let mut got = Vec::new();
        while got.len() < total {
            got.extend_from_slice(reply_piece(got.len(), total));
        }
        assert_eq!(got.len(), total);
        assert!(got.iter().enumerate().all(|(i, &b)| b == ALPHABET[i % 64]));
    }
}
