//! Errors and exit codes shared by every binary of the lab.
//!
//! Exit status 0: success. 1: the experiment failed (a create call failed, a
//! check did not hold, a file could not be written). 2: bad usage (flags,
//! arguments, limits that cannot be met). 128 + N: stopped by signal N
//! (SIGHUP 129, SIGINT 130, SIGTERM 143), after passing it on to the
//! children and reaping them. Errors are printed as one line on stderr,
//! prefixed with the program's name.

use std::fmt;

/// The documented exit codes of every lab binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    Ok = 0,
    Failed = 1,
    Usage = 2,
    /// 128 + the signal number, as a shell reports a process it killed.
    Sighup = 129,
    Sigint = 130,
    Sigterm = 143,
}

/// An error that ends a program: what went wrong, in one line, and how the
/// process should exit.
#[derive(Debug)]
pub struct Error {
    pub code: ExitCode,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The experiment itself failed (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        Error { code: ExitCode::Failed, message: message.into() }
    }

    /// The user asked for something that cannot be done (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Error { code: ExitCode::Usage, message: message.into() }
    }

    /// Stopped by SIGINT, SIGTERM or SIGHUP (exit 128 + N): "interrupted
    /// by SIGTERM; " and what was done about it.
    pub fn interrupted(sig: i32, done: &str) -> Self {
        let (code, name) = match sig {
            libc::SIGHUP => (ExitCode::Sighup, "SIGHUP"),
            libc::SIGINT => (ExitCode::Sigint, "SIGINT"),
            _ => (ExitCode::Sigterm, "SIGTERM"),
        };
        Error { code, message: format!("interrupted by {name}; {done}") }
    }

    /// An I/O error on `what` (a path, a pipe, ...): exit 1.
    pub fn io(what: impl fmt::Display, err: std::io::Error) -> Self {
        Error::failed(format!("{what}: {}", describe_io(&err)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// "Resource temporarily unavailable (EAGAIN)": the OS text and the errno
/// name, which is what a reader searches for.
pub fn describe_errno(errno: nix::errno::Errno) -> String {
    let text = std::io::Error::from_raw_os_error(errno as i32).to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    format!("{text} ({errno:?})")
}

/// Like [`describe_errno`] for an `io::Error` that carries an OS error.
pub fn describe_io(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(raw) => describe_errno(nix::errno::Errno::from_raw(raw)),
        None => err.to_string(),
    }
}

/// "3 of 10 fork calls failed (first: Resource temporarily unavailable
/// (EAGAIN))": how many of a creation loop's calls failed, and the first
/// error, for the program's one line on stderr.
pub fn calls_failed(
    failed: u64,
    of: u64,
    call: &str,
    first: Option<&str>,
) -> String {
    format!(
        "{failed} of {of} {call} calls failed (first: {})",
        first.unwrap_or("unknown error")
    )
}

/// Print `err` as one line prefixed by the program name and return the exit
/// code for `main`.
pub fn report(program: &str, result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{program}: {err}");
            std::process::ExitCode::from(err.code as u8)
        }
    }
}

/// Write `text` to stdout; a closed pipe (`lab ... | head`) is an error
/// with a message, not a panic.
pub fn print(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("stdout", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_descriptions_name_the_constant() {
        let text = describe_errno(nix::errno::Errno::EAGAIN);
        assert_eq!(text, "Resource temporarily unavailable (EAGAIN)");
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(describe_io(&io), "No such file or directory (ENOENT)");
    }

    #[test]
    fn codes_are_the_documented_ones() {
        assert_eq!(Error::failed("x").code as u8, 1);
        assert_eq!(Error::usage("x").code as u8, 2);
        let e = Error::interrupted(libc::SIGINT, "reaped 3");
        assert_eq!(e.code as u8, 130);
        assert_eq!(e.message, "interrupted by SIGINT; reaped 3");
        assert_eq!(Error::interrupted(libc::SIGTERM, "").code as u8, 143);
        assert_eq!(Error::interrupted(libc::SIGHUP, "").code as u8, 129);
    }
}
