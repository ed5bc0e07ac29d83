//! What the lab's tests share: a skip that says why, is counted, and fails
//! under CI unless it was expected; the checks a skip rests on (root, a
//! tool on `PATH`); and a program's JSON output, parsed into its type.
//!
//! A test that cannot run here (no root, no `perf`, no C compiler) calls
//! [`skipped`] with the reason and returns. The reason is printed and, when
//! `LAB_SKIP_LOG` names a file, appended to it, so that `.ci/run` can count
//! the skips and say why. Under `CI=true` a skip whose reason is not on
//! [`ALLOWED`] fails the test instead: CI installs what the tests need, so
//! a skip there means something is missing.

/// Reasons (prefixes) that may skip under `CI=true`. Empty: CI runs as
/// root with every tool the tests need installed by `.ci/run`.
pub const ALLOWED: &[&str] = &[];

/// Record that the calling test skips, and why; the test then returns.
/// Panics under `CI=true` unless `reason` starts with one of [`ALLOWED`].
pub fn skipped(reason: &str) {
    eprintln!("skipped: {reason}");
    if let Some(log) = std::env::var_os("LAB_SKIP_LOG") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
        if let Ok(mut file) = file {
            let _ = writeln!(file, "{reason}");
        }
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci && !ALLOWED.iter().any(|a| reason.starts_with(a)) {
        panic!(
            "a test skipped under CI=true, which installs what tests need: {reason}"
        );
    }
}

/// Skip the calling test with a reason unless `$cond` holds:
/// `labkit::require!(have_cc(), "no C compiler (cc)");`
#[macro_export]
macro_rules! require {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            $crate::testing::skipped(&format!($($why)+));
            return;
        }
    };
}

/// Run the calling test alone among those of its test binary that call
/// this too: tests that fork, count children or take the CPUs hold it for
/// their whole run (`let _serial = labkit::testing::serial();`). A test
/// that panicked while holding it does not block the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Does `text` have the shape `pattern`, where each `#` in the pattern
/// stands for a number (`12`, `0.25`) and everything else is literal?
/// `shape("20 forks in 0.013 s\n", "20 forks in # s\n")` is true.
pub fn shape(text: &str, pattern: &str) -> bool {
    let mut rest = text;
    for (i, part) in pattern.split('#').enumerate() {
        if i > 0 {
            let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.');
            let end = digits.unwrap_or(rest.len());
            if end == 0 || !rest[..end].chars().any(|c| c.is_ascii_digit()) {
                return false;
            }
            rest = &rest[end..];
        }
        match rest.strip_prefix(part) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.is_empty()
}

/// Is this test running as root (needed to become [`crate::limited::NOBODY`]
/// or to raise a limit)?
pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Is `tool` an executable file on `PATH` (`perf`, `cc`, `setpriv`)?
pub fn have_tool(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A program's `--json` output, parsed into `T` (its report type, or
/// `serde_json::Value`); panics with what was printed when it is not one
/// JSON object of that type.
pub fn json<T: serde::de::DeserializeOwned>(stdout: &[u8]) -> T {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!("not the expected JSON ({e}): {}", String::from_utf8_lossy(stdout))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn tools_are_found_on_path_and_json_parses_into_its_type() {
        assert!(super::have_tool("sh"));
        assert!(!super::have_tool("no-such-tool-anywhere"));
        let v: Vec<u32> = super::json(b"[1, 2]");
        assert_eq!(v, [1, 2]);
        let bad = std::panic::catch_unwind(|| super::json::<Vec<u32>>(b"oops"));
        assert!(bad.is_err());
    }

    #[test]
    fn shapes_match_numbers_where_the_pattern_says_so() {
        use super::shape;
        assert!(shape("7 in 0.25 s: 3 us\n", "# in # s: # us\n"));
        assert!(!shape("7 in x s: 3 us\n", "# in # s: # us\n"));
        assert!(!shape("7 in 0.25 s: 3 us\nmore", "# in # s: # us\n"));
        assert!(!shape("in . s", "in # s"), "a number has a digit");
        assert!(shape("created: 20, failed: 0", "created: 20, failed: 0"));
    }
}
