//! Whole-line output that a forked child may use.
//!
//! The C programs print with stdio, which flushes whenever its 4 KiB buffer
//! fills, in the middle of a line; when 255 children append to one log file
//! their half lines interleave. [`LineBuf`] flushes only at line ends, and
//! never more than `PIPE_BUF` (4096) bytes at once, so every `write(2)` holds
//! whole lines: on a file opened with `O_APPEND` each write lands in one
//! piece, and on a pipe writes of at most `PIPE_BUF` bytes are atomic.
//!
//! It owns a fixed array and formats numbers by hand, so it never allocates:
//! after `fork` in a process that may have had other threads, `malloc` can
//! deadlock, and a child must stick to async-signal-safe calls such as
//! `write`.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;

/// The largest write that a pipe guarantees not to interleave.
pub const CAPACITY: usize = libc::PIPE_BUF;

/// A fixed buffer of whole lines for one file descriptor, borrowed for
/// `'fd`: the file cannot be closed (dropped) while the buffer lives, so
/// its writes never go to another file that reuses the number.
///
/// ```
/// use std::os::fd::AsFd;
/// use labkit::lines::LineBuf;
///
/// let (_reader, writer) = std::io::pipe().unwrap();
/// let mut buf = LineBuf::new(writer.as_fd());
/// buf.line(0, b"hello linux").unwrap();
/// buf.flush().unwrap();
/// drop(buf);
/// drop(writer); // the file outlives its buffer
/// ```
///
/// A buffer cannot outlive its file: this does not compile.
///
/// ```compile_fail,E0505
/// use std::os::fd::AsFd;
/// use labkit::lines::LineBuf;
///
/// let (_reader, writer) = std::io::pipe().unwrap();
/// let mut buf = LineBuf::new(writer.as_fd());
/// drop(writer); // error: cannot move out of `writer`, it is borrowed
/// buf.line(0, b"hello linux").unwrap();
/// buf.flush().unwrap();
/// ```
pub struct LineBuf<'fd> {
    fd: BorrowedFd<'fd>,
    len: usize,
    buf: [u8; CAPACITY],
}

impl<'fd> LineBuf<'fd> {
    /// A buffer for `fd` (`file.as_fd()`), which stays open while it lives.
    pub fn new(fd: BorrowedFd<'fd>) -> Self {
        LineBuf { fd, len: 0, buf: [0; CAPACITY] }
    }

    /// A buffer for standard output (fd 1). It does not touch
    /// `std::io::stdout()`, whose first use allocates its buffer: not safe
    /// in a forked child, and in a new thread enough to make glibc reserve
    /// a 64 MiB malloc arena.
    pub fn stdout() -> LineBuf<'static> {
        // SAFETY: fd 1 stays open for the life of the process, as std
        // assumes too (`Stdout::as_fd` is a `BorrowedFd<'static>` of it):
        // the lab's programs never close it, and under I/O safety no code
        // may close a descriptor it does not own. (Started with fd 1
        // closed, a program writes wherever fd 1 later goes, as std's
        // stdout and the C originals' stdio do.)
        let fd = unsafe { BorrowedFd::borrow_raw(libc::STDOUT_FILENO) };
        LineBuf { fd, len: 0, buf: [0; CAPACITY] }
    }

    /// Append the line `[index]text\n`, first flushing the buffer if the
    /// line would not fit. A line longer than [`CAPACITY`] is refused with
    /// `EINVAL`, since it could not be written whole.
    pub fn line(&mut self, index: u64, text: &[u8]) -> Result<(), Errno> {
        let mut digits = [0u8; 20];
        let number = format_u64(index, &mut digits);
        let need = number.len() + text.len() + 3;
        if need > CAPACITY {
            return Err(Errno::EINVAL);
        }
        if self.len + need > CAPACITY {
            self.flush()?;
        }
        for part in [b"[".as_slice(), number, b"]", text, b"\n"] {
            self.buf[self.len..self.len + part.len()].copy_from_slice(part);
            self.len += part.len();
        }
        Ok(())
    }

    /// Write out the buffered lines (one `write` unless the kernel takes
    /// fewer bytes, which it does only on errors or signals).
    pub fn flush(&mut self) -> Result<(), Errno> {
        let mut done = 0;
        while done < self.len {
            let rest = &self.buf[done..self.len];
            let fd = self.fd.as_raw_fd();
            // SAFETY: `rest` is a valid, initialised slice for its length, and
            // write(2) is async-signal-safe. `fd` is borrowed for `'fd`, so
            // it is open and still names the caller's file.
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            match n {
                n if n > 0 => done += n as usize,
                0 => return Err(Errno::EIO),
                _ if Errno::last() == Errno::EINTR => continue,
                _ => return Err(Errno::last()),
            }
        }
        self.len = 0;
        Ok(())
    }
}

/// Where a worker's write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Log,
}

/// A worker's write failure as one exit status (a `fork` child's, or a
/// thread's return value): the errno, plus 128 when the log failed rather
/// than stdout. Write errors all have errno values below 128.
pub fn failure_status(sink: Sink, errno: Errno) -> i32 {
    let errno = (errno as i32).clamp(1, 127);
    match sink {
        Sink::Stdout => errno,
        Sink::Log => 128 + errno,
    }
}

/// "could not write stdout: No space left on device (ENOSPC)", from a
/// [`failure_status`].
pub fn describe_failure(status: i32) -> String {
    let (sink, errno) =
        if status >= 128 { ("the log", status - 128) } else { ("stdout", status) };
    format!(
        "could not write {sink}: {}",
        crate::error::describe_errno(Errno::from_raw(errno))
    )
}

/// Decimal digits of `n` in the tail of `out`, without allocating.
fn format_u64(mut n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut at = out.len();
    loop {
        at -= 1;
        out[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[at..];
        }
    }
}

/// The text each worker prints: the articles' `"hello linux"`, or a string
/// of exactly `len` bytes for the 256-byte variant of section three (the C
/// references' `line_text`, in `crates/labkit/c/labkit.h`, writes the same).
pub fn payload(len: Option<usize>) -> Vec<u8> {
    const HELLO: &[u8] = b"hello linux";
    match len {
        None => HELLO.to_vec(),
        Some(len) => HELLO.iter().chain(b" ").copied().cycle().take(len).collect(),
    }
}

/// Check one line `[index]text` against the expected text; returns the
/// index, or `None` if the line is malformed.
pub fn parse_line(line: &[u8], text: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"[")?;
    let close = rest.iter().position(|&b| b == b']')?;
    let (digits, tail) = rest.split_at(close);
    if digits.is_empty() || digits.len() > 19 || &tail[1..] != text {
        return None;
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// What a log of `workers` x `count` lines should look like, checked line by
/// line: every line well formed, every index `0..count` present exactly
/// `workers` times, and nothing else.
pub fn check_log(
    data: &[u8],
    text: &[u8],
    workers: u64,
    count: u64,
) -> Result<(), String> {
    if !data.is_empty() && !data.ends_with(b"\n") {
        return Err("the log ends in the middle of a line".into());
    }
    let mut seen = vec![0u64; count as usize];
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    for (n, line) in body.split(|&b| b == b'\n').enumerate() {
        if data.is_empty() {
            break;
        }
        let Some(index) = parse_line(line, text) else {
            let shown = String::from_utf8_lossy(&line[..line.len().min(60)]);
            return Err(format!("line {} is torn or malformed: {shown:?}", n + 1));
        };
        match seen.get_mut(index as usize) {
            Some(slot) => *slot += 1,
            None => {
                return Err(format!("line {} has index {index} >= {count}", n + 1));
            }
        }
    }
    if let Some((index, &times)) =
        seen.iter().enumerate().find(|(_, t)| **t != workers)
    {
        return Err(format!(
            "index {index} appears {times} times, expected {workers}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn failures_name_the_sink() {
        let out = failure_status(Sink::Stdout, Errno::ENOSPC);
        let log = failure_status(Sink::Log, Errno::ENOSPC);
        assert!(out < 256 && log < 256);
        assert_eq!(
            describe_failure(out),
            "could not write stdout: No space left on device (ENOSPC)"
        );
        assert_eq!(
            describe_failure(log),
            "could not write the log: No space left on device (ENOSPC)"
        );
    }

    #[test]
    fn lines_are_formatted_and_parsed() {
        let text = payload(None);
        assert_eq!(parse_line(b"[42]hello linux", &text), Some(42));
        assert_eq!(parse_line(b"[4x]hello linux", &text), None);
        assert_eq!(parse_line(b"[]hello linux", &text), None);
        assert_eq!(parse_line(b"[1]hello lin", &text), None);
        assert_eq!(payload(Some(256)).len(), 256);
        assert!(payload(Some(30)).starts_with(b"hello linux hello"));
    }

    #[test]
    fn buffer_flushes_whole_lines_only() {
        let (reader, writer) = std::io::pipe().unwrap();
        let text = payload(Some(1000));
        let mut buf = LineBuf::new(writer.as_fd());
        for i in 0..10 {
            buf.line(i, &text).unwrap();
        }
        buf.flush().unwrap();
        drop(writer);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &reader, &mut got).unwrap();
        assert_eq!(check_log(&got, &text, 1, 10), Ok(()));
    }

    #[test]
    fn check_log_finds_torn_missing_and_extra_lines() {
        let text = payload(None);
        assert!(check_log(b"[0]hello linux\n[1]hello linux\n", &text, 1, 2).is_ok());
        assert!(check_log(b"", &text, 0, 3).is_ok());
        let torn = check_log(b"[0]hello li[1]hello linux\nnux\n", &text, 1, 2);
        assert!(torn.unwrap_err().contains("torn"));
        let missing = check_log(b"[0]hello linux\n", &text, 1, 2);
        assert!(missing.unwrap_err().contains("index 1 appears 0 times"));
        let unfinished = check_log(b"[0]hello linux", &text, 1, 1);
        assert!(unfinished.unwrap_err().contains("middle of a line"));
        let extra = check_log(b"[5]hello linux\n", &text, 1, 2);
        assert!(extra.unwrap_err().contains(">= 2"));
    }

    #[test]
    fn overlong_lines_are_refused() {
        let (_r, w) = std::io::pipe().unwrap();
        let mut buf = LineBuf::new(w.as_fd());
        assert_eq!(buf.line(0, &vec![b'x'; CAPACITY]), Err(Errno::EINVAL));
    }
}
