//! The sandbox around commands, tried the way a hostile command would: the real binary, a
//! replay script whose `run_shell_command` calls attempt the escape, and checks from outside.
//! A test whose kernel feature is missing prints `SKIP: <reason>` and returns. What is left
//! after a command (processes, its pids cgroup) is tried in `cleanup`.

mod cleanup;
pub(crate) mod isolation;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{RunOutput, Script, TestRepo, Upkeep, finish, reply, run_local, run_replay};

fn skip(reason: &str) {
    eprintln!("SKIP: {reason}");
}

pub(super) fn sandbox_of(out: &RunOutput) -> Value {
    out.events_of("run_started")
        .first()
        .map(|event| event["sandbox"].clone())
        .unwrap_or(Value::Null)
}

/// The outputs of the run's `run_shell_command` calls, in order.
pub(super) fn outputs(out: &RunOutput) -> Vec<String> {
    out.events_of("tool_result")
        .iter()
        .filter(|event| event["tool"] == "run_shell_command")
        .map(|event| event["output"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn shell(plan: &str, command: &str) -> String {
    reply(plan, &[("run_shell_command", json!({"command": command}))])
}

/// Runs `commands` one per turn with `--allow-dangerous-tools` and `extra` flags.
fn run_commands(upkeep: Upkeep, commands: &[&str], extra: &[&str]) -> RunOutput {
    let repo = TestRepo::new();
    let mut replies: Vec<String> = commands.iter().map(|command| shell("run", command)).collect();
    replies.push(finish("no_tasks"));
    let mut flags = vec!["--task", "t", "--allow-dangerous-tools"];
    flags.extend_from_slice(extra);
    run_replay(upkeep, &repo, &Script::new(&replies), &flags)
}

/// An operator config file in the test's directory.
fn operator_config(upkeep: &Upkeep, text: &str) -> String {
    let path = upkeep.tmp.path().join("operator.toml");
    std::fs::write(&path, text).expect("config written");
    path.to_str().expect("utf-8 path").to_owned()
}

/// Ids of live processes whose command line (arguments joined by spaces) starts with `prefix`.
fn processes_starting_with(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|entry| {
            let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            !zombie && cmdline.starts_with(prefix)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

#[test]
fn run_started_reports_the_sandbox() {
    let out = run_commands(Upkeep::new(), &[], &[]);
    out.assert_code(0);
    let sandbox = sandbox_of(&out);
    for key in ["filesystem", "network", "capabilities", "cleanup", "proc"] {
        assert!(sandbox[key].is_string(), "{key} in {sandbox}");
    }
    for key in ["processes", "memory_mb", "file_size_mb", "cpu_seconds"] {
        assert!(sandbox["limits"][key].is_u64(), "limits.{key} in {sandbox}");
    }
    assert!(sandbox["limits"]["processes_enforced_by"].is_string(), "{sandbox}");
    assert_ne!(sandbox["network"], "allowed");

    let allowed = run_commands(Upkeep::new(), &[], &["--allow-network"]);
    allowed.assert_code(0);
    assert_eq!(sandbox_of(&allowed)["network"], "allowed");

    // Safe mode runs no command: there is no sandbox to report.
    let safe = run_local(&TestRepo::new(), &Script::new(&[finish("no_tasks")]), &["--task", "t"]);
    safe.assert_code(0);
    assert_eq!(sandbox_of(&safe), Value::Null);
}

/// A perl one-liner that connects to 127.0.0.1:`port` and says whether it could.
fn connect_to(port: u16) -> String {
    format!(
        "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\", Timeout => 5) \
         or die \"connect failed: $!\\n\"; print \"connected\\n\"'"
    )
}

#[test]
fn loopback_tcp_is_unreachable_without_allow_network_and_reachable_with_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = listener.local_addr().expect("address").port();
    let command = connect_to(port);

    let out = run_commands(Upkeep::new(), &[&command], &[]);
    out.assert_code(0);
    let network = sandbox_of(&out)["network"].clone();
    if network == "none" {
        skip("neither namespaces nor Landlock network rules are available");
        return;
    }
    let result = &outputs(&out)[0];
    assert!(result.contains("connect failed"), "{network}: {result}");
    assert!(!result.contains("connected\n"), "{result}");

    let out = run_commands(Upkeep::new(), &[&command], &["--allow-network"]);
    out.assert_code(0);
    assert_eq!(sandbox_of(&out)["network"], "allowed");
    let result = &outputs(&out)[0];
    assert!(result.starts_with("connected\n"), "{result}");
}

/// Why a namespace is preferred over Landlock's TCP rules: a project's tests that listen on
/// loopback keep working.
#[test]
fn a_projects_own_loopback_works_in_the_network_namespace() {
    let own_loopback = "perl -MIO::Socket::INET -e '$l = IO::Socket::INET->new(Listen => 1, LocalAddr => \"127.0.0.1\", LocalPort => 0) \
         or die \"listen failed: $!\\n\"; IO::Socket::INET->new(PeerAddr => \"127.0.0.1:\" . $l->sockport) \
         or die \"connect failed: $!\\n\"; print \"own loopback works\\n\"'";
    let out = run_commands(Upkeep::new(), &[own_loopback], &[]);
    out.assert_code(0);
    let result = &outputs(&out)[0];
    match sandbox_of(&out)["network"].as_str() {
        Some("namespace") => assert!(result.starts_with("own loopback works\n"), "{result}"),
        Some("landlock-tcp") => assert!(result.contains("failed"), "documented: {result}"),
        other => skip(&format!("no network namespace here (network: {other:?})")),
    }
}

#[test]
fn commands_have_no_capabilities() {
    let out = run_commands(
        Upkeep::new(),
        &["grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status"],
        &[],
    );
    out.assert_code(0);
    let result = &outputs(&out)[0];
    let sets: Vec<(&str, &str)> = result
        .lines()
        .filter(|line| line.starts_with("Cap"))
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name, value.trim()))
        .collect();
    assert_eq!(sets.len(), 5, "{result}");
    let bounding_kept = sandbox_of(&out)["capabilities"] == "bounding-set-kept";
    for (name, value) in sets {
        if name == "CapBnd" && bounding_kept {
            continue;
        }
        assert_eq!(value, "0000000000000000", "{name} in {result}");
    }
}

#[test]
fn commands_cannot_read_upkeeps_environment() {
    let canary = format!("canary-{}-{}", std::process::id(), fastrand::u64(..));
    // Every process's environment, upkeep's included; a read refused is said on stderr. (The
    // pattern does not match the script's own text, which is in its shell's command line.)
    let snoop = "for p in /proc/[0-9]*; do \
                   if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- '-[-]replay'; then echo \"upkeep is ${p#/proc/}\"; fi; \
                   cat $p/environ; \
                 done 2>&1 | tr '\\0' '\\n'";
    let upkeep = Upkeep::new().env("UPKEEP_CANARY", &canary);
    let out = run_commands(upkeep, &[snoop], &[]);
    out.assert_code(0);
    let result = &outputs(&out)[0];
    if sandbox_of(&out)["proc"] == "private" {
        // upkeep is not even visible (`commands_see_only_their_own_processes`).
        assert!(!result.contains("upkeep is "), "the command found upkeep: {result}");
    } else {
        assert!(result.contains("upkeep is "), "the command found upkeep: {result}");
        assert!(result.contains("Permission denied"), "{result}");
    }
    assert!(!result.contains(&canary), "upkeep's environment leaked");
    assert!(!out.stdout.contains(&canary) && !out.stderr.contains(&canary));
}

/// Non-dumpable on its own, without the sandbox: a process of the same user, without
/// capabilities, cannot read upkeep's environment. As root, upkeep and the reader both run as
/// `nobody` (a reader with fewer capabilities than upkeep would be refused by that alone).
#[test]
fn upkeep_is_not_dumpable() {
    use std::os::unix::fs::PermissionsExt;
    let canary = format!("canary-{}-{}", std::process::id(), fastrand::u64(..));
    let repo = TestRepo::new();
    let script = Script::new(&[shell("wait", "sleep 987501"), finish("no_tasks")]);
    let upkeep = Upkeep::new();
    let root = nix::unistd::geteuid().is_root();
    let as_same_user = |program: &std::path::Path| {
        if root {
            let mut command = std::process::Command::new("setpriv");
            command
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(program);
            command
        } else {
            std::process::Command::new(program)
        }
    };
    if root {
        // nobody must be able to use the repository, the script and the temporary directories.
        let open = |path: &std::path::Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        // git refuses a repository owned by someone else.
        let chown = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(repo.path())
            .status()
            .expect("chown runs");
        assert!(chown.success());
        open(script.path().parent().expect("parent"), 0o755);
        open(upkeep.tmp.path(), 0o755);
        open(&upkeep.temp_dir(), 0o777);
        open(&upkeep.tmp.path().join("home"), 0o777);
    }
    let mut child = as_same_user(assert_cmd::cargo::cargo_bin!("upkeep"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", upkeep.tmp.path().join("home"))
        .env("TMPDIR", upkeep.temp_dir())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("UPKEEP_CANARY", &canary)
        .args(["run", "--task", "t", "--allow-dangerous-tools", "--repo"])
        .arg(repo.path())
        .arg("--replay")
        .arg(script.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("upkeep starts");
    let started = wait_until(Duration::from_secs(30), || {
        !processes_starting_with("sleep 987501").is_empty()
    });
    let environ = format!("/proc/{}/environ", child.id());
    let read = as_same_user(std::path::Path::new("cat")).arg(&environ).output();
    let _ = child.kill();
    let output = child.wait_with_output().expect("upkeep ends");
    assert!(
        started,
        "the command never started: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = read.expect("the reader runs");
    let stderr = String::from_utf8_lossy(&read.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!String::from_utf8_lossy(&read.stdout).contains(&canary));
}

/// A sandbox planned for another kind of system is refused before anything runs: the
/// trampoline never carries out a plan with what this system happens to have instead.
#[test]
fn a_sandbox_planned_for_another_system_is_refused() {
    use upkeep::exec::Limits;
    use upkeep::exec::invocation::{SandboxPolicy, supervise_args};
    use upkeep::exec::plan::{Kernel, Probe, SandboxPlan};

    let other = match Kernel::CURRENT {
        Kernel::Linux => Kernel::Other,
        Kernel::Other => Kernel::Linux,
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let marker = dir.path().join("ran");
    let policy = SandboxPolicy {
        writable: vec![dir.path().to_path_buf()],
        readable: Vec::new(),
        plan: SandboxPlan::decide(&Probe::nothing(other), false),
        limits: Limits::default(),
    };
    let script = format!("touch '{}'", marker.display());
    let args = supervise_args("sh", &["-c".to_owned(), script], &policy).expect("arguments");
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin!("upkeep"))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("upkeep starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(126), "{stderr}");
    assert!(stderr.contains("planned for"), "{stderr}");
    assert!(!marker.exists(), "the program ran");
}

#[test]
fn a_repository_cannot_set_limits() {
    let repo = TestRepo::with_files(&[(".upkeep.toml", "[limits]\nprocesses = 100000\n")]);
    let out = run_local(&repo, &Script::new(&[finish("no_tasks")]), &["--task", "t"]);
    out.assert_code(2);
    assert!(out.stderr.contains("`limits`"), "{}", out.stderr);
}

#[test]
fn memory_file_size_and_cpu_time_are_limited() {
    let upkeep = Upkeep::new();
    let config = operator_config(&upkeep, "[limits]\nmemory_mb = 64\nfile_size_mb = 1\ncpu_seconds = 1\n");
    let allocate = "perl -e '$x = \"a\" x (200 * 1024 * 1024); print \"allocated\\n\"'";
    let write = "head -c 3000000 /dev/zero > big; wc -c < big; rm big";
    let spin = "while :; do :; done";
    let out = run_commands(
        upkeep,
        &[allocate, write, spin],
        &["--config", &config, "--shell-timeout", "30"],
    );
    out.assert_code(0);
    let results = outputs(&out);
    assert!(!results[0].contains("allocated"), "{}", results[0]);
    assert!(results[1].lines().any(|line| line == "1048576"), "{}", results[1]);
    assert!(
        results[2].contains("SIGXCPU") || results[2].contains("SIGKILL"),
        "{}",
        results[2]
    );
    assert!(!results[2].contains("timed out"), "{}", results[2]);
}

/// The default limits must not get in the way of real toolchains: V8 reserves far more
/// address space than it uses, and rustc is memory-hungry.
#[test]
fn node_and_rustc_work_under_the_default_limits() {
    let sysroot = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    let rustc = format!("{sysroot}/bin/rustc");
    let compile = format!(
        "printf 'fn main() {{ println!(\"rustc ok\"); }}\\n' > hello.rs && {rustc} hello.rs -o hello && ./hello && rm hello hello.rs"
    );
    let node = "node -e 'const kept = []; for (let i = 0; i < 256; i++) kept.push(Buffer.alloc(1 << 20, 1)); console.log(\"node ok\", kept.length)'";
    let mut commands = vec![compile.as_str()];
    let has_node = std::process::Command::new("node").arg("--version").output().is_ok();
    if has_node {
        commands.push(node);
    } else {
        skip("node is not installed; only rustc is tried");
    }
    // Commands read the toolchains of the operator's environment: the test's HOME is its own,
    // so rustup's home is named, as an operator whose toolchains live elsewhere would.
    let rustup_home = std::path::Path::new(&sysroot)
        .ancestors()
        .nth(2)
        .map(std::path::Path::to_owned)
        .unwrap_or_default();
    let upkeep = Upkeep::new().env("RUSTUP_HOME", &rustup_home);
    let out = run_commands(upkeep, &commands, &["--shell-timeout", "300"]);
    out.assert_code(0);
    let results = outputs(&out);
    assert!(results[0].starts_with("rustc ok\n"), "{}", results[0]);
    if has_node {
        assert!(results[1].starts_with("node ok 256\n"), "{}", results[1]);
    }
}

/// A command cannot take upkeep (or its own supervisor) down with it.
#[test]
fn commands_cannot_signal_upkeep() {
    // The patterns do not match the script's own text, which is in its shell's command line.
    let kill_upkeep = "for p in /proc/[0-9]*; do \
                         if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q -e '-[-]replay' -e '__sandbox-exec[ ]supervise'; then \
                           kill -9 ${p#/proc/} && echo \"killed ${p#/proc/}\"; \
                         fi; \
                       done 2>&1; echo tried";
    let out = run_commands(Upkeep::new(), &[kill_upkeep], &[]);
    out.assert_code(0);
    let result = &outputs(&out)[0];
    assert!(result.contains("tried"), "{result}");
    assert!(!result.contains("killed"), "{result}");
    assert_eq!(out.events_of("run_finished").len(), 1, "upkeep finished its run");
}
