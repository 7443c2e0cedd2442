//! Which sandbox commands get on this machine: found out once per run, reported in
//! `run_started.sandbox`, and then enforced exactly by the trampoline for every command.
//!
//! Why: what the kernel offers varies (Landlock's version, whether user namespaces are allowed,
//! whether upkeep runs as root). A run decides up front from a [`Probe`] made in a throw-away
//! child process, so the operator sees what applies before any work, `--require-sandbox` can
//! refuse to start, and the trampoline never quietly falls back to less than was reported: it
//! refuses to run a command whose [`SandboxPlan`] it cannot carry out.
//!
//! Which `/proc` commands see is part of the plan too: their own PID namespace's where a mount
//! namespace lets the sandbox mount one, else the host's, and the report says which.
//!
//! The plan is plain data, the same on every system: on Linux it says which of Landlock,
//! namespaces, capabilities, a pids cgroup and a subreaper apply; on other systems (macOS) the
//! probe reports [`Kernel::Other`] and the plan says honestly that commands get only resource
//! limits and their process group's cleanup (`docs/commands.md`, "Other systems").

use serde::{Deserialize, Serialize};

use super::limits::{Limits, ProcessLimit};

/// Which kind of kernel upkeep runs on, as far as the sandbox is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kernel {
    /// Linux: Landlock and namespaces where enabled, capability sets, child subreapers, `/proc`.
    Linux,
    /// Any other (macOS): none of those; POSIX resource limits and process groups only.
    Other,
}

impl Kernel {
    /// The kernel this build of upkeep runs on.
    pub const CURRENT: Kernel = if cfg!(target_os = "linux") {
        Kernel::Linux
    } else {
        Kernel::Other
    };
}

/// How namespaces are made on this machine, if at all (see `namespaces`, Linux only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Namespaces {
    /// Unshared directly: upkeep is privileged (root).
    Direct,
    /// Inside a new user namespace that maps upkeep's ids to themselves.
    User,
    /// None can be made (user namespaces disabled or restricted, no privilege, not Linux).
    None,
}

/// Filesystem confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filesystem {
    /// Landlock: writes only beneath the work tree and the scratch directory.
    Landlock,
    /// None: the kernel has no Landlock (or is not Linux).
    None,
}

/// How commands are kept off the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// The operator passed `--allow-network`.
    Allowed,
    /// A network namespace with only its own loopback interface.
    Namespace,
    /// No namespace could be made: a seccomp filter refuses every socket but a UNIX one (so
    /// TCP, UDP and DNS, raw and packet sockets), loopback included. See `seccomp`.
    Seccomp,
    /// The seccomp filter, and Landlock's TCP rules as a second layer (Linux 6.7+).
    SeccompAndLandlockTcp,
    /// Landlock denies TCP bind and connect (Linux 6.7+), and nothing else could be had: UDP
    /// (and so DNS) stays open, and the project's own loopback TCP is denied too.
    LandlockTcp,
    /// Nothing can isolate commands from the network here.
    None,
}

/// What is left of the capability sets in a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capabilities {
    /// All five sets (bounding, ambient, inheritable, permitted, effective) are empty.
    None,
    /// Permitted, effective, inheritable and ambient are empty; the bounding set could not be
    /// cleared (no namespace, no `CAP_SETPCAP`). `no_new_privs` still stops any program from
    /// gaining a capability.
    BoundingSetKept,
    /// Not Linux: there are no capability sets to clear and no `no_new_privs`. The command has
    /// every privilege of upkeep's user (all of them when upkeep runs as root).
    Unchanged,
}

/// How every process a command started is ended with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleanup {
    /// The command runs in its own PID namespace; the kernel kills all of it at once.
    PidNamespace,
    /// The sandbox's supervisor is a child subreaper and kills every descendant until none is left.
    Subreaper,
    /// Not Linux: the command's process group is killed. A process that left the group (`setsid`,
    /// a daemon) is out of reach and outlives the command.
    ProcessGroup,
}

/// Which processes a command's `/proc` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Proc {
    /// A `/proc` of the command's own PID namespace, mounted in a mount namespace of its own
    /// over the host's (hidden beneath it): no other process is visible.
    Private,
    /// The host's `/proc`: every process of the machine is listed, and their command lines are
    /// readable (no mount namespace, or no PID namespace, or the kernel refused the mount).
    Host,
}

/// What this machine offers, as found by the trampoline's probe stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub kernel: Kernel,
    /// Landlock's filesystem rules are enforced (ABI 1, Linux 5.13).
    pub landlock_filesystem: bool,
    /// Landlock can deny TCP bind and connect (ABI 4).
    pub landlock_tcp: bool,
    /// Landlock can stop signals to processes outside the sandbox (ABI 6).
    pub landlock_signal_scope: bool,
    pub namespaces: Namespaces,
    /// upkeep runs with user id 0.
    pub root: bool,
    /// The capability bounding set can be cleared without a namespace.
    pub can_clear_bounding_set: bool,
    /// A pids cgroup can be made (only looked for as root).
    pub pids_cgroup: bool,
    /// The kernel takes the seccomp network filter (see `seccomp`).
    #[serde(default)]
    pub seccomp: bool,
    /// A fresh `/proc` can be mounted in a new mount and PID namespace.
    pub private_proc: bool,
}

impl Probe {
    /// What to assume on `kernel` when the probe itself could not run: nothing.
    pub fn nothing(kernel: Kernel) -> Self {
        Probe {
            kernel,
            landlock_filesystem: false,
            landlock_tcp: false,
            landlock_signal_scope: false,
            namespaces: Namespaces::None,
            root: false,
            can_clear_bounding_set: false,
            pids_cgroup: false,
            seccomp: false,
            private_proc: false,
        }
    }
}

/// The sandbox every command of a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPlan {
    /// The kernel the plan was made for; the trampoline refuses a plan made for another.
    pub kernel: Kernel,
    pub filesystem: Filesystem,
    pub network: Network,
    pub namespaces: Namespaces,
    pub capabilities: Capabilities,
    pub process_limit: ProcessLimit,
    pub cleanup: Cleanup,
    /// Landlock stops signals from the command to upkeep's side of the sandbox.
    pub signal_scope: bool,
    pub proc: Proc,
}

impl SandboxPlan {
    /// The strongest sandbox `probe` allows. A network namespace is preferred: it covers every
    /// protocol and keeps a project's own loopback tests working. Without one, a seccomp filter
    /// refuses every socket but a UNIX one (loopback too), with Landlock's TCP rules as a second
    /// layer where the kernel has them; Landlock's TCP rules alone leave UDP and DNS open. On [`Kernel::Other`] nothing of Linux's is
    /// planned, whatever the probe says.
    pub fn decide(probe: &Probe, allow_network: bool) -> Self {
        if probe.kernel == Kernel::Other {
            return Self::posix_only(allow_network);
        }
        let namespaces = probe.namespaces;
        let has_namespaces = namespaces != Namespaces::None;
        SandboxPlan {
            kernel: Kernel::Linux,
            filesystem: if probe.landlock_filesystem {
                Filesystem::Landlock
            } else {
                Filesystem::None
            },
            network: if allow_network {
                Network::Allowed
            } else if has_namespaces {
                Network::Namespace
            } else if probe.seccomp && probe.landlock_tcp {
                Network::SeccompAndLandlockTcp
            } else if probe.seccomp {
                Network::Seccomp
            } else if probe.landlock_tcp {
                Network::LandlockTcp
            } else {
                Network::None
            },
            namespaces,
            capabilities: if has_namespaces || probe.can_clear_bounding_set {
                Capabilities::None
            } else {
                Capabilities::BoundingSetKept
            },
            process_limit: match (probe.root, probe.pids_cgroup, namespaces) {
                (true, true, _) => ProcessLimit::Cgroup,
                (true, false, _) => ProcessLimit::None,
                (false, _, Namespaces::User) => ProcessLimit::Rlimit,
                (false, _, _) => ProcessLimit::RlimitPerUser,
            },
            cleanup: if has_namespaces {
                Cleanup::PidNamespace
            } else {
                Cleanup::Subreaper
            },
            signal_scope: probe.landlock_signal_scope,
            proc: if has_namespaces && probe.private_proc {
                Proc::Private
            } else {
                Proc::Host
            },
        }
    }

    /// The plan of a system other than Linux: resource limits (no process limit: POSIX has
    /// none) and the process group's cleanup; no confinement, no network isolation.
    fn posix_only(allow_network: bool) -> Self {
        SandboxPlan {
            kernel: Kernel::Other,
            filesystem: Filesystem::None,
            network: if allow_network { Network::Allowed } else { Network::None },
            namespaces: Namespaces::None,
            capabilities: Capabilities::Unchanged,
            process_limit: ProcessLimit::None,
            cleanup: Cleanup::ProcessGroup,
            signal_scope: false,
            proc: Proc::Host,
        }
    }

    /// `--require-sandbox`: what is missing, if anything. Filesystem confinement is required,
    /// and network isolation unless the operator allowed the network.
    pub fn missing_requirements(&self) -> Option<String> {
        if self.kernel == Kernel::Other {
            let missing = match self.network {
                Network::Allowed => "filesystem confinement",
                _ => "filesystem confinement and network isolation",
            };
            return Some(format!(
                "{missing}: upkeep's command sandbox (Landlock, namespaces) exists only on Linux; \
                 here commands run with resource limits only (see docs/commands.md, \"Other systems\")"
            ));
        }
        let mut missing = Vec::new();
        if self.filesystem == Filesystem::None {
            missing.push("filesystem confinement (Landlock, Linux 5.13+ with Landlock enabled)");
        }
        if self.network == Network::None {
            missing
                .push("network isolation (user or network namespaces, or a seccomp filter; or pass --allow-network)");
        }
        (!missing.is_empty()).then(|| missing.join(" and "))
    }
}

/// `run_started.sandbox`: what commands get in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    pub filesystem: Filesystem,
    pub network: Network,
    pub capabilities: Capabilities,
    pub limits: LimitsReport,
    pub cleanup: Cleanup,
    pub proc: Proc,
}

/// The limits of `run_started.sandbox`, with what enforces the process limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsReport {
    pub processes: u64,
    pub memory_mb: u64,
    pub file_size_mb: u64,
    pub cpu_seconds: u64,
    pub processes_enforced_by: ProcessLimit,
}

impl SandboxReport {
    pub fn new(plan: &SandboxPlan, limits: &Limits) -> Self {
        SandboxReport {
            filesystem: plan.filesystem,
            network: plan.network,
            capabilities: plan.capabilities,
            limits: LimitsReport {
                processes: limits.processes,
                memory_mb: limits.memory_mb,
                file_size_mb: limits.file_size_mb,
                cpu_seconds: limits.cpu_seconds,
                processes_enforced_by: plan.process_limit,
            },
            cleanup: plan.cleanup,
            proc: plan.proc,
        }
    }

    /// One line for people: `filesystem landlock, network namespace, ...`.
    pub fn summary(&self) -> String {
        format!(
            "filesystem {}, network {}, capabilities {}, cleanup {}, proc {}",
            wire_name(self.filesystem),
            wire_name(self.network),
            wire_name(self.capabilities),
            wire_name(self.cleanup),
            wire_name(self.proc)
        )
    }
}

/// The name a plan's enum value has in JSON.
fn wire_name(value: impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
