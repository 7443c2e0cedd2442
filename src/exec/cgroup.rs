//! A pids cgroup per command, for when upkeep runs as root.
//!
//! Why: the kernel never applies `RLIMIT_NPROC` to user id 0, so as root a fork bomb would not
//! be bounded by the resource limits of `limits`. The pids controller bounds the number of
//! processes (and threads) in a cgroup for everyone, root included.
//!
//! How: beneath its own cgroup in the pids hierarchy (cgroup v1's `pids` controller, or cgroup v2
//! where the parent already delegates `pids`), upkeep keeps one directory, `upkeep`, that stays.
//! The sandbox's supervisor creates `upkeep/<its pid>` in it, sets `pids.max`, and moves itself
//! in before it starts the command, so every process the command starts is counted. When the
//! command is over it moves back out and removes the directory.
//!
//! Why the shared `upkeep` directory: a hierarchy's own directories are usually read-only
//! (`r-xr-xr-x`), so making or removing a cgroup right beneath them takes `CAP_DAC_OVERRIDE`,
//! which the supervisor gives up before it starts the command. `upkeep` is made once, with the
//! capability, and belongs to root with the usual `rwxr-xr-x`; removing a command's cgroup from
//! it needs nothing but being root, so the supervisor cleans up after itself even when upkeep
//! was killed and is no longer there to do it. A cgroup left behind by a supervisor that was
//! killed itself is empty; one with the same name is replaced rather than refused.
//!
//! Only used where creating such a cgroup works; `limits::ProcessLimit` says whether it applied.

use std::io;
use std::path::{Path, PathBuf};

/// The most process ids Linux ever hands out (`PID_MAX_LIMIT` on 64-bit systems).
const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;

/// The directory beneath the process's own pids cgroup that holds one cgroup per command.
const PARENT_NAME: &str = "upkeep";

/// The command's pids cgroup; [`PidsCgroup::remove`] takes the supervisor back out.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
    home: PathBuf,
}

impl PidsCgroup {
    /// Creates the cgroup with at most `max` processes and moves the calling process into it.
    pub(crate) fn create_and_join(max: u64) -> io::Result<PidsCgroup> {
        PidsCgroup::create_and_move(std::process::id(), max)
    }

    /// Creates the cgroup named after `pid` with at most `max` processes and moves that process
    /// into it.
    fn create_and_move(pid: u32, max: u64) -> io::Result<PidsCgroup> {
        let home = own_pids_cgroup()?;
        let parent = shared_parent(&home)?;
        let dir = parent.join(pid.to_string());
        if let Err(error) = std::fs::create_dir(&dir) {
            if error.kind() != io::ErrorKind::AlreadyExists {
                return Err(error);
            }
            // A live process with this pid is this one, so the cgroup is a leftover of a
            // supervisor that was killed; it is empty, or removing it fails and says why.
            std::fs::remove_dir(&dir)?;
            std::fs::create_dir(&dir)?;
        }
        let cgroup = PidsCgroup { dir, home };
        // The kernel takes at most PID_MAX_LIMIT, or "max".
        let max = if max > PID_MAX_LIMIT {
            "max".to_owned()
        } else {
            max.to_string()
        };
        let joined = std::fs::write(cgroup.dir.join("pids.max"), max)
            .and_then(|()| std::fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()));
        match joined {
            Ok(()) => Ok(cgroup),
            Err(error) => {
                let _ = std::fs::remove_dir(&cgroup.dir);
                Err(error)
            }
        }
    }

    /// Moves the calling process back to its original cgroup and removes this one. Every other
    /// process in it must be gone.
    pub(crate) fn remove(self) -> io::Result<()> {
        self.remove_moving(std::process::id())
    }

    fn remove_moving(self, pid: u32) -> io::Result<()> {
        std::fs::write(self.home.join("cgroup.procs"), pid.to_string())?;
        std::fs::remove_dir(&self.dir)
    }
}

/// Removes the cgroup of a supervisor (a child of this process) that was killed before it
/// could remove it itself; nothing happens when there is none.
pub(crate) fn remove_leftover(supervisor: u32) {
    if let Ok(home) = own_pids_cgroup() {
        let _ = std::fs::remove_dir(home.join(PARENT_NAME).join(supervisor.to_string()));
    }
}

/// Whether a pids cgroup can be made here (tried for real, then removed).
pub(crate) fn available() -> bool {
    match PidsCgroup::create_and_join(u64::from(u32::MAX)) {
        Ok(cgroup) => cgroup.remove().is_ok(),
        Err(_) => false,
    }
}

/// `home/upkeep`, made if it is missing, with the pids controller for its children (cgroup v2
/// enables controllers per directory; v1 has it everywhere in the hierarchy).
fn shared_parent(home: &Path) -> io::Result<PathBuf> {
    let parent = home.join(PARENT_NAME);
    match std::fs::create_dir(&parent) {
        Ok(()) => {}
        // Another run made it, or an earlier one did.
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let subtree_control = parent.join("cgroup.subtree_control");
    if subtree_control.exists() {
        std::fs::write(subtree_control, "+pids")?;
    }
    Ok(parent)
}

/// The directory of this process's cgroup in a hierarchy that has the pids controller.
fn own_pids_cgroup() -> io::Result<PathBuf> {
    let myself = procfs::process::Process::myself().map_err(io::Error::other)?;
    let mounts = myself.mountinfo().map_err(io::Error::other)?;
    let groups = myself.cgroups().map_err(io::Error::other)?;
    for mount in &mounts {
        let version1 = mount.fs_type == "cgroup" && mount.super_options.contains_key("pids");
        let version2 = mount.fs_type == "cgroup2";
        if !(version1 || version2) {
            continue;
        }
        let membership = groups.0.iter().find(|group| {
            if version1 {
                group.controllers.iter().any(|controller| controller == "pids")
            } else {
                group.hierarchy == 0 && group.controllers.is_empty()
            }
        });
        let Some(membership) = membership else {
            continue;
        };
        // The cgroup's path is relative to the hierarchy's root; the mount may show a subtree.
        let Ok(relative) = Path::new(&membership.pathname).strip_prefix(&mount.root) else {
            continue;
        };
        let dir = mount.mount_point.join(relative);
        let delegates_pids = if version1 {
            true
        } else {
            std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "pids"))
        };
        if delegates_pids {
            return Ok(dir);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no cgroup hierarchy with the pids controller is available to this process",
    ))
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
