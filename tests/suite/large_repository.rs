//! An interrupt while a file tool works through a repository of 100,000 files: the work stops
//! at the interrupt, between two files, instead of running to its end first; the run exits
//! 130 and removes its clone.
//!
//! The repository is made with `git fast-import` (one empty blob under 100,000 paths), so
//! building it takes a second or two. Empty files keep the clone's checkout and removal cheap:
//! what the test needs is the number of files the search opens, not their size.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::support::model_api::openai_sequence;
use super::support::{TestRepo, Upkeep, finish, git, reply, signal_and_wait};

/// Files in the repository, 100 to a folder.
const FILES: usize = 100_000;

/// How long the test waits for an event before it gives up: only a guard against a hang (the
/// clone of 100,000 files alone takes a while on a slow disk).
const HANG_GUARD: Duration = Duration::from_secs(600);

/// A repository whose last commit adds `files` empty files, `dNNN/fNNNNNN.txt`, 100 to a
/// folder, to a README. Its own work tree is not checked out: upkeep clones the commit.
fn repository_of_empty_files(files: usize) -> TestRepo {
    let repo = TestRepo::with_files(&[("README.md", "# Many files\n")]);
    let mut stream = String::from("blob\nmark :1\ndata 0\n\n");
    stream.push_str("commit refs/heads/main\ncommitter T <t@example.com> 0 +0000\ndata 6\nfiles\n");
    stream.push_str("from refs/heads/main^0\n");
    for n in 0..files {
        stream.push_str(&format!("M 100644 :1 d{:03}/f{n:06}.txt\n", n / 100));
    }
    let mut child = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["fast-import", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("git fast-import");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream.as_bytes())
        .expect("stream");
    assert!(child.wait().expect("fast-import").success());
    assert_eq!(
        git(repo.path(), &["ls-tree", "-r", "--name-only", "main"])
            .lines()
            .count(),
        files + 1
    );
    repo
}

/// Each JSON event upkeep writes to its standard output, as it writes it.
fn events_as_written(stdout: std::process::ChildStdout) -> mpsc::Receiver<Value> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if sender.send(event).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Waits for the first event of type `kind`, returning it and the events before it.
async fn wait_for_event(events: mpsc::Receiver<Value>, kind: &'static str) -> (Vec<Value>, mpsc::Receiver<Value>) {
    tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        loop {
            let event = events
                .recv_timeout(HANG_GUARD)
                .unwrap_or_else(|_| panic!("no {kind} event; saw {seen:?}"));
            if event["type"] == kind {
                seen.push(event);
                return (seen, events);
            }
            seen.push(event);
        }
    })
    .await
    .expect("joined")
}

/// Fails on code that runs the search on the async thread that also watches the interrupt: the
/// search of 50,000 files (`search_files` reads at most that many) runs to its end after the
/// signal, and its result is reported, before the run notices the interrupt.
///
/// No timing is asserted: after the interrupt, the run reports what was left unsaved and removes
/// a clone of 100,000 files, which the disk decides the duration of and which dwarfs the search
/// on a slow one. What shows that the interrupt took effect at once is the outcome: the search
/// that was under way never reports a result.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_during_a_search_of_100k_files_stops_it_exits_130_and_removes_the_clone() {
    let repo = repository_of_empty_files(FILES);
    let server = openai_sequence(&[
        reply(
            "look for it",
            &[("search_files", json!({"pattern": "text that no file holds"}))],
        ),
        finish("no_tasks"),
    ])
    .await;
    let mut upkeep = Upkeep::new()
        .args(["run", "--json", "--provider", "openai", "--base-url"])
        .args([format!("{}/v1", server.uri())])
        .args(["--task", "find the text"])
        .args(["--repo"])
        .args([repo.path()]);
    let mut child = upkeep.spawn();
    let events = events_as_written(child.stdout.take().expect("stdout"));
    let (_, events) = wait_for_event(events, "tool_call").await;
    assert_eq!(
        super::support::model_api::model_requests(&server).await.len(),
        1,
        "the reply that calls search_files was answered"
    );
    assert_eq!(upkeep.leftover_temp_entries(), 1, "the clone is on disk");
    // The event comes just before the call starts: a moment later the search is under way (it
    // opens 50,000 files, which takes far longer than this).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let output = tokio::time::timeout(HANG_GUARD, signal_and_wait(child, nix::sys::signal::Signal::SIGINT))
        .await
        .expect("upkeep ended after the interrupt");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "stderr: {stderr}");
    let after: Vec<Value> = events.into_iter().collect();
    assert!(
        !after.iter().any(|event| event["type"] == "tool_result"),
        "the search ran to its end after the interrupt: {after:?}"
    );
    let finished = after
        .iter()
        .find(|event| event["type"] == "run_finished")
        .unwrap_or_else(|| panic!("run_finished emitted: {after:?}"));
    assert_eq!(finished["exit_code"], 130);
    assert_eq!(super::support::model_api::model_requests(&server).await.len(), 1);
    assert_eq!(
        upkeep.leftover_temp_entries(),
        0,
        "the clone was removed; stderr: {stderr}"
    );
}
