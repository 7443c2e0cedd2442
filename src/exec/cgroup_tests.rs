use std::io::Write;
use std::process::{Child, Command};

use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn skip(reason: &str) {
    let _ = writeln!(io::stderr(), "SKIP: {reason}");
}

/// A `sleep` that is killed and reaped however the test ends.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether this process can make pids cgroups. Not `available`, which moves the whole test
/// process and would race the other tests.
fn cgroups_here() -> bool {
    nix::unistd::getuid().is_root() && own_pids_cgroup().and_then(|home| shared_parent(&home)).is_ok()
}

fn cgroup_of(pid: u32) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
}

/// A supervisor killed before it could clean up leaves an empty cgroup named after its pid;
/// a later supervisor that gets the same pid must not be refused for it (it used to fail with
/// "File exists" and the command did not run).
#[test]
fn a_leftover_cgroup_with_the_same_name_is_replaced() -> TestResult {
    if !cgroups_here() {
        skip("pids cgroups are made only as root, where a hierarchy with the pids controller exists");
        return Ok(());
    }
    let sleeper = Sleeper(Command::new("sleep").arg("60").spawn()?);
    let pid = sleeper.0.id();
    let parent = shared_parent(&own_pids_cgroup()?)?;
    let leftover = parent.join(pid.to_string());
    std::fs::create_dir(&leftover)?;

    let cgroup = PidsCgroup::create_and_move(pid, 8)?;
    let membership = cgroup_of(pid)?;
    assert!(
        membership.contains(&format!("/{PARENT_NAME}/{pid}\n")),
        "the process is not in its cgroup: {membership}"
    );
    assert_eq!(std::fs::read_to_string(leftover.join("pids.max"))?.trim(), "8");

    cgroup.remove_moving(pid)?;
    assert!(!leftover.exists(), "the cgroup is still there");
    assert!(!cgroup_of(pid)?.contains(&format!("/{PARENT_NAME}/")));
    Ok(())
}

/// The supervisor removes its cgroup after it gave up its capabilities: that must work with
/// nothing but being root. Capabilities belong to a thread, so one thread gives them up here.
#[test]
fn root_without_capabilities_removes_a_commands_cgroup() -> TestResult {
    if !cgroups_here() {
        skip("pids cgroups are made only as root, where a hierarchy with the pids controller exists");
        return Ok(());
    }
    let parent = shared_parent(&own_pids_cgroup()?)?;
    let dir = parent.join(format!("test-{}", std::process::id()));
    std::fs::create_dir(&dir)?;
    let removing = dir.clone();
    let removed = std::thread::spawn(move || -> Result<(), String> {
        caps::clear(None, caps::CapSet::Effective).map_err(|error| error.to_string())?;
        std::fs::remove_dir(&removing).map_err(|error| error.to_string())
    })
    .join()
    .map_err(|_| "the thread panicked")?;
    let _ = std::fs::remove_dir(&dir);
    assert_eq!(
        removed,
        Ok(()),
        "a command's cgroup beneath {parent:?} cannot be removed without capabilities"
    );
    Ok(())
}
