//! CPU placement of other programs' tasks, for runners that compare a lab
//! program with an outside tool (`perf bench`) that has no placement flag:
//! which CPUs this process may use, which tasks a program has started, and
//! moving one of them to a CPU.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use crate::error::{Error, Result, describe_errno};

/// The CPUs this process may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| {
        Error::failed(format!("sched_getaffinity: {}", describe_errno(e)))
    })?;
    Ok((0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// Parse a CPU list as the kernel writes one (`0`, `0-3`, `0,2-3`).
pub fn parse_list(text: &str) -> std::result::Result<Vec<usize>, String> {
    let bad = || format!("'{text}' is not a CPU list like 0, 0-3 or 0,2-3");
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let lo: usize = lo.trim().parse().map_err(|_| bad())?;
        let hi: usize = hi.trim().parse().map_err(|_| bad())?;
        if lo > hi || hi >= CpuSet::count() {
            return Err(bad());
        }
        if let Some(twice) = (lo..=hi).find(|c| cpus.contains(c)) {
            // `0,0` or `0-2,1`: a typo, most likely, and never what was meant.
            return Err(format!("'{text}' names CPU {twice} twice"));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// Write `cpus` as the kernel does: `0-3,6`.
pub fn format_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Check that each of `cpus` (asked for on the command line) is one this
/// process may run on, and return those it may ([`allowed_cpus`]); a usage
/// error names the first that is not.
pub fn check_allowed(cpus: &[usize]) -> Result<Vec<usize>> {
    let allowed = allowed_cpus()?;
    if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(Error::usage(format!(
            "CPU {c} is not one this process may run on (allowed: {})",
            format_list(&allowed)
        )));
    }
    Ok(allowed)
}

/// Confine this process to `cpus`: every thread and child it starts from
/// now on inherits the mask. Call it before starting any thread.
pub fn confine(cpus: &[usize]) -> Result<()> {
    check_allowed(cpus)?;
    set_allowed(cpus)
}

/// Set this thread's CPUs to `cpus` without checking them against the
/// present mask: how a runner that confined itself for one experiment
/// gives itself back the CPUs it had ([`allowed_cpus`] before).
pub fn set_allowed(cpus: &[usize]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(|e| Error::usage(describe_errno(e)))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        Error::failed(format!("sched_setaffinity: {}", describe_errno(e)))
    })
}

/// Pin task `tid` (a process, or one thread of one) to `cpu`.
pub fn pin_task(tid: i32, cpu: usize) -> Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).and_then(|()| sched_setaffinity(Pid::from_raw(tid), &set)).map_err(
        |e| {
            Error::failed(format!(
                "cannot pin task {tid} to CPU {cpu}: {}",
                describe_errno(e)
            ))
        },
    )
}

/// Start `cmd` pinned to `cpu`: the affinity is set in the child before it
/// runs the program, so every thread the program creates inherits it.
pub fn pin_command(cmd: &mut std::process::Command, cpu: usize) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| {
        Error::failed(format!("no CPU {cpu} here: {}", describe_errno(e)))
    })?;
    // SAFETY: sched_setaffinity is a plain system call, safe between fork
    // and exec; the set was built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)
        });
    }
    Ok(())
}

/// The threads of process `pid` other than its main thread, from
/// `/proc/<pid>/task` (empty once it has ended).
pub fn other_threads(pid: u32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&tid| tid != pid as i32)
        .collect();
    tids.sort_unstable();
    tids
}

/// The child processes of process `pid` (of any of its threads), from
/// `/proc/<pid>/task/*/children`.
pub fn children(pid: u32) -> Vec<i32> {
    let mut kids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| {
            std::fs::read_to_string(e.ok()?.path().join("children")).ok()
        })
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    kids.sort_unstable();
    kids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_like_the_kernel() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("0-2,5,4").unwrap(), vec![0, 1, 2, 4, 5]);
        assert!(parse_list("2-1").is_err());
        assert!(parse_list("x").is_err());
        assert!(parse_list("").is_err());
        assert_eq!(parse_list("0,0").unwrap_err(), "'0,0' names CPU 0 twice");
        assert_eq!(parse_list("0-2,1").unwrap_err(), "'0-2,1' names CPU 1 twice");
        assert_eq!(format_list(&[0, 1, 2, 4, 5, 7]), "0-2,4-5,7");
        assert_eq!(format_list(&[]), "");
    }

    #[test]
    fn finds_threads_children_and_cpus() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        assert!(!other_threads(me).is_empty());
        let mut kid = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(children(me).contains(&(kid.id() as i32)));
        pin_task(kid.id() as i32, cpus[0]).unwrap();
        let mut cmd = std::process::Command::new("grep");
        cmd.args(["Cpus_allowed_list", "/proc/self/status"]);
        pin_command(&mut cmd, cpus[0]).unwrap();
        let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        assert_eq!(
            out.split_whitespace().nth(1),
            Some(cpus[0].to_string().as_str())
        );
        assert!(pin_task(kid.id() as i32, 1 << 20).is_err());
        kid.kill().unwrap();
        kid.wait().unwrap();
        tx.send(()).unwrap();
        t.join().unwrap().unwrap();
        assert!(other_threads(u32::MAX).is_empty());
    }
}
