//! The interrupt row: Ctrl-C while `search_files` works through the 100k-file repository.
//!
//! The real binary runs a replay script whose first reply calls `search_files` for a text no
//! file holds (so the search opens every file it may); the moment the `tool_call` event for it
//! is on stdout, SIGINT is sent. Measured (medians of the runs): the time from the signal to
//! the process's exit, and, apart, the time removing a clone of the same repository takes
//! (`Workspace` dropped), which the run pays before it exits because it promises to leave no
//! clone behind. upkeep's own part is the difference: stopping the search between two files,
//! reporting what the clone holds that no pull request carries, and winding down.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::measure::median;
use crate::measurements::{serve_copy, upkeep_clone};
use crate::repo::Size;

/// What the interrupt row measured.
pub struct InterruptResult {
    pub name: &'static str,
    pub files: usize,
    /// From SIGINT to the process's exit.
    pub to_exit: Duration,
    /// Removing a clone of the repository.
    pub removal: Duration,
    /// Runs in which the search was still under way when the signal came (no `tool_result`).
    pub interrupted_searches: usize,
    pub runs: usize,
}

/// A script whose first reply searches every file and whose second finishes.
fn search_script(dir: &std::path::Path) -> PathBuf {
    let search = serde_json::json!({"plan": "look for it", "tool_calls": [
        {"tool_name": "search_files", "arguments": {"pattern": "text that no file holds"}}
    ]});
    let finish = serde_json::json!({"plan": "done", "tool_calls": [
        {"tool_name": "finish", "arguments": {"status": "no_tasks", "summary": "benchmark"}}
    ]});
    let path = dir.join("search.jsonl");
    let lines = format!(
        "{}\n{}\n",
        serde_json::json!({"content": search.to_string()}),
        serde_json::json!({"content": finish.to_string()})
    );
    std::fs::write(&path, lines).expect("write the script");
    path
}

pub fn bench_interrupt(size: &'static Size, cached: &std::path::Path, runs: usize) -> InterruptResult {
    let served = tempfile::tempdir().expect("tempdir for the served copy");
    let (_server, _bare, url) = serve_copy(size, cached, served.path());
    let script_dir = tempfile::tempdir().expect("tempdir for the script");
    let script = search_script(script_dir.path());

    eprintln!("[{}] interrupt during a search x{runs}", size.name);
    let mut to_exit = Vec::new();
    let mut removal = Vec::new();
    let mut interrupted_searches = 0;
    for _ in 0..runs {
        let (elapsed, interrupted) = interrupt_once(&url, &script);
        to_exit.push(elapsed);
        interrupted_searches += usize::from(interrupted);
        let workspace = upkeep_clone(&url);
        let started = Instant::now();
        drop(workspace);
        removal.push(started.elapsed());
    }
    InterruptResult {
        name: size.name,
        files: size.files,
        to_exit: median(to_exit),
        removal: median(removal),
        interrupted_searches,
        runs,
    }
}

/// One run interrupted as its search starts: the time from the signal to the exit, and
/// whether the search was still under way (no `tool_result` came before the signal).
fn interrupt_once(url: &str, script: &std::path::Path) -> (Duration, bool) {
    let home = tempfile::tempdir().expect("tempdir for HOME and TMPDIR");
    let mut child = Command::new(env!("CARGO_BIN_EXE_upkeep"))
        .args(["run", "--json", "--task", "benchmark", "--repo", url, "--replay"])
        .arg(script)
        .args(["--max-turns", "3"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start upkeep");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, events) = mpsc::channel::<serde_json::Value>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(event) = serde_json::from_str(&line) {
                if sender.send(event).is_err() {
                    return;
                }
            }
        }
    });
    loop {
        let event = events
            .recv_timeout(Duration::from_secs(600))
            .expect("a tool_call for search_files before the run ended");
        if event["type"] == "tool_call" && event["tool"] == "search_files" {
            break;
        }
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    let signalled = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("signal sent");
    let status = child.wait().expect("wait for upkeep");
    let elapsed = signalled.elapsed();
    reader.join().expect("stdout reader");
    assert_eq!(status.code(), Some(130), "an interrupted run exits 130");
    let searched_to_the_end = events
        .try_iter()
        .any(|event| event["type"] == "tool_result" && event["tool"] == "search_files");
    (elapsed, !searched_to_the_end)
}
