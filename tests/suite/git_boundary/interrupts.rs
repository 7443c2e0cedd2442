//! A server that stalls mid-push or mid-fetch, and interrupts in the middle of a large clone:
//! the run ends with the right exit code within its timeout and leaves no clone behind.

use std::process::Child;
use std::time::{Duration, Instant};

use super::super::git_proxy::{Behaviour, GitProxy};
use super::super::support::{Script, TestRepo, Upkeep};
use super::{Hub, propose};

/// A repository of `files` files of `size` incompressible bytes each, made with fast-import.
fn large_repository(files: usize, size: usize) -> TestRepo {
    let repo = TestRepo::new();
    let mut stream = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    stream.extend_from_slice(
        b"commit refs/heads/main\ncommitter T <t@example.com> 0 +0000\ndata 5\nlarge\nfrom refs/heads/main^0\n",
    );
    for n in 0..files {
        let mut content = Vec::with_capacity(size);
        while content.len() < size {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            content.extend_from_slice(&state.to_le_bytes());
        }
        stream.extend_from_slice(format!("M 100644 inline data/{n}.bin\ndata {size}\n").as_bytes());
        stream.extend_from_slice(&content[..size]);
        stream.push(b'\n');
    }
    let mut child = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["fast-import", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("git fast-import");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(&stream).expect("stream");
    assert!(child.wait().expect("fast-import").success());
    repo.git(&["reset", "-q", "--hard", "main"]);
    repo
}

fn signal(child: &Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT sent");
}

/// Waits for the child, killing it (and failing) after `limit`.
async fn wait_at_most(mut child: Child, limit: Duration) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let waited = tokio::task::spawn_blocking(move || {
        while started.elapsed() < limit {
            if let Ok(Some(_)) = child.try_wait() {
                let output = child.wait_with_output().expect("output");
                return Some(output);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    })
    .await
    .expect("joined");
    let output = waited.unwrap_or_else(|| panic!("upkeep was still running after {limit:?}"));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr, started.elapsed())
}

/// Waits until upkeep has created its clone's directory.
async fn wait_for_clone_dir(upkeep: &Upkeep) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while upkeep.leftover_temp_entries() == 0 {
        assert!(Instant::now() < deadline, "upkeep never started its clone");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts `upkeep run` (the proposing script) against the hub through `proxy`.
/// The script is returned to be kept until upkeep ends.
fn spawn_through(hub: &Hub, proxy: &GitProxy, extra: &[&str], env: &[(&str, &str)]) -> (Upkeep, Child, Script) {
    let script = propose(&[]);
    let mut upkeep = hub.upkeep(&proxy.url(), extra).args(["--replay"]).args([script.path()]);
    for (name, value) in env {
        upkeep = upkeep.env(name, value);
    }
    let child = upkeep.spawn();
    (upkeep, child, script)
}

/// Waits for an interrupted upkeep: exit 130 within a few seconds, nothing left in its TMPDIR.
async fn assert_interrupted(upkeep: &Upkeep, child: Child) -> String {
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(20)).await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(upkeep.leftover_temp_entries(), 0, "{stderr}");
    stderr
}

/// Waits until the proxy has stalled a connection.
async fn wait_for_stall(proxy: &GitProxy) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.stalls() == 0 {
        assert!(Instant::now() < deadline, "git never reached the stalling server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Fails on code whose HTTP reads cannot be interrupted: the clone stays blocked on the silent
/// server, and the process exits (or hangs) with the partial clone on disk.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_while_the_server_stalls_mid_clone_exits_130_and_removes_the_clone() {
    let hub = Hub::start(None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-upload-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_stall(&proxy).await;
    assert_eq!(upkeep.leftover_temp_entries(), 1, "the partial clone is on disk");
    signal(&child);
    let stderr = assert_interrupted(&upkeep, child).await;
    assert!(stderr.contains("the temporary clone was removed"), "{stderr}");
}

/// Fails on code that exits on the second interrupt without removing the clone in progress: the
/// server goes silent in the middle of the pack, so git work that only notices an interrupt
/// when data arrives never ends by itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_double_interrupt_during_a_large_clone_exits_130_and_leaves_no_directory() {
    let origin = large_repository(400, 64 * 1024);
    let hub = Hub::serving(&origin, None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::StallAfter(4 << 20));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_stall(&proxy).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(upkeep.leftover_temp_entries(), 1, "the partial clone is on disk");
    signal(&child);
    tokio::time::sleep(Duration::from_millis(30)).await;
    signal(&child);
    assert_interrupted(&upkeep, child).await;
    assert_eq!(hub.branches(), "");
}

/// The same large clone, one interrupt: the clone stops mid-transfer and is removed.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_during_a_large_clone_exits_130_and_removes_the_clone() {
    let origin = large_repository(400, 64 * 1024);
    let hub = Hub::serving(&origin, None).await;
    // 25 MiB at 2 MiB/s: the clone is still downloading when the interrupt comes.
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Throttle(2 << 20));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[]);
    wait_for_clone_dir(&upkeep).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(&child);
    let stderr = assert_interrupted(&upkeep, child).await;
    assert!(stderr.contains("the temporary clone was removed"), "{stderr}");
}

/// `--timeout` is a budget (exit 4), also when it runs out while a push waits on a silent
/// server. Fails on code whose push cannot be interrupted: the run never ends.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_during_a_stalled_push_ends_the_run_with_exit_4() {
    let hub = Hub::start(Some("tok-stall-push")).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-receive-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &["--timeout", "3s"], &[]);
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(30)).await;
    assert_eq!(code, Some(4), "{stderr}");
    assert!(proxy.stalls() >= 1, "the push reached the stalling server");
    assert!(took < Duration::from_secs(9), "took {took:?}");
    assert!(stderr.contains("--timeout"), "{stderr}");
    assert_eq!(upkeep.leftover_temp_entries(), 0);
    assert_eq!(hub.pull_requests_opened().await, 0, "nothing opened");
}

/// Without `--timeout`, a fetch the server stops answering fails after the stall timeout
/// (exit 1) with a message that says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_fetch_fails_after_the_stall_timeout() {
    let hub = Hub::start(None).await;
    let proxy = GitProxy::start(&hub.server.url(), Behaviour::Stall("git-upload-pack"));
    let (upkeep, child, _script) = spawn_through(&hub, &proxy, &[], &[("UPKEEP_GIT_STALL_TIMEOUT", "2")]);
    let (code, stderr, took) = wait_at_most(child, Duration::from_secs(30)).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("stalled") && stderr.contains("2 s"), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(upkeep.leftover_temp_entries(), 0);
}

/// A malformed stall timeout is a usage error before any work.
#[test]
fn a_bad_stall_timeout_is_a_usage_error() {
    let repo = TestRepo::new();
    let script = propose(&[]);
    let out = super::super::support::run_replay(
        Upkeep::new().env("UPKEEP_GIT_STALL_TIMEOUT", "soon"),
        &repo,
        &script,
        &[],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("--git-stall-timeout"), "{}", out.stderr);
}
