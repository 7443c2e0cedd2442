//! What a command leaves behind: its processes, when the call ends, when upkeep is
//! interrupted and when upkeep is killed outright, and, as root, the pids cgroup that held
//! them (a leftover one used to make a later command with the same supervisor pid fail).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::super::support::{Script, TestRepo, Upkeep, finish};
use super::{operator_config, outputs, processes_starting_with, run_commands, sandbox_of, shell, skip, wait_until};

/// Counts live processes whose command line starts with `sleep 98710`, from inside a command.
const COUNT_ESCAPEES: &str =
    "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null | grep -c '^sleep 98710' || true";

#[test]
fn processes_a_command_left_are_gone_after_the_call() {
    // One leaves the session, one is double-forked and orphaned; both would outlive a kill of
    // the command's process group.
    let leave = "setsid sleep 987101 & (setsid sh -c 'sleep 987102 & :' &); sleep 0.5; \
                 echo running=$(for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null | grep -c '^sleep 98710')";
    let out = run_commands(Upkeep::new(), &[leave, COUNT_ESCAPEES], &[]);
    out.assert_code(0);
    let results = outputs(&out);
    assert!(results[0].starts_with("running=2\n"), "both escaped: {}", results[0]);
    assert!(
        results[1].starts_with("0\n"),
        "gone before the next call: {}",
        results[1]
    );
    assert!(processes_starting_with("sleep 98710").is_empty());
}

/// upkeep stopped in the middle of a command, by an interrupt or by SIGKILL (no cleanup code of
/// upkeep's runs then): the command and whatever it started go with it.
fn processes_are_gone_when_upkeep_ends(signal: nix::sys::signal::Signal, marker: &str) {
    let repo = TestRepo::new();
    let command = format!("setsid sleep {marker}1 & (setsid sh -c 'sleep {marker}2 & :' &); sleep {marker}3");
    let script = Script::new(&[shell("hang", &command), finish("no_tasks")]);
    let mut upkeep = Upkeep::new().args(["run", "--task", "t", "--allow-dangerous-tools", "--repo"]);
    upkeep = upkeep.args([repo.path()]).args(["--replay"]).args([script.path()]);
    let mut child = upkeep.spawn();
    let all_started = wait_until(Duration::from_secs(30), || {
        processes_starting_with(&format!("sleep {marker}")).len() == 3
    });
    // As root, the command's processes are in a pids cgroup that must go with them.
    let cgroup = processes_starting_with(&format!("sleep {marker}3"))
        .first()
        .and_then(|pid| pids_cgroup_of(pid))
        .filter(|dir| dir.to_string_lossy().contains("upkeep"));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    nix::sys::signal::kill(pid, signal).expect("signal sent");
    let _ = child.wait();
    assert!(all_started, "the command's processes never all started");
    let gone = wait_until(Duration::from_secs(10), || {
        processes_starting_with(&format!("sleep {marker}")).is_empty()
    });
    let left = processes_starting_with(&format!("sleep {marker}"));
    for pid in &left {
        let _ = std::process::Command::new("kill").args(["-9", pid]).status();
    }
    assert!(gone, "left running after upkeep ended: {left:?}");
    match cgroup {
        Some(dir) => assert!(
            wait_until(Duration::from_secs(10), || !dir.exists()),
            "the command's pids cgroup {dir:?} was left behind"
        ),
        None => skip("the command ran in no pids cgroup of upkeep's (only as root): not checked"),
    }
}

/// The directory of the cgroup that holds process `pid` in the hierarchy with the pids
/// controller (cgroup v1's `pids`, else cgroup v2), as this process sees the mounts.
fn pids_cgroup_of(pid: &str) -> Option<PathBuf> {
    let memberships = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent major:minor root mount-point options... - fs-type source super-options
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let after: Vec<&str> = after.split(' ').collect();
            Some((*fields.get(3)?, *fields.get(4)?, *after.first()?, *after.get(2)?))
        })
        .collect();
    let version1 = memberships.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    });
    let (path, mount) = match version1 {
        Some(path) => (
            path,
            mounts
                .iter()
                .find(|(_, _, fs, options)| *fs == "cgroup" && options.split(',').any(|o| o == "pids"))?,
        ),
        None => (
            memberships.lines().find_map(|line| line.strip_prefix("0::"))?,
            mounts.iter().find(|(_, _, fs, _)| *fs == "cgroup2")?,
        ),
    };
    let (root, mount_point, _, _) = mount;
    let relative = std::path::Path::new(path).strip_prefix(root).ok()?;
    Some(PathBuf::from(mount_point).join(relative))
}

#[test]
fn processes_are_gone_when_upkeep_is_killed() {
    processes_are_gone_when_upkeep_ends(nix::sys::signal::Signal::SIGKILL, "98720");
}

#[test]
fn processes_are_gone_when_upkeep_is_interrupted() {
    processes_are_gone_when_upkeep_ends(nix::sys::signal::Signal::SIGINT, "98730");
}

#[test]
fn a_fork_loop_is_stopped_by_the_process_limit() {
    let upkeep = Upkeep::new();
    let config = operator_config(&upkeep, "[limits]\nprocesses = 32\n");
    let fork_loop = "i=0; while [ $i -lt 300 ]; do sleep 987401 & i=$((i+1)); done; echo started=$i";
    let started = Instant::now();
    let out = run_commands(upkeep, &[fork_loop], &["--config", &config, "--shell-timeout", "60"]);
    out.assert_code(0);
    let sandbox = sandbox_of(&out);
    assert_eq!(sandbox["limits"]["processes"], 32);
    if sandbox["limits"]["processes_enforced_by"] == "none" {
        skip("root without a pids cgroup: the kernel ignores RLIMIT_NPROC for root");
        return;
    }
    let result = &outputs(&out)[0];
    assert!(!result.contains("started=300"), "all 300 processes started: {result}");
    assert!(result.to_lowercase().contains("fork"), "{result}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "stopped by the limit, not the timeout"
    );
    assert!(processes_starting_with("sleep 987401").is_empty());
}
