//! A task per connection on tokio's multi-threaded runtime with `--pool`
//! worker threads: the code reads like thread-per-client, but a task is a
//! state machine that the workers poll when its socket is ready, over
//! epoll, like the event loops. On a stop the runtime is shut down, which
//! drops every task (closing its connection) and joins the workers.

use std::net::TcpListener;
use std::time::Duration;

use labkit::error::{Error, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::protocol::{LineReader, Proto, Served, io_reason, reply_piece};
use crate::thread_per_client::MetersRef;
use crate::{Config, Meters, Outcome};

pub fn run(
    cfg: &Config,
    listener: TcpListener,
    meters: &'static Meters,
) -> Result<Outcome> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.pool)
        .thread_stack_size(256 << 10)
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::io("cannot start the tokio runtime", e))?;
    listener.set_nonblocking(true).map_err(|e| Error::io("O_NONBLOCK", e))?;
    let listener = {
        let _entered = rt.enter();
        tokio::net::TcpListener::from_std(listener)
            .map_err(|e| Error::io("tokio listener", e))?
    };
    let m = MetersRef::new(meters);
    let proto = cfg.proto;
    // ANCHOR: accept
    rt.spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    m.get().accepted(0);
                    tokio::spawn(async move {
                        let served = serve(stream, &proto, m.get().get(0)).await;
                        crate::account(m.get(), 0, &served);
                    });
                }
                Err(e) => crate::accept_failed(&e),
            }
        }
    });
    // ANCHOR_END: accept
    let stopped = crate::wait_for_stop();
    // Drops every task and joins the workers; the meters outlive them.
    rt.shutdown_timeout(Duration::from_secs(5));
    stopped?;
    // The workers take tasks from each other: no per-worker meter.
    Ok(Outcome { members: cfg.pool, counts_wakeups: false })
}

// ANCHOR: serve
/// `protocol::serve` as a task: the same requests, awaited.
async fn serve(
    mut stream: tokio::net::TcpStream,
    proto: &Proto,
    meter: &crate::meter::Meter,
) -> Served {
    let mut served = Served::default();
    let mut lines = LineReader::default();
    let limit = proto.timeout;
    loop {
        let count = match lines.next(proto.max_bytes) {
            Some(Ok(count)) => count,
            Some(Err(why)) => return Served { error: Some(why), ..served },
            None => {
                let read = stream.read(lines.space(proto.byte_reads));
                match tokio::time::timeout(limit, read).await {
                    Ok(Ok(0)) if lines.pending() == 0 => return served,
                    Ok(Ok(0)) => {
                        let why = "half a request: the client closed mid-line";
                        return Served { error: Some(why), ..served };
                    }
                    Ok(Ok(n)) => {
                        lines.filled(n);
                        continue;
                    }
                    Ok(Err(e)) => {
                        return Served {
                            error: Some(io_reason(&e, false)),
                            ..served
                        };
                    }
                    Err(_) => {
                        let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
                        return Served {
                            error: Some(io_reason(&e, false)),
                            ..served
                        };
                    }
                }
            }
        };
        let mut sent = 0;
        while sent < count {
            let write = stream.write(reply_piece(sent, count));
            match tokio::time::timeout(limit, write).await {
                Ok(Ok(n)) => sent += n,
                Ok(Err(e)) => {
                    served.bytes += sent as u64;
                    return Served { error: Some(io_reason(&e, true)), ..served };
                }
                Err(_) => {
                    served.bytes += sent as u64;
                    let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
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
