//! The sandbox on machines more restricted than the one the tests run on, simulated for real by
//! `examples/restricted_machine.rs`: the kernel refuses what such a machine refuses (seccomp
//! filters on `unshare`/`clone` and on Landlock's calls) and the user id is really dropped. None
//! of these tests depends on this machine lacking anything, so none of them skips.
//!
//! - A GitHub-hosted Ubuntu 24.04 runner: a normal user, user namespaces refused.
//! - An older or stripped kernel: the same, without Landlock.

use serde_json::json;

use super::sandbox::{outputs, sandbox_of};
use super::support::{RunOutput, Script, TestRepo, Upkeep, finish, give_to, reply, run_replay, user_of};

/// A runner's normal user (`nobody` here) on a kernel that refuses it user namespaces.
const RUNNER: &[&str] = &["--user", "65534", "--no-user-namespaces"];
/// The same on a kernel without Landlock.
const RUNNER_WITHOUT_LANDLOCK: &[&str] = &["--user", "65534", "--no-user-namespaces", "--no-landlock"];

/// UDP to a DNS server's port on loopback: no reply is needed to show whether the socket opened.
const UDP: &str = "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1:53\", Proto => \"udp\") \
     or die \"udp-refused: $!\\n\"; print \"udp-open\\n\"'";

fn tcp_to(port: u16) -> String {
    format!(
        "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\", Timeout => 5) \
         or die \"tcp-refused: $!\\n\"; print \"tcp-open\\n\"'"
    )
}

/// A write outside the clone, in the machine's temporary directory that any user may write.
const WRITE_OUTSIDE: &str = "bash -c 'echo x > /tmp/upkeep-restricted-$$ && rm -f /tmp/upkeep-restricted-$$ && echo wrote-outside || echo write-refused'";

/// Runs `commands` one per turn with `--allow-dangerous-tools` on a machine with `restrictions`.
fn run_on(restrictions: &[&str], commands: &[&str], extra: &[&str]) -> RunOutput {
    let repo = TestRepo::new();
    if let Some(uid) = user_of(restrictions) {
        give_to(repo.path(), uid);
    }
    let mut replies: Vec<String> = commands
        .iter()
        .map(|command| reply("run", &[("run_shell_command", json!({"command": command}))]))
        .collect();
    replies.push(finish("no_tasks"));
    let script = Script::new(&replies);
    if let Some(uid) = user_of(restrictions) {
        give_to(&script.path(), uid);
    }
    let mut flags = vec!["--task", "t", "--allow-dangerous-tools"];
    flags.extend_from_slice(extra);
    run_replay(Upkeep::on_restricted_machine(restrictions), &repo, &script, &flags)
}

/// On a GitHub-hosted runner no network namespace can be made, and Landlock's TCP rules alone
/// left UDP, and so DNS, open to every command. A seccomp filter now refuses internet sockets,
/// TCP and UDP alike, with the TCP rules behind it; `--allow-network` lifts both; writes
/// outside the clone stay refused; `--require-sandbox` accepts the plan.
#[test]
fn on_a_runner_without_user_namespaces_commands_get_no_udp_no_tcp_and_no_writes_outside() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = listener.local_addr().expect("address").port();
    let tcp = tcp_to(port);
    let out = run_on(RUNNER, &[UDP, &tcp, WRITE_OUTSIDE, "id -u"], &["--require-sandbox"]);
    out.assert_code(0);
    let sandbox = sandbox_of(&out);
    assert_eq!(sandbox["network"], "seccomp-and-landlock-tcp", "{sandbox}");
    assert_eq!(sandbox["filesystem"], "landlock", "{sandbox}");
    assert_eq!(sandbox["cleanup"], "subreaper", "{sandbox}");
    // No mount namespace without a user namespace: the report says commands see the host's /proc.
    assert_eq!(sandbox["proc"], "host", "{sandbox}");
    assert_eq!(
        sandbox["limits"]["processes_enforced_by"], "rlimit-per-user",
        "{sandbox}"
    );
    let results = outputs(&out);
    assert!(results[0].contains("udp-refused"), "UDP: {}", results[0]);
    assert!(results[1].contains("tcp-refused"), "TCP: {}", results[1]);
    assert!(results[2].contains("write-refused"), "write outside: {}", results[2]);
    assert!(results[3].contains("65534"), "ran as the runner's user: {}", results[3]);

    let allowed = run_on(RUNNER, &[UDP, &tcp], &["--allow-network"]);
    allowed.assert_code(0);
    assert_eq!(sandbox_of(&allowed)["network"], "allowed");
    let results = outputs(&allowed);
    assert!(
        results[0].contains("udp-open"),
        "UDP with --allow-network: {}",
        results[0]
    );
    assert!(
        results[1].contains("tcp-open"),
        "TCP with --allow-network: {}",
        results[1]
    );
}

/// A kernel without Landlock: the network is still refused by the seccomp filter alone, the
/// report says the filesystem is not confined, and `--require-sandbox` refuses to start (exit
/// 2) naming what is missing.
#[test]
fn without_landlock_the_report_says_so_and_require_sandbox_refuses() {
    let out = run_on(RUNNER_WITHOUT_LANDLOCK, &[UDP], &[]);
    out.assert_code(0);
    let sandbox = sandbox_of(&out);
    assert_eq!(sandbox["network"], "seccomp", "{sandbox}");
    assert_eq!(sandbox["filesystem"], "none", "{sandbox}");
    assert!(outputs(&out)[0].contains("udp-refused"), "{}", outputs(&out)[0]);

    let refused = run_on(RUNNER_WITHOUT_LANDLOCK, &[UDP], &["--require-sandbox"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("filesystem confinement"), "{}", refused.stderr);
    assert!(outputs(&refused).is_empty(), "no command ran");
}

/// Whether a live (not zombie) process runs `sleep SECONDS`.
fn sleeping(seconds: &str) -> bool {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        !zombie && cmdline == wanted.as_bytes()
    })
}

/// Without a PID namespace, a process that left the command's session must still be ended with
/// the command: the supervisor is a subreaper and kills every descendant it adopts.
#[test]
fn on_a_runner_a_process_that_left_the_session_is_ended_with_the_command() {
    let out = run_on(
        RUNNER,
        &["setsid sh -c 'sleep 4321' > /dev/null 2>&1 < /dev/null & echo started"],
        &[],
    );
    out.assert_code(0);
    assert_eq!(sandbox_of(&out)["cleanup"], "subreaper");
    assert!(outputs(&out)[0].contains("started"), "{}", outputs(&out)[0]);
    assert!(!sleeping("4321"), "the detached process was left running");
}
