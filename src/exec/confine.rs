//! The confinement stage of the sandbox: the last step before the command's program runs.
//!
//! Why: the kernel's restrictions (Landlock, capabilities, resource limits) bind the process
//! that sets them and everything it then starts, so they must be set in the command's own
//! process tree, after the supervisor made the namespaces and before the program runs.
//! `pre_exec` would do that but is `unsafe`, which this crate forbids; the trampoline runs
//! upkeep's own executable as this stage instead (see `trampoline`).
//!
//! What it does, in order, failing closed (exit 126 and a message, never running the program
//! with less than was planned):
//!
//! 0. as the init of a PID namespace whose plan has a private `/proc`: mounts it over the
//!    host's (see `namespaces`);
//! 1. resource limits (`limits`);
//! 2. Landlock: read and execute only the readable paths (the system, the toolchains, the
//!    clone's git directory: see `readable`), read, write, create, remove and rename only
//!    beneath the writable directories (the work tree, the scratch directory), plus `/dev/null`
//!    and the other harmless devices; where the
//!    plan says so, no TCP bind or connect; best effort, no signals to and no abstract UNIX
//!    sockets of processes outside the sandbox (ABI 6). Landlock also denies `ptrace` (and
//!    reading `/proc/<pid>/environ` or `mem`) of any process outside the sandbox, and sets
//!    `no_new_privs`, so set-uid programs such as `sudo` gain nothing;
//! 3. capabilities: the bounding and ambient sets, then the effective, inheritable and permitted
//!    sets are cleared, and checked to be empty (the supervisor already cleared them once, right
//!    after making the namespaces, when it still had the capabilities that clearing the
//!    bounding set needs);
//! 4. where the plan says so (no network namespace), the seccomp filter that refuses every
//!    socket but a UNIX one (`seccomp`), after `no_new_privs`, which the kernel requires for it;
//! 5. in a PID namespace this process is its init (PID 1): it starts the program, reaps every
//!    orphan, reports the program's status to the supervisor, and exits with it, which makes
//!    the kernel kill whatever else is left in the namespace. Otherwise it replaces itself with
//!    the program (`exec`).
//!
//! Linux only: other systems have none of these restrictions and no confinement stage (see
//! `sys_other.rs`).
//!
//! Without Landlock nothing here confines reading (which is why the environment is allowlisted
//! and upkeep is non-dumpable as well).

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::invocation::{EXIT_CANNOT_RUN, Invocation, cannot_run, exit_status_for, fail};
use super::limits;
use super::plan::{Capabilities, Filesystem, Network, Proc};

/// The newest Landlock ABI whose filesystem rights were tested with this code. Newer ABIs add
/// rights (e.g. ABI 9's pathname UNIX socket connections) whose denial could break ordinary
/// builds, so they are adopted deliberately, not by a kernel upgrade.
const FS_ABI: ABI = ABI::V5;

/// What Landlock can enforce on this kernel. Creating (not applying) a ruleset asks the kernel;
/// it restricts nothing in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LandlockSupport {
    pub filesystem: bool,
    pub tcp: bool,
    pub signal_scope: bool,
}

pub(crate) fn landlock_support() -> LandlockSupport {
    let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    LandlockSupport {
        filesystem: hard()
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|ruleset| ruleset.create())
            .is_ok(),
        tcp: hard()
            .handle_access(AccessNet::from_all(ABI::V4))
            .and_then(|ruleset| ruleset.create())
            .is_ok(),
        signal_scope: hard().scope(Scope::Signal).and_then(|ruleset| ruleset.create()).is_ok(),
    }
}

/// What Landlock must enforce for one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LandlockRules {
    /// `Some`: confine writes to these absolute directories, and reads to them and `readable`.
    pub writable: Option<Vec<PathBuf>>,
    /// Absolute files and directories that may be read (and run) besides `writable`.
    pub readable: Vec<PathBuf>,
    /// Deny TCP bind and connect.
    pub deny_tcp: bool,
}

/// Runs the confinement stage for `invocation` (see the module documentation). Returns only
/// when the program could not be run or, as a namespace's init, when it ended.
pub(crate) fn run(invocation: &Invocation) -> ExitCode {
    let policy = &invocation.policy;
    let plan = &policy.plan;
    let init = Pid::this().as_raw() == 1;
    if init {
        // If the supervisor dies, so does the namespace: the kernel kills its other processes.
        if let Err(error) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
            return fail(
                EXIT_CANNOT_RUN,
                &format!("cannot tie the sandbox to its supervisor: {error}"),
            );
        }
    }
    if init && plan.proc == Proc::Private {
        // Before Landlock, which forbids mounting, and before the capabilities go.
        if let Err(message) = super::namespaces::mount_private_proc() {
            return fail(EXIT_CANNOT_RUN, &format!("refusing to run the command: {message}"));
        }
    }
    if let Err(message) = apply_limits(&policy.limits, plan.process_limit) {
        return fail(EXIT_CANNOT_RUN, &message);
    }
    let rules = LandlockRules {
        writable: (plan.filesystem == Filesystem::Landlock).then(|| policy.writable.clone()),
        readable: policy.readable.clone(),
        deny_tcp: matches!(plan.network, Network::LandlockTcp | Network::SeccompAndLandlockTcp),
    };
    if let Err(message) = restrict_current_thread(&rules) {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command unconfined: {message}"),
        );
    }
    if let Err(message) = drop_capabilities(plan.capabilities) {
        return fail(
            EXIT_CANNOT_RUN,
            &format!("refusing to run the command with capabilities: {message}"),
        );
    }
    if let Err(error) = nix::sys::prctl::set_no_new_privs() {
        return fail(EXIT_CANNOT_RUN, &format!("cannot set no_new_privs: {error}"));
    }
    // Last, since it binds this stage too: nothing here needs a socket from now on.
    if matches!(plan.network, Network::Seccomp | Network::SeccompAndLandlockTcp) {
        if let Err(message) = super::seccomp::refuse_network() {
            return fail(
                EXIT_CANNOT_RUN,
                &format!("refusing to run the command with network access: {message}"),
            );
        }
    }
    if init {
        return run_as_init(&invocation.program, &invocation.args);
    }
    // `exec` returns only if it failed; on success this process is the program.
    let error = Command::new(&invocation.program).args(&invocation.args).exec();
    cannot_run(&invocation.program, &error)
}

/// As the PID namespace's init: starts the program, reaps every process re-parented here,
/// and when the program ends, writes how it ended to standard input (the supervisor's status
/// pipe: `exit N` or `signal N`) and exits. Exiting makes the kernel kill the rest of the
/// namespace.
fn run_as_init(program: &OsString, args: &[OsString]) -> ExitCode {
    let child = match Command::new(program).args(args).stdin(Stdio::null()).spawn() {
        Ok(child) => child,
        Err(error) => {
            let code = cannot_run(program, &error);
            report_status(&format!("exit {}", exit_status_for(&error)));
            return code;
        }
    };
    let child = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                report_status(&format!("exit {code}"));
                return ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                report_status(&format!("signal {}", signal as i32));
                return ExitCode::from(128u8.saturating_add(u8::try_from(signal as i32).unwrap_or(0)));
            }
            // An orphan re-parented to init, reaped; or an interrupted wait.
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(error) => {
                return fail(EXIT_CANNOT_RUN, &format!("lost track of the command: {error}"));
            }
        }
    }
}

/// The resource limits, then the process limit where it is an rlimit (see `limits`).
fn apply_limits(limits: &limits::Limits, process_limit: limits::ProcessLimit) -> Result<(), String> {
    let already = match process_limit {
        limits::ProcessLimit::RlimitPerUser => processes_of_this_user(),
        _ => 0,
    };
    limits::apply(limits)?;
    if let Some(processes) = limits::process_rlimit(limits, process_limit, already) {
        setrlimit(Resource::RLIMIT_NPROC, processes, processes)
            .map_err(|error| format!("cannot limit processes: {error}"))?;
    }
    Ok(())
}

/// How many processes and threads the real user of this process has on the machine now (what
/// `RLIMIT_NPROC` counts outside a user namespace).
pub(crate) fn processes_of_this_user() -> u64 {
    let uid = nix::unistd::getuid().as_raw();
    let Ok(processes) = procfs::process::all_processes() else {
        return 0;
    };
    processes
        .flatten()
        .filter_map(|process| process.status().ok())
        .filter(|status| status.ruid == uid)
        .map(|status| status.threads)
        .sum()
}

/// Writes the program's end to file descriptor 0, which the supervisor made a pipe to itself.
fn report_status(status: &str) {
    let stdin = io::stdin();
    let _ = nix::unistd::write(stdin.as_fd(), format!("{status}\n").as_bytes());
}

/// Confines the calling thread and everything it starts afterwards with Landlock, as `rules`
/// says. Fails rather than leaving the thread less confined than asked.
pub(crate) fn restrict_current_thread(rules: &LandlockRules) -> Result<(), String> {
    if rules.writable.is_none() && !rules.deny_tcp {
        return Ok(());
    }
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if rules.writable.is_some() {
        // Without at least the first ABI's write rights there is no confinement worth the name:
        // their absence is an error, not a silent no-op. Newer rights where the kernel has them.
        ruleset = ruleset
            .handle_access(AccessFs::from_all(ABI::V1))
            .map_err(|error| format!("Landlock is not available: {error}"))?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(FS_ABI))
            .map_err(|error| format!("cannot handle filesystem rights: {error}"))?
            .set_compatibility(CompatLevel::HardRequirement);
    }
    if rules.deny_tcp {
        // Handled with no rule allowing any port: every TCP bind and connect is denied.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(|error| format!("Landlock cannot deny TCP (Linux 6.7+ needed): {error}"))?;
    }
    let created = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal)
        .and_then(|ruleset| ruleset.scope(Scope::AbstractUnixSocket))
        .and_then(|ruleset| ruleset.create())
        .map_err(|error| format!("cannot create the Landlock ruleset: {error}"))?;
    let mut created = created;
    if let Some(writable) = &rules.writable {
        for path in &rules.readable {
            // A path that went away since the list was made has nothing left to read.
            let Ok(fd) = PathFd::new(path) else {
                continue;
            };
            // Devices (`/dev/null`...) may be written too; other files and directories only
            // read and run. A file takes file rights only.
            let access = if super::readable::DEVICES.iter().any(|device| Path::new(device) == path) {
                AccessFs::from_file(FS_ABI)
            } else if path.is_dir() {
                AccessFs::from_read(FS_ABI)
            } else {
                AccessFs::from_read(FS_ABI) & AccessFs::from_file(FS_ABI)
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|error| format!("cannot allow reading {}: {error}", path.display()))?;
        }
        for dir in writable {
            created = created
                .add_rule(PathBeneath::new(open_path(dir)?, AccessFs::from_all(FS_ABI)))
                .map_err(|error| format!("cannot allow writing in {}: {error}", dir.display()))?;
        }
    }
    let status = created
        .restrict_self()
        .map_err(|error| format!("cannot apply the Landlock ruleset: {error}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err("the kernel did not enforce the Landlock ruleset".to_owned()),
    }
}

fn open_path(path: &Path) -> Result<PathFd, String> {
    PathFd::new(path).map_err(|error| format!("cannot open {}: {error}", path.display()))
}

/// Clears the capability sets (see [`Capabilities`]) and checks that they are empty.
pub(crate) fn drop_capabilities(expected: Capabilities) -> Result<(), String> {
    use caps::CapSet;
    // The bounding set first: dropping from it needs CAP_SETPCAP, which goes with the rest.
    let bounding = caps::clear(None, CapSet::Bounding);
    if let (Err(error), Capabilities::None) = (&bounding, expected) {
        return Err(format!("cannot clear the bounding set: {error}"));
    }
    // Kernels before 4.3 have no ambient set; there is nothing to clear then.
    let _ = caps::clear(None, CapSet::Ambient);
    for set in [CapSet::Effective, CapSet::Inheritable, CapSet::Permitted] {
        caps::clear(None, set).map_err(|error| format!("cannot clear the {set:?} set: {error}"))?;
    }
    // Capabilities belong to threads: read this thread's, not the process leader's.
    let status = <procfs::process::Status as procfs::FromRead>::from_file("/proc/thread-self/status")
        .map_err(|error| format!("cannot read this process's capabilities: {error}"))?;
    let bounding_left = status.capbnd.unwrap_or(0);
    let left = status.capeff | status.capprm | status.capinh | status.capamb.unwrap_or(0);
    if left != 0 || (expected == Capabilities::None && bounding_left != 0) {
        return Err(format!(
            "capabilities are left: effective/permitted/inheritable/ambient {left:#x}, bounding {bounding_left:#x}"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "confine_tests.rs"]
mod tests;
