//! What the lab's tests share: a skip that says why, is counted, and fails
//! under CI unless it was expected.
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
