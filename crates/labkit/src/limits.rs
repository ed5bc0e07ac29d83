//! Resource limits and human-readable sizes.

use nix::sys::resource::{Resource, getrlimit};

/// glibc's thread stack when `RLIMIT_STACK` is unlimited
/// (`ARCH_STACK_DEFAULT_SIZE` on x86-64).
const GLIBC_UNLIMITED_STACK: u64 = 2 << 20;

/// The stack `pthread_create` gives a thread when no size is asked for:
/// glibc takes the soft `RLIMIT_STACK` (8 MiB unless `ulimit -s` changed
/// it). Rust's `std::thread` uses 2 MiB instead, so a program that wants
/// `ulimit -s 1024` to mean what it meant in the articles asks for this.
pub fn pthread_default_stack() -> u64 {
    stack_for(getrlimit(Resource::RLIMIT_STACK).ok().map(|(soft, _)| soft))
}

/// glibc's rule: the soft limit, or 2 MiB when it is unlimited (or
/// unknown).
fn stack_for(soft: Option<u64>) -> u64 {
    match soft {
        Some(soft) if soft != libc::RLIM_INFINITY => soft,
        _ => GLIBC_UNLIMITED_STACK,
    }
}

/// Below this soft `RLIMIT_STACK`, [`enough_stack`] runs `main` on a
/// thread: a debug build needs about 100 KiB to parse its flags.
pub const SMALL_MAIN_STACK: u64 = 256 << 10;

/// Run `main` so that a tiny `RLIMIT_STACK` (`ulimit -s 16`) cannot crash
/// the program before it starts: when the soft limit is below
/// [`SMALL_MAIN_STACK`], on a thread with an 8 MiB stack of its own (a
/// thread's stack is mapped by `pthread_create`, not bound by the limit),
/// else right here. The limit still sets glibc's default thread stack,
/// which is what the experiments vary. If the thread cannot be made,
/// `main` runs here anyway.
pub fn enough_stack<T: Send>(main: impl FnOnce() -> T + Send) -> T {
    let small = matches!(
        getrlimit(Resource::RLIMIT_STACK),
        Ok((soft, _)) if soft != libc::RLIM_INFINITY && soft < SMALL_MAIN_STACK
    );
    if !small {
        return main();
    }
    let mut main = Some(main);
    let ran = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("main".into())
            .stack_size(8 << 20)
            .spawn_scoped(scope, || (main.take().expect("not yet run"))());
        match spawned {
            Ok(handle) => {
                Some(handle.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            }
            Err(_) => None,
        }
    });
    match ran {
        Some(result) => result,
        None => (main.take().expect("the thread never started"))(),
    }
}

/// Parse `4096`, `64K`, `8M`, `1G` (binary multiples, `KiB`/`MiB` spellings
/// and a trailing `B` accepted) into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "'{text}' is not a size (examples: 4096, 64K, 8M, 1G)"
            ));
        }
    };
    let n: u64 = digits.parse().map_err(|_| {
        format!("'{text}' is not a size (examples: 4096, 64K, 8M, 1G)")
    })?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("'{text}' is too large"))
}

/// Show a byte count the way `parse_size` reads it, exactly (`8M`, `1536K`).
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A clap value parser for sizes within `min..=max` bytes.
pub fn size_in(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |text| {
        let n = parse_size(text)?;
        if n < min || n > max {
            return Err(format!(
                "{text} is out of range ({} to {})",
                format_size(min),
                format_size(max)
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("8X").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
        assert_eq!(format_size(8 << 20), "8M");
        assert_eq!(format_size(1536 << 10), "1536K");
        assert_eq!(format_size(1000), "1000");
        assert!(size_in(16 << 10, 1 << 30)("1K").is_err());
        assert_eq!(size_in(16 << 10, 1 << 30)("1M"), Ok(1 << 20));
    }

    #[test]
    fn default_stack_follows_rlimit() {
        let (soft, _) = getrlimit(Resource::RLIMIT_STACK).unwrap();
        let want = if soft == libc::RLIM_INFINITY { 2 << 20 } else { soft };
        assert_eq!(pthread_default_stack(), want);
        assert_eq!(stack_for(Some(1 << 20)), 1 << 20);
        assert_eq!(stack_for(Some(libc::RLIM_INFINITY)), 2 << 20);
        assert_eq!(stack_for(None), 2 << 20);
    }

    #[test]
    fn default_stack_is_what_glibc_gives_a_thread() {
        unsafe extern "C" {
            // glibc 2.18 and later.
            fn pthread_getattr_default_np(attr: *mut libc::pthread_attr_t) -> i32;
        }
        // SAFETY: pthread_attr_t is plain data that the call fills in.
        let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to our attr.
        assert_eq!(unsafe { pthread_getattr_default_np(&mut attr) }, 0);
        let mut size = 0usize;
        // SAFETY: attr was filled in above; a valid pointer to `size`.
        assert_eq!(unsafe { libc::pthread_attr_getstacksize(&attr, &mut size) }, 0);
        // SAFETY: initialised above, destroyed once.
        unsafe { libc::pthread_attr_destroy(&mut attr) };
        assert_eq!(pthread_default_stack(), size as u64);
    }
}
