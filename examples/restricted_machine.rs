//! Runs a program as it would run on a machine more restricted than this one, for upkeep's
//! sandbox tests (tests/suite/restricted_machines.rs). The restrictions are the kernel's own,
//! not pretended: seccomp filters make the refused system calls fail as a restricted kernel
//! makes them fail, and the user id is really dropped.
//!
//! ```text
//! restricted_machine [--user UID] [--no-user-namespaces] [--no-landlock] -- PROGRAM [ARGS...]
//! ```
//!
//! - `--user UID`: run as that user and group, with no supplementary groups (a CI runner's
//!   normal user; needs root to start).
//! - `--no-user-namespaces`: creating a user namespace fails with `EPERM`, as on GitHub-hosted
//!   Ubuntu 24.04 runners (AppArmor's `apparmor_restrict_unprivileged_userns`); `clone3`
//!   fails with `ENOSYS`, so callers fall back to `clone`, whose flags a filter can read.
//! - `--no-landlock`: Landlock's system calls fail with `ENOSYS`, as on a kernel built without
//!   it.
//!
//! Linux only. Filters are installed while still root (`CAP_SYS_ADMIN`), so the program does
//! not start with `no_new_privs` set: a runner's processes do not have it either.

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    match linux::run(std::env::args_os().skip(1).collect()) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("restricted_machine: {message}");
            std::process::ExitCode::from(125)
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("restricted_machine: Linux only");
    std::process::exit(125);
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;
    use std::convert::Infallible;
    use std::ffi::OsString;
    use std::os::unix::process::CommandExt;

    use nix::libc;
    use nix::unistd::{Gid, Uid};
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };

    /// What the command line asked for.
    #[derive(Default)]
    struct Restrictions {
        user: Option<u32>,
        no_user_namespaces: bool,
        no_landlock: bool,
        program: Vec<OsString>,
    }

    fn parse(args: Vec<OsString>) -> Result<Restrictions, String> {
        let mut restrictions = Restrictions::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--user") => {
                    let uid = args.next().and_then(|uid| uid.to_str()?.parse().ok());
                    restrictions.user = Some(uid.ok_or("--user takes a numeric user id")?);
                }
                Some("--no-user-namespaces") => restrictions.no_user_namespaces = true,
                Some("--no-landlock") => restrictions.no_landlock = true,
                Some("--") => {
                    restrictions.program = args.collect();
                    break;
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        if restrictions.program.is_empty() {
            return Err(
                "usage: restricted_machine [--user UID] [--no-user-namespaces] [--no-landlock] -- PROGRAM [ARGS...]"
                    .into(),
            );
        }
        Ok(restrictions)
    }

    /// A filter that answers the calls in `rules` with `errno` and lets everything else through.
    fn refusing(rules: Vec<(i64, Vec<SeccompRule>)>, errno: i32) -> Result<BpfProgram, String> {
        let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("{e}"))?;
        let rules: BTreeMap<i64, Vec<SeccompRule>> = rules.into_iter().collect();
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno as u32), arch)
            .and_then(TryInto::try_into)
            .map_err(|e| format!("building a filter: {e}"))
    }

    /// A rule matching calls whose first argument has the `CLONE_NEWUSER` bit.
    fn new_user_namespace() -> Result<SeccompRule, String> {
        let flag = libc::CLONE_NEWUSER as u64;
        SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|e| format!("{e}"))
    }

    pub fn run(args: Vec<OsString>) -> Result<Infallible, String> {
        let restrictions = parse(args)?;
        let mut filters = Vec::new();
        if restrictions.no_user_namespaces {
            filters.push(refusing(
                vec![
                    (libc::SYS_unshare, vec![new_user_namespace()?]),
                    (libc::SYS_clone, vec![new_user_namespace()?]),
                ],
                libc::EPERM,
            )?);
            filters.push(refusing(vec![(libc::SYS_clone3, Vec::new())], libc::ENOSYS)?);
        }
        if restrictions.no_landlock {
            filters.push(refusing(
                vec![
                    (libc::SYS_landlock_create_ruleset, Vec::new()),
                    (libc::SYS_landlock_add_rule, Vec::new()),
                    (libc::SYS_landlock_restrict_self, Vec::new()),
                ],
                libc::ENOSYS,
            )?);
        }
        for filter in &filters {
            seccompiler::apply_filter(filter).map_err(|e| format!("applying a filter: {e}"))?;
        }
        if let Some(uid) = restrictions.user {
            nix::unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
            nix::unistd::setgid(Gid::from_raw(uid)).map_err(|e| format!("setgid: {e}"))?;
            nix::unistd::setuid(Uid::from_raw(uid)).map_err(|e| format!("setuid: {e}"))?;
        }
        let (program, args) = restrictions.program.split_first().ok_or("no program")?;
        let error = std::process::Command::new(program).args(args).exec();
        Err(format!("cannot run {program:?}: {error}"))
    }
}
