//! The `server` and `client` binaries on their own: bad usage is one line
//! and exit 2. (The designs under load are tested end to end with the
//! runner in the workspace's `tests/server_designs.rs`; this crate's own
//! integration tests also make Cargo build both binaries for them.)

use labtest::usage_errors;

#[test]
fn bad_usage_is_one_line_and_exit_2() {
    usage_errors(
        env!("CARGO_BIN_EXE_server"),
        &[&["--design", "no-such-design"], &["--pool", "0"]],
    );
    usage_errors(
        env!("CARGO_BIN_EXE_client"),
        &[&["--children", "5"], &["--addr", "127.0.0.1:1", "--bytes", "x"]],
    );
}

/// prefork-select puts the listener in an `fd_set`, which holds descriptors
/// below FD_SETSIZE (1024) only: a listener numbered 1024 is refused with
/// one line and exit 1 before any child is forked (it is announced first), instead of `FD_SET`
/// writing past the set.
#[test]
fn prefork_select_refuses_a_listener_beyond_fd_setsize() {
    use std::os::unix::process::CommandExt;
    let setsize = libc::FD_SETSIZE as libc::rlim_t;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills in the rlimit on this frame.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let hard = lim.rlim_max;
    labtest::require!(hard > setsize, "RLIMIT_NOFILE's hard limit is 1024 or less");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_server"));
    cmd.args(["--design", "prefork-select", "--pool", "1"]);
    // SAFETY: between fork and exec the closure only calls setrlimit and
    // dup2, plain system calls on values on the stack: it allocates
    // nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            let lim =
                libc::rlimit { rlim_cur: hard.min(2 * setsize), rlim_max: hard };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Fill every descriptor below 1024, so the listener is 1024.
            for fd in 3..libc::FD_SETSIZE as i32 {
                if libc::dup2(libc::STDERR_FILENO, fd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    };
    let err = labtest::failed("server", &cmd.output().unwrap());
    assert!(err.contains("takes only descriptors below 1024"), "{err}");
}
