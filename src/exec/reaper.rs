//! Killing every process a command left behind, where no PID namespace does it.
//!
//! Why: a command's background processes must not outlive it, and a process can leave its
//! process group and session (`setsid`) or lose its parent (a double fork), so neither a group
//! kill nor a walk from the command's first process finds them all.
//!
//! How: the process that runs this is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every
//! orphan among its descendants is re-parented to it instead of to init. [`kill_descendants`]
//! then kills every descendant it can find through `/proc`'s parent links, reaps, and repeats
//! until it has no child left. A process that forks between a scan and the kill is found in
//! the next round; the process limit bounds how many rounds a fork loop can need.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// Pause between rounds while killed processes are still being torn down.
const ROUND_PAUSE: Duration = Duration::from_millis(5);

/// The live descendants of `root`, from `/proc`'s parent links, parents before children.
pub(crate) fn descendants(root: Pid) -> Vec<Pid> {
    let Ok(processes) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let links: Vec<(i32, i32)> = processes
        .flatten()
        .filter_map(|process| process.stat().ok())
        .map(|stat| (stat.pid, stat.ppid))
        .collect();
    let mut found = vec![root.as_raw()];
    let mut next = 0;
    while let Some(&parent) = found.get(next) {
        found.extend(links.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        next += 1;
    }
    found.into_iter().skip(1).map(Pid::from_raw).collect()
}

/// Sends `SIGKILL` to every descendant of this process, once.
pub(crate) fn kill_descendants_once() {
    for pid in descendants(Pid::this()) {
        let _ = kill(pid, Signal::SIGKILL);
    }
}

/// Kills every descendant of this process (a subreaper) and reaps them, until this process has
/// no child left or `deadline` passes. Returns whether none is left. Reaps with `waitpid(-1)`:
/// only for a process whose children are all the command's, such as the sandbox's supervisor.
pub(crate) fn kill_descendants(deadline: Instant) -> bool {
    loop {
        kill_descendants_once();
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) | Err(Errno::EINTR) => {}
                Err(Errno::ECHILD) => return true,
                Err(_) => return false,
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(ROUND_PAUSE);
    }
}

/// upkeep's backstop: kills and reaps every child of this process that runs with
/// `no_new_privs` (as everything a sandboxed command starts does) and is not in `keep` (the
/// live supervisors), with its descendants. When upkeep is a subreaper, those are orphans of a
/// command whose sandbox supervisor was itself killed. Reaps only the processes it found, by
/// id, so children that someone else waits for are left alone.
pub(crate) fn reap_adopted(keep: &[Pid], deadline: Instant) {
    let this = Pid::this();
    loop {
        let adopted: Vec<Pid> = sandboxed_children_of(this)
            .into_iter()
            .filter(|pid| !keep.contains(pid))
            .collect();
        if adopted.is_empty() {
            return;
        }
        for pid in &adopted {
            for descendant in descendants(*pid) {
                let _ = kill(descendant, Signal::SIGKILL);
            }
            let _ = kill(*pid, Signal::SIGKILL);
        }
        for pid in &adopted {
            let _ = waitpid(*pid, Some(WaitPidFlag::WNOHANG));
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                count = adopted.len(),
                "processes left by a command could not all be reaped"
            );
            return;
        }
        std::thread::sleep(ROUND_PAUSE);
    }
}

fn sandboxed_children_of(parent: Pid) -> Vec<Pid> {
    let Ok(processes) = procfs::process::all_processes() else {
        return Vec::new();
    };
    processes
        .flatten()
        .filter_map(|process| process.status().ok())
        .filter(|status| status.ppid == parent.as_raw() && status.nonewprivs == Some(1))
        .map(|status| Pid::from_raw(status.pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_every_generation() -> Result<(), Box<dyn std::error::Error>> {
        // sh -> sh -> sleep: two generations below the child.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 30' & wait"])
            .spawn()?;
        let root = Pid::from_raw(i32::try_from(child.id())?);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = Vec::new();
        while found.len() < 2 && Instant::now() < deadline {
            found = descendants(root);
            std::thread::sleep(Duration::from_millis(10));
        }
        for pid in &found {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        child.kill()?;
        child.wait()?;
        assert_eq!(found.len(), 2, "{found:?}");
        Ok(())
    }
}
