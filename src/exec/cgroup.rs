//! A pids cgroup per command, for when upkeep runs as root.
//!
//! Why: the kernel never applies `RLIMIT_NPROC` to user id 0, so as root a fork bomb would not
//! be bounded by the resource limits of `limits`. The pids controller bounds the number of
//! processes (and threads) in a cgroup for everyone, root included.
//!
//! How: the sandbox's supervisor creates `upkeep-<its pid>` beneath its own cgroup in the pids
//! hierarchy (cgroup v1's `pids` controller, or cgroup v2 where the parent already delegates
//! `pids`), sets `pids.max`, and moves itself in before it starts the command, so every process
//! the command starts is counted. When the command is over it moves back out and removes the
//! directory. Only used where creating such a cgroup works; `limits::ProcessLimit` says
//! whether it applied.

use std::io;
use std::path::{Path, PathBuf};

/// The most process ids Linux ever hands out (`PID_MAX_LIMIT` on 64-bit systems).
const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;

/// The command's pids cgroup; [`PidsCgroup::remove`] takes the supervisor back out.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
    parent: PathBuf,
}

impl PidsCgroup {
    /// Creates the cgroup with at most `max` processes and moves the calling process into it.
    pub fn create_and_join(max: u64) -> io::Result<PidsCgroup> {
        let parent = own_pids_cgroup()?;
        let pid = std::process::id();
        let dir = parent.join(format!("upkeep-{pid}"));
        std::fs::create_dir(&dir)?;
        let cgroup = PidsCgroup { dir, parent };
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
    pub fn remove(self) -> io::Result<()> {
        std::fs::write(self.parent.join("cgroup.procs"), std::process::id().to_string())?;
        std::fs::remove_dir(&self.dir)
    }
}

/// Removes the cgroup of a supervisor (a child of this process) that was killed before it
/// could remove it itself; nothing happens when there is none.
pub fn remove_leftover(supervisor: u32) {
    if let Ok(parent) = own_pids_cgroup() {
        let _ = std::fs::remove_dir(parent.join(format!("upkeep-{supervisor}")));
    }
}

/// Whether a pids cgroup can be made here (tried for real, then removed).
pub fn available() -> bool {
    match PidsCgroup::create_and_join(u64::from(u32::MAX)) {
        Ok(cgroup) => cgroup.remove().is_ok(),
        Err(_) => false,
    }
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
