//! What a command may see of the machine: its own clone and scratch directory and the system,
//! not the machine's temporary space (where other runs' clones live), not another user's view
//! of upkeep's directories, and not other processes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::support::{Script, TestRepo, Upkeep, finish};
use super::{outputs, run_commands, sandbox_of, shell, wait_until};

/// A secret file planted in the machine's `/tmp`, removed when dropped.
pub(crate) struct Planted {
    pub(crate) path: PathBuf,
    pub(crate) secret: String,
}

impl Planted {
    pub(crate) fn in_dir(dir: &Path, name: &str) -> Self {
        let secret = format!("planted-secret-{}-{}", std::process::id(), fastrand::u64(..));
        let path = dir.join(format!("{name}-{}", fastrand::u64(..)));
        std::fs::write(&path, &secret).expect("planted");
        Planted { path, secret }
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why: commands could read anything upkeep's user can, including every other file in the
/// machine's temporary directory and, in upkeep's TMPDIR, other runs' clones. Only the system,
/// the command's own clone and its scratch directory are readable now.
#[test]
fn a_command_cannot_read_the_machines_temporary_directory() {
    let upkeep = Upkeep::new();
    let in_tmp = Planted::in_dir(Path::new("/tmp"), "upkeep-test-planted");
    // What another run's clone looks like: a directory beside this run's in upkeep's TMPDIR.
    let sibling = upkeep.temp_dir().join("upkeep-sibling");
    std::fs::create_dir_all(&sibling).expect("sibling");
    let in_sibling = Planted::in_dir(&sibling, "secret");
    let snoop = format!(
        "cat {tmp}; cat {sib}; ls {sibdir}; echo listed=$(ls /tmp 2>/dev/null | grep -c upkeep-test-planted); \
         cat /proc/self/root{tmp}; ln -s /tmp \"$TMPDIR/via-link\"; cat \"$TMPDIR/via-link/{name}\"; ln {tmp} \"$TMPDIR/hard-link\"; cat \"$TMPDIR/hard-link\"; \
         echo tried",
        name = in_tmp
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        tmp = in_tmp.path.display(),
        sib = in_sibling.path.display(),
        sibdir = sibling.display(),
    );
    // The command's own clone, its history and its scratch stay usable.
    let own = "cat README.md && git log --oneline | wc -l && echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" \
               && echo y > \"$HOME/g\" && echo own-ok";
    let out = run_commands(upkeep, &[&snoop, own], &[]);
    out.assert_code(0);
    let results = outputs(&out);
    assert!(results[0].contains("tried"), "{}", results[0]);
    assert!(!results[0].contains(&in_tmp.secret), "read /tmp: {}", results[0]);
    assert!(
        !results[0].contains(&in_sibling.secret),
        "read a sibling: {}",
        results[0]
    );
    assert!(results[0].contains("listed=0\n"), "listed /tmp: {}", results[0]);
    assert!(results[1].contains("own-ok"), "{}", results[1]);
}

/// Why: the temporary root was made with the umask's mode (0755), so on a shared host every
/// user could read a private repository's clone while a run went on. Observed from outside
/// while a command holds the run, and tried as `nobody`.
#[test]
fn every_temporary_directory_upkeep_makes_is_private() {
    let repo = TestRepo::new();
    let script = Script::new(&[shell("wait", "sleep 987601"), finish("no_tasks")]);
    let mut upkeep = Upkeep::new().args(["run", "--task", "t", "--allow-dangerous-tools", "--json", "--repo"]);
    upkeep = upkeep.args([repo.path()]).args(["--replay"]).args([script.path()]);
    let temp = upkeep.temp_dir();
    // `nobody` may pass through the test's own directories to reach upkeep's.
    for dir in [upkeep.tmp.path(), temp.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut child = upkeep.spawn();
    let root = || -> Option<PathBuf> {
        std::fs::read_dir(&temp)
            .ok()?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.join("tmp").exists())
    };
    let found = wait_until(Duration::from_secs(30), || root().is_some());
    let root = root();
    let mut modes = Vec::new();
    let mut listed = None;
    if let Some(root) = &root {
        for dir in [root.clone(), root.join("repo"), root.join("git"), root.join("tmp")] {
            let mode = std::fs::metadata(&dir)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            modes.push((dir, mode));
        }
        if nix::unistd::geteuid().is_root() {
            listed = std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
                .arg(root.join("repo/README.md"))
                .output()
                .ok();
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "the run never made its clone");
    for (dir, mode) in &modes {
        assert_eq!(*mode, 0o700, "{} has mode {mode:o}", dir.display());
    }
    if let Some(listed) = listed {
        assert!(!listed.status.success(), "nobody read the clone: {listed:?}");
    }
}

/// Why: the PID namespace kept the host's `/proc`, so a command listed every process of the
/// machine and read their command lines (this test's and upkeep's included).
#[test]
fn commands_see_only_their_own_processes() {
    let me = std::process::id();
    let snoop = format!(
        "echo pids: $(ls /proc | grep -c '^[0-9]'); \
         tr '\\0' ' ' < /proc/{me}/cmdline; echo; \
         umount /proc 2>&1; umount -l /proc 2>&1; echo after-umount: $(ls /proc | grep -c '^[0-9]'); \
         for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null | grep -c -e 'run[ ]--repo' ; \
         echo done"
    );
    let out = run_commands(Upkeep::new(), &[&snoop], &[]);
    out.assert_code(0);
    let sandbox = sandbox_of(&out);
    let result = &outputs(&out)[0];
    assert!(result.contains("done"), "{result}");
    // The sandbox's init, the shell and what it runs: a handful, not the machine's.
    let pids: u32 = result
        .lines()
        .find_map(|line| line.strip_prefix("pids: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u32::MAX);
    assert!(pids < 10, "saw {pids} processes: {result}");
    // The host's `/proc` stays hidden: the command cannot unmount its own.
    let after: u32 = result
        .lines()
        .find_map(|line| line.strip_prefix("after-umount: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u32::MAX);
    assert!(after < 10, "saw {after} processes after unmounting: {result}");
    let test_binary = std::env::args().next().unwrap_or_default();
    assert!(
        !result.contains(&test_binary),
        "read this test's command line: {result}"
    );
    assert!(result.contains("\n0\n"), "saw upkeep or this test: {result}");
    assert_eq!(sandbox["proc"], "private", "{sandbox}");
}

/// Runs `script` through the real trampoline under this machine's plan, with a private `/proc`
/// or, as where the kernel refuses to mount one (simulated: the probe's answer is overridden),
/// without. Returns the exit code and the output.
fn run_with_proc(private_proc: bool, script: &str) -> (Option<i32>, String) {
    use upkeep::exec::Limits;
    use upkeep::exec::invocation::{SandboxPolicy, supervise_args};
    use upkeep::exec::plan::{Probe, SandboxPlan};

    let upkeep = assert_cmd::cargo::cargo_bin!("upkeep");
    let probed = std::process::Command::new(upkeep)
        .args(["__sandbox-exec", "probe"])
        .output()
        .expect("the probe runs");
    let probe: Probe = serde_json::from_slice(probed.stdout.trim_ascii()).expect("the probe answers");
    let dir = tempfile::tempdir().expect("temporary directory");
    let policy = SandboxPolicy {
        writable: vec![dir.path().to_path_buf()],
        readable: upkeep::exec::readable::readable_paths(&[]),
        plan: SandboxPlan::decide(&Probe { private_proc, ..probe }, false),
        limits: Limits::default(),
    };
    let args = supervise_args("sh", &["-c".to_owned(), script.to_owned()], &policy).expect("arguments");
    // The supervisor's standard input is upkeep's control pipe: held open while the command
    // runs (its end would stop the command).
    let mut child = std::process::Command::new(upkeep)
        .args(&args)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("upkeep starts");
    let control = child.stdin.take();
    let output = child.wait_with_output().expect("the command ends");
    drop(control);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

/// Where no `/proc` can be mounted, commands still run, with the host's (and the report says
/// `host`, see `without_a_mountable_proc_the_report_says_host`); where one can, they see their
/// own processes only.
#[test]
fn a_plan_without_a_private_proc_runs_commands_with_the_hosts() {
    let count = "ls /proc | grep -c '^[0-9]'";
    let (code, host) = run_with_proc(false, count);
    assert_eq!(code, Some(0), "{host}");
    let host: u32 = host.trim().parse().unwrap_or(0);
    let (code, private) = run_with_proc(true, count);
    assert_eq!(code, Some(0), "{private}");
    let private: u32 = private.trim().parse().unwrap_or(u32::MAX);
    assert!(private < 10, "{private} processes in a private /proc");
    assert!(host > private, "the host's /proc lists {host} processes");
}
