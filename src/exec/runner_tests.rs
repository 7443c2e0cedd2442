use super::*;
use crate::exec::env::{BASE_ENVIRONMENT, allowlisted_environment};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec(program: &str, args: &[&str]) -> CommandSpec {
    CommandSpec {
        program: program.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        cwd: std::env::temp_dir(),
        env: allowlisted_environment(&[]),
        upkeep_env: Vec::new(),
        timeout: Duration::from_secs(30),
        output_cap: DEFAULT_OUTPUT_CAP,
        sandbox: None,
    }
}

fn sh(script: &str) -> CommandSpec {
    spec("sh", &["-c", script])
}

async fn run_it(spec: &CommandSpec) -> io::Result<CommandOutput> {
    run(spec, &CancellationToken::new()).await
}

/// Killed members are zombies until their parent reaps them. Orphans go to init, which in some
/// containers never reaps, and a zombie still counts as a group member for killpg; the test
/// process becomes their reaper so the runner's reaping applies (Linux).
#[cfg(target_os = "linux")]
fn become_the_orphans_reaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Elsewhere orphans go to launchd (or init), which reaps them.
#[cfg(not(target_os = "linux"))]
fn become_the_orphans_reaper() -> nix::Result<()> {
    Ok(())
}

/// Waits until no process of the group exists any more.
async fn group_is_gone(pgid: Pid) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if killpg(pgid, None) == Err(Errno::ESRCH) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until no live (non-zombie) process of the group exists, reading `/proc`. For when
/// no one is bound to reap the killed members promptly.
async fn group_is_dead(pgid: Pid) -> Result<bool, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut alive = false;
        for entry in std::fs::read_dir("/proc")? {
            let Ok(stat) = std::fs::read_to_string(entry?.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid pgrp ...": comm may hold anything, so split after it.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if let [state, _ppid, pgrp, ..] = fields.as_slice() {
                if *pgrp == pgid.as_raw().to_string() && *state != "Z" && *state != "X" {
                    alive = true;
                }
            }
        }
        if !alive {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn first_line_pid(output: &str) -> Result<Pid, Box<dyn std::error::Error>> {
    let line = output.lines().next().ok_or("no output")?;
    Ok(Pid::from_raw(line.trim().parse()?))
}

#[tokio::test]
async fn echo_output_and_exit_status() -> TestResult {
    let out = run_it(&spec("echo", &["hello", "world"])).await?;
    assert_eq!(out.output, "hello world\n");
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out && !out.interrupted);
    assert_eq!(out.render(), "hello world\nexit status: 0");

    let out = run_it(&sh("echo failing; exit 3")).await?;
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.render(), "failing\nexit status: 3");
    Ok(())
}

#[tokio::test]
async fn stdout_and_stderr_are_interleaved_in_order() -> TestResult {
    let out = run_it(&sh("echo one; echo two >&2; echo three; echo four >&2")).await?;
    assert_eq!(out.output, "one\ntwo\nthree\nfour\n");
    Ok(())
}

#[tokio::test]
async fn killed_by_signal_is_reported() -> TestResult {
    let out = run_it(&sh("kill -TERM $$")).await?;
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(15));
    assert_eq!(out.render(), "(no output)\nkilled by signal 15 (SIGTERM)");
    Ok(())
}

#[tokio::test]
async fn stdin_is_closed() -> TestResult {
    let started = Instant::now();
    let out = run_it(&spec("cat", &[])).await?;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.output, "");
    let out = run_it(&sh("read line; echo read=$?")).await?;
    assert_eq!(out.output, "read=1\n");
    Ok(())
}

#[tokio::test]
async fn missing_program_is_an_error() {
    let result = run_it(&spec("upkeep-no-such-program-xyz", &[])).await;
    assert!(result.is_err());
}

#[tokio::test]
async fn output_over_the_cap_keeps_head_and_tail() -> TestResult {
    let mut long = spec("seq", &["1", "20000"]);
    long.output_cap = 1000;
    let out = run_it(&long).await?;
    let full: String = (1..=20000).map(|n| format!("{n}\n")).collect();
    assert_eq!(out.omitted_bytes, full.len() - 1000);
    let notice = format!("\n[... {} bytes omitted ...]\n", full.len() - 1000);
    let (head, tail) = out.output.split_once(&notice).ok_or("no notice")?;
    assert_eq!(head.len() + 1, 500, "the head ends with a line break it had");
    assert!(full.starts_with(head));
    assert_eq!(tail.len(), 500);
    assert!(full.ends_with(tail));
    assert!(tail.ends_with("19999\n20000\n"));
    assert!(out.render().ends_with("20000\nexit status: 0"));
    Ok(())
}

#[tokio::test]
async fn binary_output_is_decoded_lossily() -> TestResult {
    let out = run_it(&sh("head -c 1000 /dev/urandom")).await?;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.omitted_bytes, 0);
    assert!(!out.output.is_empty());

    let out = run_it(&sh(r"printf 'ok\377\376done'")).await?;
    assert_eq!(out.output, "ok\u{FFFD}\u{FFFD}done");
    Ok(())
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() -> TestResult {
    become_the_orphans_reaper()?;
    let mut slow = sh("echo $$; sleep 100 & sleep 100");
    slow.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let out = run_it(&slow).await?;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.timed_out);
    assert!(!out.interrupted);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(9));
    assert!(
        out.render()
            .ends_with("timed out after 1s; the command and its child processes were killed"),
        "{}",
        out.render()
    );
    let pgid = first_line_pid(&out.output)?;
    assert!(group_is_gone(pgid).await, "group {pgid} survived");
    Ok(())
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() -> TestResult {
    become_the_orphans_reaper()?;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let out = run(&sh("echo $$; sleep 100 & sleep 100"), &cancel).await?;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.interrupted);
    assert!(!out.timed_out);
    assert!(
        out.render()
            .ends_with("interrupted; the command and its child processes were killed")
    );
    let pgid = first_line_pid(&out.output)?;
    assert!(group_is_gone(pgid).await, "group {pgid} survived");
    Ok(())
}

#[tokio::test]
async fn background_jobs_do_not_outlive_the_command() -> TestResult {
    become_the_orphans_reaper()?;
    let started = Instant::now();
    // The background sleep keeps the output pipe open after the shell exits.
    let out = run_it(&sh("echo $$; sleep 100 & echo done")).await?;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, Some(0));
    assert!(out.output.ends_with("done\n"));
    let pgid = first_line_pid(&out.output)?;
    assert!(group_is_gone(pgid).await, "group {pgid} survived");
    Ok(())
}

#[tokio::test]
async fn a_process_that_left_the_group_does_not_hang_the_reader() -> TestResult {
    let started = Instant::now();
    // `setsid` puts the sleep out of the group's reach, still holding the pipe; it prints
    // its pid so the test can clean up after itself.
    let out = run_it(&sh("setsid sh -c 'echo $$; exec sleep 30' & sleep 0.5; echo done")).await?;
    let elapsed = started.elapsed();
    let escaped = first_line_pid(&out.output)?;
    let _ = nix::sys::signal::kill(escaped, Signal::SIGKILL);
    // The reader waited out the grace period for the escaped writer, and no longer.
    assert!(elapsed >= DRAIN_GRACE, "{elapsed:?}");
    assert!(elapsed < DRAIN_GRACE + Duration::from_secs(3), "{elapsed:?}");
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, Some(0));
    assert!(out.output.ends_with("\ndone\n"), "{}", out.output);
    Ok(())
}

#[tokio::test]
async fn dropping_the_run_kills_the_group() -> TestResult {
    let dir = tempfile::tempdir()?;
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > '{}'; sleep 100 & sleep 100", pid_file.display());
    let command = sh(&script);
    let cancel = CancellationToken::new();
    let result = tokio::time::timeout(Duration::from_millis(500), run(&command, &cancel)).await;
    assert!(result.is_err(), "the command should still have been running");
    let pgid = Pid::from_raw(std::fs::read_to_string(&pid_file)?.trim().parse()?);
    // Nothing reaps here: the runner that would is gone. Killed is what counts.
    assert!(group_is_dead(pgid).await?, "group {pgid} survived");
    Ok(())
}

/// The environment of the test process cannot be changed without `unsafe` in edition 2024,
/// so the test runs itself again as a child process whose environment holds a fake token,
/// and does the real check there.
#[tokio::test]
async fn commands_see_only_allowlisted_variables() -> TestResult {
    const CHILD_MARK: &str = "UPKEEP_EXEC_ENV_TEST_CHILD";
    const TEST_NAME: &str = "commands_see_only_allowlisted_variables";
    if std::env::var_os(CHILD_MARK).is_none() {
        let fake = format!("ghp_upkeepFakeToken{}x", std::process::id());
        let out = tokio::process::Command::new(std::env::current_exe()?)
            .args([TEST_NAME, "--test-threads=1", "--nocapture"])
            .env(CHILD_MARK, "1")
            .env("GITHUB_TOKEN", &fake)
            .env("UPKEEP_FAKE_API_KEY", &fake)
            .env("UPKEEP_EXEC_PASSED", "passed-through")
            .env("UPKEEP_EXEC_NOT_PASSED", "left-behind")
            .output()
            .await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("1 passed"), "the child ran no test: {stdout}");
        return Ok(());
    }

    let fake = std::env::var("GITHUB_TOKEN")?;
    let env = allowlisted_environment(&[
        "GITHUB_TOKEN".into(),
        "UPKEEP_FAKE_API_KEY".into(),
        "UPKEEP_EXEC_PASSED".into(),
    ]);
    let mut command = spec("env", &[]);
    command.env = env;
    let out = run_it(&command).await?;
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.output.contains("GITHUB_TOKEN"), "{}", out.output);
    assert!(!out.output.contains(&fake), "{}", out.output);
    assert!(!out.output.contains("UPKEEP_EXEC_NOT_PASSED"));
    assert!(out.output.contains("UPKEEP_EXEC_PASSED=passed-through\n"));
    for line in out.output.lines() {
        let name = line.split('=').next().unwrap_or_default();
        assert!(
            BASE_ENVIRONMENT.contains(&name) || name == "UPKEEP_EXEC_PASSED",
            "unexpected variable {name}"
        );
    }
    Ok(())
}

/// Variables upkeep supplies (the clone's GIT_DIR) come last, so neither the allowlist nor a
/// declared tool's `env` can override them.
#[tokio::test]
async fn upkeep_supplied_variables_win() -> TestResult {
    let mut command = sh("echo $GIT_DIR");
    command.env.push(("GIT_DIR".into(), "/from/a/declaration".into()));
    command.upkeep_env.push(("GIT_DIR".into(), "/from/upkeep".into()));
    let out = run_it(&command).await?;
    assert_eq!(out.output, "/from/upkeep\n");
    Ok(())
}
