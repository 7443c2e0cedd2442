//! The network layer of the sandbox where no network namespace can be made: a seccomp filter.
//!
//! Why: on machines that refuse user namespaces to unprivileged users (GitHub-hosted Ubuntu
//! 24.04 runners restrict them through AppArmor), a command cannot get a network namespace of
//! its own. Landlock's TCP rules alone leave UDP open, and with it DNS, the classic way out of a
//! sandbox. A seccomp filter works on every Linux upkeep supports, needs no privilege (only
//! `no_new_privs`, which the confinement stage sets anyway), and is inherited by everything the
//! command starts, across `exec`.
//!
//! What it refuses, with `EACCES`:
//! - `socket()` of any family but `AF_UNIX`: internet sockets (TCP, UDP, ICMP), raw and packet
//!   sockets, netlink, and every other family. Local UNIX sockets keep working (build tools and
//!   test runners talk to their own processes over them).
//! - `io_uring_setup()`: io_uring can create sockets without the `socket` system call.
//!
//! A system call of another architecture than upkeep's own (a 32-bit `socketcall` through the
//! compat entry) fails the filter's architecture check, and the kernel kills the process.
//!
//! Loopback is refused too (a filter cannot see the address a socket connects to): a project's
//! own tests that listen on 127.0.0.1 fail under this layer, as they do under Landlock's TCP
//! rules. `--allow-network` lifts it.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

/// The compiled filter, or why it could not be built on this architecture.
pub(crate) fn network_filter() -> Result<BpfProgram, String> {
    let build = || -> Result<BpfProgram, seccompiler::BackendError> {
        let not_unix = SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?;
        let rules: BTreeMap<i64, Vec<SeccompRule>> = [
            (libc::SYS_socket, vec![not_unix]),
            // An empty list of rules matches every call.
            (libc::SYS_io_uring_setup, Vec::new()),
        ]
        .into_iter()
        .collect();
        SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            std::env::consts::ARCH.try_into()?,
        )?
        .try_into()
    };
    build().map_err(|error| format!("cannot build the seccomp network filter: {error}"))
}

/// Applies the filter to the calling thread and everything it starts from now on. The caller
/// must have set `no_new_privs` (or hold `CAP_SYS_ADMIN`), as the kernel requires.
pub(crate) fn refuse_network() -> Result<(), String> {
    let filter = network_filter()?;
    seccompiler::apply_filter(&filter).map_err(|error| format!("cannot apply the seccomp network filter: {error}"))
}

/// Whether this kernel takes the filter. Applies it to the calling thread, so call it only in a
/// throw-away process (the probe stage).
pub(crate) fn available() -> bool {
    nix::sys::prctl::set_no_new_privs().is_ok() && refuse_network().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter compiles for the architecture upkeep is built for; a child thread that
    /// applies it can no longer open a UDP or TCP socket, and still opens a UNIX one.
    #[test]
    fn the_filter_refuses_internet_sockets_and_keeps_unix_ones() {
        let outcome = std::thread::spawn(|| {
            nix::sys::prctl::set_no_new_privs().expect("no_new_privs");
            refuse_network().expect("the filter applies");
            let udp = std::net::UdpSocket::bind("127.0.0.1:0")
                .map(|_| ())
                .map_err(|e| e.kind());
            let tcp = std::net::TcpListener::bind("127.0.0.1:0")
                .map(|_| ())
                .map_err(|e| e.kind());
            let unix = std::os::unix::net::UnixDatagram::unbound().map(|_| ());
            (udp, tcp, unix.is_ok())
        })
        .join()
        .expect("the thread ends");
        assert_eq!(outcome.0, Err(std::io::ErrorKind::PermissionDenied), "UDP");
        assert_eq!(outcome.1, Err(std::io::ErrorKind::PermissionDenied), "TCP");
        assert!(outcome.2, "UNIX sockets stay usable");
    }
}
