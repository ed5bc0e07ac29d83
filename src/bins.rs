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
/// (libraries, say). The binary is rebuilt unless it is newer than every
/// source and was built by the same command, which is kept beside it in
/// `<name>.cmd`.
pub fn compile_c_with(
    sources: &[&Path],
    extra: &[&str],
    name: &str,
) -> Result<PathBuf> {
    let out_dir = bin_dir()?.join("c");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| Error::io(out_dir.display(), e))?;
    let out = out_dir.join(name);
    let stamp = out_dir.join(format!("{name}.cmd"));
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(C_FLAGS).arg("-o").arg(&out).args(sources).args(extra);
    let line = format!("{cmd:?}");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = modified(&out).is_some_and(|built| {
        sources.iter().all(|s| modified(s).is_some_and(|src| built > src))
    });
    if fresh && std::fs::read_to_string(&stamp).is_ok_and(|s| s == line) {
        return Ok(out);
    }
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
        let names: Vec<String> =
            sources.iter().map(|s| s.display().to_string()).collect();
        return Err(Error::failed(format!(
            "compiling {} failed ({status})",
            names.join(" ")
        )));
    }
    std::fs::write(&stamp, line).map_err(|e| Error::io(stamp.display(), e))?;
    Ok(out)
}
