//! Finding the lab's program binaries (`fork`, `thread`, ...) from the
//! runner, which spawns them as whole processes.
//!
//! They sit next to the runner in Cargo's target directory. When the runner
//! itself was started by `cargo run` (the `cargo lab` alias), it first asks
//! the same cargo to build them in the same profile, so one command on a
//! fresh clone builds what it needs; `LAB_BIN_DIR` names another directory
//! and skips the build (the tests use it).

use std::path::{Path, PathBuf};
use std::process::Command;

use labkit::error::{Error, Result};

/// The directory that holds the program binaries.
pub fn bin_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("LAB_BIN_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find the runner's own path", e))?;
    Ok(exe.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf))
}

/// Make sure `programs` are built and return their paths, in order; each
/// program is the binary of the package of the same name.
pub fn programs(programs: &[&str]) -> Result<Vec<PathBuf>> {
    locate(programs, programs)
}

/// Like [`programs`] for binaries that share one package (`mq`'s `broker`
/// and `load`).
pub fn package_programs(package: &str, programs: &[&str]) -> Result<Vec<PathBuf>> {
    locate(&[package], programs)
}

fn locate(packages: &[&str], programs: &[&str]) -> Result<Vec<PathBuf>> {
    let dir = bin_dir()?;
    let cargo = std::env::var_os("CARGO");
    if let (Some(cargo), None) = (cargo, std::env::var_os("LAB_BIN_DIR")) {
        build(&cargo, &dir, packages)?;
    }
    programs
        .iter()
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::failed(format!(
                    "program '{name}' is not built ({} is missing); \
                     run `cargo build --release --workspace` or use `cargo lab`",
                    path.display()
                )))
            }
        })
        .collect()
}

/// Build `packages` in the profile `dir` belongs to.
fn build(cargo: &std::ffi::OsStr, dir: &Path, packages: &[&str]) -> Result<()> {
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--profile"]);
    cmd.arg(if profile == "debug" { "dev" } else { profile });
    for package in packages {
        cmd.args(["-p", package]);
    }
    // Tracked, so an interrupt stops the build too.
    let status = labkit::cleanup::spawn(&mut cmd)
        .and_then(|mut build| build.wait4())
        .map_err(|e| Error::io("cannot run cargo", e))?
        .0;
    if status.success() {
        Ok(())
    } else {
        Err(Error::failed(format!(
            "building {} failed ({status})",
            packages.join(", ")
        )))
    }
}

/// Run `cmd` (a lab program or a C reference with `--json`) as a whole
/// process, timed from outside, with stdout in a temporary file; check that
/// it exited 0 and return its report, parsed into the program's own type
/// `T`, and what the run cost (wall seconds, CPU, switches: `wait4`).
pub fn run_json<T: serde::de::DeserializeOwned>(
    mut cmd: Command,
    what: &str,
) -> Result<(T, labkit::measure::Usage)> {
    use std::io::{Read, Seek};
    let mut file = labkit::cleanup::tempfile()
        .map_err(|e| Error::io("cannot create a temporary file", e))?;
    let stdout = file.try_clone().map_err(|e| Error::io("temporary file", e))?;
    cmd.stdin(std::process::Stdio::null()).stdout(stdout);
    let done = labkit::measure::run(&mut cmd)
        .map_err(|e| Error::io(format!("cannot run {what}"), e))?;
    done.check(what).map_err(Error::failed)?;
    let mut text = String::new();
    file.rewind()
        .and_then(|()| file.read_to_string(&mut text))
        .map_err(|e| Error::io("temporary file", e))?;
    let report = serde_json::from_str(&text).map_err(|e| {
        Error::failed(format!("{what}: not its --json report ({e}): {text:?}"))
    })?;
    Ok((report, done.usage))
}

/// How the C references are built: `cc -O2`, linked the way `rustc` links
/// on Linux (`-z relro -z now`: every symbol bound at start-up). Without
/// `-z now` a forked child that calls a function its parent never called
/// (`_exit`, say) runs the dynamic linker's lazy binding first, in every
/// child: measured with `forkcreat.c`, 19 page faults per fork instead of
/// 10, which would put the C side at a disadvantage the loop has nothing to
/// do with.
pub const C_FLAGS: [&str; 4] = ["-O2", "-pthread", "-Wl,-z,relro", "-Wl,-z,now"];

/// Compile a C reference program with [`C_FLAGS`] (and `$CC`, or `cc`)
/// into `<bin dir>/c/<name>`.
pub fn compile_c(source: &Path, name: &str) -> Result<PathBuf> {
    compile_c_with(&[source], &[], name)
}

/// [`compile_c`] from several `sources`, with `extra` arguments after them
/// (libraries, say), into `<bin dir>/c/<name>` ([`compile_c_in`]).
pub fn compile_c_with(
    sources: &[&Path],
    extra: &[&str],
    name: &str,
) -> Result<PathBuf> {
    compile_c_in(&bin_dir()?.join("c"), sources, extra, name)
}

/// Compile `sources` (with `extra` arguments after them) into
/// `<out_dir>/<name>`. The binary is rebuilt unless it is newer than every
/// source and was built by the same command, which is kept beside it in
/// `<name>.cmd`. A failed build is one line naming the sources; the
/// compiler's own messages go to stderr as it prints them. The compiler
/// writes a file of its own, renamed into place once whole, so that
/// several builds at once (two runs, the tests) each find a whole binary,
/// never one being written, which could not be run (ETXTBSY) or not whole.
pub fn compile_c_in(
    out_dir: &Path,
    sources: &[&Path],
    extra: &[&str],
    name: &str,
) -> Result<PathBuf> {
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir.display(), e))?;
    let out = out_dir.join(name);
    let stamp = out_dir.join(format!("{name}.cmd"));
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(C_FLAGS).arg("-o").arg(&out).args(sources).args(extra);
    let line = format!("{cmd:?}");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = modified(&out).is_some_and(|built| {
        inputs(sources).iter().all(|s| modified(s).is_some_and(|src| built > src))
    });
    if fresh && std::fs::read_to_string(&stamp).is_ok_and(|s| s == line) {
        return Ok(out);
    }
    static BUILDS: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let building =
        out_dir.join(format!(".{name}.{}-{n}.partial", std::process::id()));
    let mut cmd = Command::new(&cc);
    cmd.args(C_FLAGS).arg("-o").arg(&building).args(sources).args(extra);
    let status = labkit::cleanup::spawn(&mut cmd)
        .and_then(|mut cc| cc.wait4())
        .map_err(|e| {
            Error::io(
                format!("cannot run the C compiler {}", cc.to_string_lossy()),
                e,
            )
        })?
        .0;
    if !status.success() {
        let _ = std::fs::remove_file(&building);
        let names: Vec<String> =
            sources.iter().map(|s| s.display().to_string()).collect();
        return Err(Error::failed(format!(
            "compiling {} failed ({status})",
            names.join(" ")
        )));
    }
    std::fs::rename(&building, &out).map_err(|e| Error::io(out.display(), e))?;
    std::fs::write(&stamp, line).map_err(|e| Error::io(stamp.display(), e))?;
    Ok(out)
}

/// What a C build reads: `sources` and the local headers they include
/// (`#include "..."`, relative to the including file, followed through
/// headers), so that editing a shared header such as `labkit.h` rebuilds
/// every program that includes it. A header that cannot be read counts
/// as changed: the compiler then says what is wrong.
fn inputs(sources: &[&Path]) -> Vec<PathBuf> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<PathBuf> = sources.iter().map(|s| s.to_path_buf()).collect();
    while let Some(file) = todo.pop() {
        if seen.contains(&file) {
            continue;
        }
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        for line in std::fs::read_to_string(&file).unwrap_or_default().lines() {
            let quoted = line.trim_start().strip_prefix("#include \"");
            if let Some(name) = quoted.and_then(|rest| rest.split('"').next()) {
                todo.push(dir.join(name));
            }
        }
        seen.push(file);
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build's own record of when it last wrote the binary.
    fn built_at(path: &Path) -> std::time::SystemTime {
        std::fs::metadata(path).unwrap().modified().unwrap()
    }

    #[test]
    fn c_builds_are_cached_rebuilt_when_changed_and_fail_in_one_line() {
        labtest::require!(labtest::have_tool("cc"), "no C compiler (cc)");
        let dir = labkit::cleanup::tempdir("lab-bins-test-").unwrap();
        let source = dir.path().join("hello.c");
        let out_dir = dir.path().join("c");
        std::fs::write(&source, "int main(void) { return 3; }\n").unwrap();
        let bin = compile_c_in(&out_dir, &[&source], &[], "hello").unwrap();
        let status = |bin: &Path| Command::new(bin).status().unwrap().code();
        assert_eq!(status(&bin), Some(3));
        let first = built_at(&bin);

        // Unchanged: served from the cache, the binary is not written again.
        let again = compile_c_in(&out_dir, &[&source], &[], "hello").unwrap();
        assert_eq!((again.as_path(), built_at(&again)), (bin.as_path(), first));

        // Other flags: built again, although the source did not change.
        compile_c_in(&out_dir, &[&source], &["-DX=1"], "hello").unwrap();
        assert_ne!(built_at(&bin), first);
        let second = built_at(&bin);

        // A changed source (newer than the binary): built again.
        std::fs::write(&source, "int main(void) { return 4; }\n").unwrap();
        let later = second + std::time::Duration::from_secs(2);
        std::fs::File::options()
            .write(true)
            .open(&source)
            .and_then(|f| f.set_modified(later))
            .unwrap();
        compile_c_in(&out_dir, &[&source], &["-DX=1"], "hello").unwrap();
        assert_eq!(status(&bin), Some(4));

        // A changed header that the source includes: built again.
        let header = dir.path().join("code.h");
        std::fs::write(&header, "#define CODE 5\n").unwrap();
        std::fs::write(
            &source,
            "#include \"code.h\"\nint main(void) { return CODE; }\n",
        )
        .unwrap();
        compile_c_in(&out_dir, &[&source], &[], "hello").unwrap();
        assert_eq!(status(&bin), Some(5));
        std::fs::write(&header, "#define CODE 6\n").unwrap();
        let newer = built_at(&bin) + std::time::Duration::from_secs(2);
        std::fs::File::options()
            .write(true)
            .open(&header)
            .and_then(|f| f.set_modified(newer))
            .unwrap();
        compile_c_in(&out_dir, &[&source], &[], "hello").unwrap();
        assert_eq!(status(&bin), Some(6));

        // A broken source: one line that names it.
        std::fs::write(&source, "int main(void) { return }\n").unwrap();
        let err = compile_c_in(&out_dir, &[&source], &[], "hello").unwrap_err();
        let text = err.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("compiling") && text.contains("hello.c"), "{text}");
    }

    #[test]
    fn a_failed_cargo_build_is_one_line_naming_the_packages() {
        let Some(cargo) = std::env::var_os("CARGO") else {
            labtest::skipped("not run by cargo (no $CARGO)");
            return;
        };
        let dir = labkit::cleanup::tempdir("lab-bins-test-").unwrap();
        let err = build(&cargo, &dir.path().join("release"), &["no-such-program"])
            .unwrap_err();
        let text = err.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("building no-such-program failed"), "{text}");
    }
}
