//! The namespaces a command runs in: its own network (loopback only) and its own process ids.
//!
//! Why: a network namespace takes the host's network away from a command completely (TCP, UDP,
//! DNS, the host's loopback) while a project's own tests can still listen on and connect to
//! 127.0.0.1 inside it. A PID namespace gives every process the command starts one common
//! fate: when the namespace's first process (the sandbox's init) ends, the kernel kills every
//! other process in it, including those that called `setsid` or double-forked.
//!
//! How: the supervisor stage of the trampoline calls `unshare` before it starts the rest. As
//! root it unshares the namespaces directly ([`Namespaces::Direct`]). Otherwise it first makes a
//! user namespace ([`Namespaces::User`]) in which its own user and group ids map to themselves
//! (so files keep their owners and permissions) and `setgroups` is denied, which is what the
//! kernel lets an unprivileged process do. Inside a new network namespace only `lo` exists,
//! down; it is brought up through rtnetlink.
//!
//! `/proc`: a PID namespace alone keeps the host's `/proc`, which lists every process of the
//! machine and their command lines. Where the plan says `Proc::Private`, the supervisor also
//! makes a mount namespace (every mount in it private, so nothing propagates to the host) and
//! hands the one capability needed to mount (`CAP_SYS_ADMIN`, of its own user namespace when
//! there is one) to the confinement stage through the inheritable and ambient sets; that
//! stage, the PID namespace's init, mounts a fresh `/proc` over the host's
//! ([`mount_private_proc`]) and then drops every capability before the program runs.
//! Landlock then forbids any mount or unmount, so the host's `/proc` stays hidden.

use std::io;

use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Uid, getegid, geteuid};

use nix::mount::{MsFlags, mount};

use super::plan::Namespaces;

/// Where `/proc` is.
const PROC: &str = "/proc";

/// Makes the user (when `how` says so) and network namespaces, in the calling process, which
/// must be single-threaded for a user namespace. The PID namespace is separate
/// ([`enter_pid_namespace`]): once it is made, the process can no longer start threads.
pub(crate) fn enter(how: Namespaces, network: bool, mounts: bool) -> Result<(), String> {
    let mut flags = if network {
        CloneFlags::CLONE_NEWNET
    } else {
        CloneFlags::empty()
    };
    if mounts {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    match how {
        Namespaces::None => return Ok(()),
        Namespaces::Direct if flags.is_empty() => return Ok(()),
        Namespaces::Direct => unshare(flags).map_err(|error| format!("cannot unshare namespaces: {error}"))?,
        Namespaces::User => {
            let (uid, gid) = (geteuid(), getegid());
            unshare(flags | CloneFlags::CLONE_NEWUSER)
                .map_err(|error| format!("cannot make a user namespace: {error}"))?;
            map_ids(uid, gid).map_err(|error| format!("cannot map ids in the user namespace: {error}"))?;
        }
    }
    if network {
        loopback_up().map_err(|error| format!("cannot bring up the loopback interface: {error}"))?;
    }
    if mounts && how != Namespaces::None {
        // Copies of the host's mounts may share propagation with them: a mount made here
        // would then appear on the host. Private first, recursively.
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(|error| format!("cannot make the mount namespace private: {error}"))?;
    }
    Ok(())
}

/// Keeps `CAP_SYS_ADMIN` (of the current user namespace) in the permitted, inheritable and
/// ambient sets, so that the next program this process starts can mount `/proc`; every other
/// capability goes as [`super::confine::drop_capabilities`] would drop it. Call it instead of
/// that, right after [`enter`] with `mounts`.
pub(crate) fn keep_only_the_mount_capability() -> Result<(), String> {
    use caps::{CapSet, Capability, CapsHashSet};
    let only: CapsHashSet = [Capability::CAP_SYS_ADMIN].into_iter().collect();
    // Raising the inheritable and ambient sets before the bounding set is cleared (clearing it
    // needs CAP_SETPCAP, which goes with the rest).
    caps::set(None, CapSet::Inheritable, &only)
        .map_err(|error| format!("cannot keep the mount capability: {error}"))?;
    caps::raise(None, CapSet::Ambient, Capability::CAP_SYS_ADMIN)
        .map_err(|error| format!("cannot pass the mount capability on: {error}"))?;
    caps::clear(None, CapSet::Bounding).map_err(|error| format!("cannot clear the bounding set: {error}"))?;
    caps::clear(None, CapSet::Effective).map_err(|error| format!("cannot clear the effective set: {error}"))?;
    caps::set(None, CapSet::Permitted, &only).map_err(|error| format!("cannot clear the permitted set: {error}"))?;
    Ok(())
}

/// Mounts a `/proc` of the caller's PID namespace over the host's. The caller must be in that
/// namespace (its init) and hold `CAP_SYS_ADMIN` of the mount namespace's user namespace.
pub(crate) fn mount_private_proc() -> Result<(), String> {
    caps::raise(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_ADMIN)
        .map_err(|error| format!("cannot use the mount capability: {error}"))?;
    mount(
        Some("proc"),
        PROC,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|error| format!("cannot mount a private /proc: {error}"))
}

/// Makes a PID namespace for the caller's next child (which becomes its init), after
/// [`enter`] made the user namespace where one is needed.
pub(crate) fn enter_pid_namespace() -> Result<(), String> {
    unshare(CloneFlags::CLONE_NEWPID).map_err(|error| format!("cannot make a PID namespace: {error}"))
}

/// Tries the ways to make namespaces, best first, in this (throw-away) process, and returns the
/// first that worked with a network namespace whose loopback came up, and whether a private
/// `/proc` could be mounted in it (tried by `private_proc_works`, a child that becomes the PID
/// namespace's init as the confinement stage would).
pub(crate) fn probe(private_proc_works: impl FnOnce() -> bool) -> (Namespaces, bool) {
    let works = |how| enter(how, true, true).and_then(|()| enter_pid_namespace()).is_ok();
    let how = if geteuid().is_root() && works(Namespaces::Direct) {
        Namespaces::Direct
    } else if works(Namespaces::User) {
        Namespaces::User
    } else {
        return (Namespaces::None, false);
    };
    let proc = keep_only_the_mount_capability().is_ok() && private_proc_works();
    (how, proc)
}

fn map_ids(uid: Uid, gid: Gid) -> io::Result<()> {
    // Without denying setgroups first, an unprivileged process may not write a gid map.
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// The loopback interface's index: the first interface every network namespace gets.
const LOOPBACK_INDEX: u32 = 1;

/// Sets `lo` up (RTM_NEWLINK with IFF_UP), waiting for the kernel's acknowledgement.
fn loopback_up() -> io::Result<()> {
    use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{LinkFlags, LinkMessage};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

    let mut link = LinkMessage::default();
    link.header.index = LOOPBACK_INDEX;
    link.header.flags = LinkFlags::Up;
    link.header.change_mask = LinkFlags::Up;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK;
    header.sequence_number = 1;
    let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)));
    message.finalize();
    let mut buffer = vec![0; message.buffer_len()];
    message.serialize(&mut buffer);

    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    socket.send(&buffer, 0)?;
    let (reply, _) = socket.recv_from_full()?;
    let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply)
        .map_err(|error| io::Error::other(format!("unreadable netlink reply: {error}")))?;
    match reply.payload {
        NetlinkPayload::Error(error) => match error.code {
            None => Ok(()),
            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
        },
        other => Err(io::Error::other(format!("unexpected netlink reply: {other:?}"))),
    }
}
