//! Where the two tasks run: the CPUs `--pin` and `--cpus` ask for, checked
//! against this process's affinity mask, and task A pinned for the run.

use labkit::affinity::{check_allowed, format_list};
use labkit::error::{Error, Result, describe_errno};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use crate::Pin;

/// The CPUs for task A and task B, or `None` when not pinning. Only CPUs
/// this process may run on (its affinity mask, as `taskset` set it).
pub fn placement(pin: Pin, asked: &[usize]) -> Result<Option<[usize; 2]>> {
    let allowed = check_allowed(asked)?;
    match (pin, asked) {
        (Pin::None, []) => Ok(None),
        (Pin::None, _) => Err(Error::usage("--cpus needs --pin same or cross")),
        (Pin::Same, []) => Ok(Some([allowed[0]; 2])),
        (Pin::Same, &[a]) => Ok(Some([a, a])),
        (Pin::Same, _) => Err(Error::usage("--pin same takes one CPU in --cpus")),
        (Pin::Cross, []) if allowed.len() < 2 => Err(Error::usage(format!(
            "--pin cross needs two CPUs; this process may run only on CPU {}",
            format_list(&allowed)
        ))),
        (Pin::Cross, []) => Ok(Some([allowed[0], allowed[1]])),
        (Pin::Cross, &[a, b]) if a != b => Ok(Some([a, b])),
        (Pin::Cross, _) => Err(Error::usage(
            "--pin cross takes two different CPUs in --cpus, e.g. --cpus 0,1",
        )),
    }
}

pub(crate) fn cpu_set(cpu: usize) -> Result<CpuSet> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|e| Error::usage(format!("CPU {cpu}: {}", describe_errno(e))))?;
    Ok(set)
}

/// The calling thread pinned to one CPU until dropped.
pub(crate) struct Pinned {
    saved: Option<CpuSet>,
}

impl Pinned {
    pub(crate) fn to(cpu: Option<usize>) -> Result<Pinned> {
        let Some(cpu) = cpu else { return Ok(Pinned { saved: None }) };
        let me = Pid::from_raw(0);
        let fail = |e| {
            Error::failed(format!(
                "cannot pin task A to CPU {cpu}: sched_setaffinity: {}",
                describe_errno(e)
            ))
        };
        let saved = sched_getaffinity(me).map_err(fail)?;
        sched_setaffinity(me, &cpu_set(cpu)?).map_err(fail)?;
        Ok(Pinned { saved: Some(saved) })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = sched_setaffinity(Pid::from_raw(0), saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_follows_the_affinity_mask() {
        let allowed = labkit::affinity::allowed_cpus().unwrap();
        assert_eq!(placement(Pin::None, &[]).unwrap(), None);
        assert_eq!(placement(Pin::Same, &[]).unwrap(), Some([allowed[0]; 2]));
        let err = placement(Pin::Same, &[0, 1]).unwrap_err();
        assert_eq!(err.code as u8, 2);
        if allowed.len() >= 2 {
            let got = placement(Pin::Cross, &[]).unwrap();
            assert_eq!(got, Some([allowed[0], allowed[1]]));
        }
    }
}
