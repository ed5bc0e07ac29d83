//! serv05: prefork with descriptor passing. Only the parent accepts. Each
//! child has a Unix stream socket to the parent; the parent sends an
//! accepted connection to the first idle child with `SCM_RIGHTS`, and the
//! child writes one byte back when it has finished, which makes it idle
//! again. While every child is busy the parent stops watching the listener,
//! so connections wait in the kernel's queue. The first idle child always
//! gets the next connection, so the meter shows the early children doing
//! most of the work, as Stevens observed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use labkit::error::{Error, Result, describe_errno, describe_io};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::prefork::{Children, serve};
use crate::{Config, Meters, Outcome};

struct Member {
    pipe: UnixStream,
    busy: bool,
    alive: bool,
}

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let signals =
        SignalFd::with_flags(&crate::stop_signals(), SfdFlags::SFD_CLOEXEC)
            .map_err(|e| {
                Error::failed(format!("signalfd: {}", describe_errno(e)))
            })?;
    let mut kids = Children::default();
    let mut members: Vec<Member> = Vec::new();
    for i in 0..cfg.pool {
        let (parent_end, child_end) =
            UnixStream::pair().map_err(|e| Error::io("socketpair", e))?;
        let body = || {
            // SAFETY: close(2) (async-signal-safe, no allocation) of the
            // child's copies of what only the parent uses: the listener,
            // the parent's end of this pair and of every earlier child's
            // pair (so that when the parent closes them, every child reads
            // end of file at once, not only after the later children have
            // exited). The child never uses these descriptors again.
            unsafe {
                libc::close(listener.as_raw_fd());
                libc::close(parent_end.as_raw_fd());
                for m in &members {
                    libc::close(m.pipe.as_raw_fd());
                }
            }
            child(i, &child_end, cfg, meters)
        };
        // SAFETY: `body` is async-signal-safe and allocates nothing: close,
        // then `child`: recvmsg into stack buffers, `serve` (setsockopt,
        // recv, send, close, atomics in the shared meters, fixed error
        // strings), and one write of a static byte.
        unsafe { kids.fork_or_stop(body) }?;
        drop(child_end);
        members.push(Member { pipe: parent_end, busy: false, alive: true });
    }
    let result = parent(&listener, &signals, &mut members, meters);
    // Closing the pairs ends the children: an idle one reads EOF at once,
    // a busy one when it has finished its connection.
    drop(members);
    kids.wind_down(cfg.proto.timeout);
    result.map(|()| Outcome { members: cfg.pool, counts_wakeups: false })
}

// ANCHOR: parent
fn parent(
    listener: &TcpListener,
    signals: &SignalFd,
    members: &mut [Member],
    meters: &Meters,
) -> Result<()> {
    loop {
        let idle = members.iter().any(|m| m.alive && !m.busy);
        let mut fds: Vec<PollFd> =
            vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        // Watch the listener only while some child can take a connection.
        let watch = if idle { PollFlags::POLLIN } else { PollFlags::empty() };
        fds.push(PollFd::new(listener.as_fd(), watch));
        let watched: Vec<usize> =
            (0..members.len()).filter(|&i| members[i].alive).collect();
        for &i in &watched {
            fds.push(PollFd::new(members[i].pipe.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                return Err(Error::failed(format!("poll: {}", describe_errno(e))));
            }
        }
        let ready: Vec<bool> =
            fds.iter().map(|p| p.any().unwrap_or(false)).collect();
        if ready[0] {
            return Ok(());
        }
        for (k, &i) in watched.iter().enumerate() {
            let m = &mut members[i];
            if ready[2 + k] {
                let mut done = [0u8; 1];
                match (&m.pipe).read(&mut done) {
                    Ok(1) => m.busy = false,
                    _ => {
                        m.alive = false;
                        crate::say(&[b"a pool child ended unexpectedly"]);
                    }
                }
            }
        }
        if ready[1] {
            match listener.accept() {
                Ok((stream, _)) => {
                    let Some(i) = members.iter().position(|m| m.alive && !m.busy)
                    else {
                        continue;
                    };
                    match send_fd(&members[i].pipe, stream.as_fd()) {
                        Ok(()) => {
                            members[i].busy = true;
                            meters.accepted(i);
                        }
                        Err(e) => crate::say(&[
                            b"cannot pass a connection: ",
                            describe_io(&e).as_bytes(),
                        ]),
                    }
                    // `stream` is closed here: the child has its own copy.
                }
                Err(e) => crate::accept_failed(&e),
            }
        }
    }
}
// ANCHOR_END: parent

// ANCHOR: child
fn child(i: usize, pipe: &UnixStream, cfg: &Config, meters: &Meters) {
    while let Some(stream) = recv_fd(pipe) {
        serve(&stream, cfg, meters, i);
        drop(stream);
        // Tell the parent this child is idle again.
        if (&*pipe).write_all(b"1").is_err() {
            break;
        }
    }
}
// ANCHOR_END: child

/// Stevens' `write_fd`: one byte of data carrying the descriptor.
fn send_fd(pipe: &UnixStream, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let raw = [fd.as_raw_fd()];
    let iov = [std::io::IoSlice::new(b"c")];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    sendmsg::<()>(pipe.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map(drop)
        .map_err(std::io::Error::from)
}

/// Stevens' `read_fd`, with a control buffer on the stack (no allocation
/// in the child): `None` at end of file (the parent closed the pair).
fn recv_fd(pipe: &UnixStream) -> Option<std::net::TcpStream> {
    // SAFETY: msghdr, iovec and a control buffer on the stack, sized with
    // CMSG_SPACE for one descriptor and aligned for a cmsghdr; recvmsg
    // fills them in, and the cmsg is only read after checking its level,
    // type and length (exactly one descriptor). `stream_from_fd` needs an
    // open socket nothing else will close: the SCM_RIGHTS descriptor was
    // just installed in this process by recvmsg, so no one else owns it,
    // and it is an accepted TCP socket, as the parent (`send_fd`, the only
    // sender on this socket pair) sends only those.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = [0u64; 8]; // 64 bytes, aligned for cmsghdr
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen =
            libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
        loop {
            let n =
                libc::recvmsg(pipe.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                return None;
            }
            break;
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null()
            || (*c).cmsg_level != libc::SOL_SOCKET
            || (*c).cmsg_type != libc::SCM_RIGHTS
            || (*c).cmsg_len
                != libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<i32>());
        Some(crate::stream_from_fd(fd))
    }
}
