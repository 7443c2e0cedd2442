//! The parts of the other systems' sandbox that can be checked on any Unix: which plans it
//! refuses, its control pipe, how it reads a program's end, and what its probe reports.

use std::os::unix::process::ExitStatusExt;

use super::*;
use crate::exec::plan::{Kernel, Probe};

fn linux_probe() -> Probe {
    Probe {
        landlock_filesystem: true,
        landlock_tcp: true,
        landlock_signal_scope: true,
        namespaces: Namespaces::User,
        ..Probe::nothing(Kernel::Linux)
    }
}

#[test]
fn plans_for_linux_are_refused_and_the_posix_plan_is_run() {
    for allow_network in [false, true] {
        let posix = SandboxPlan::decide(&Probe::nothing(Kernel::Other), allow_network);
        assert_eq!(linux_only(&posix), None, "{posix:?}");
    }
    let full = SandboxPlan::decide(&linux_probe(), false);
    assert!(linux_only(&full).is_some(), "{full:?}");
    let bare = SandboxPlan::decide(&Probe::nothing(Kernel::Linux), true);
    assert!(linux_only(&bare).is_some(), "{bare:?}");
    // A plan for this system that was altered to ask for one Linux-only thing is still refused.
    let posix = SandboxPlan::decide(&Probe::nothing(Kernel::Other), false);
    let altered = [
        SandboxPlan {
            filesystem: Filesystem::Landlock,
            ..posix
        },
        SandboxPlan {
            network: Network::Namespace,
            ..posix
        },
        SandboxPlan {
            capabilities: Capabilities::None,
            ..posix
        },
        SandboxPlan {
            process_limit: ProcessLimit::RlimitPerUser,
            ..posix
        },
        SandboxPlan {
            cleanup: Cleanup::Subreaper,
            ..posix
        },
        SandboxPlan {
            signal_scope: true,
            ..posix
        },
        SandboxPlan {
            proc: Proc::Private,
            ..posix
        },
    ];
    for plan in altered {
        assert!(linux_only(&plan).is_some(), "{plan:?}");
    }
}

#[test]
fn both_ends_of_the_control_pipe_are_closed_on_exec() -> Result<(), Box<dyn std::error::Error>> {
    let (reader, writer) = control_pipe()?;
    for end in [&reader, &writer] {
        let flags = FdFlag::from_bits_truncate(fcntl(end, FcntlArg::F_GETFD)?);
        assert!(flags.contains(FdFlag::FD_CLOEXEC));
    }
    Ok(())
}

#[test]
fn a_programs_end_is_its_code_or_its_signal() {
    assert_eq!(ended(ExitStatus::from_raw(3 << 8)), Some(Ended::Code(3)));
    assert_eq!(ended(ExitStatus::from_raw(9)), Some(Ended::Signal(9)));
}

#[test]
fn the_probe_offers_nothing_of_linuxs() {
    let probe = here();
    assert_eq!(probe.kernel, Kernel::Other);
    assert_eq!(probe.root, nix::unistd::geteuid().is_root());
    assert!(!probe.landlock_filesystem && !probe.pids_cgroup);
}
