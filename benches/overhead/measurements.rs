//! The measurements of one repository size: first clones, refresh rounds, the file tree and
//! whole runs of the binary, each timed against the git CLI doing the same work where there
//! is one; peak memory comes from the measuring wrapper in `support/measure.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use upkeep::agent::file_tree::{DEFAULT_TREE_BUDGET, FileTree};
use upkeep::repo::{CloneRequest, GitAuth, Identity, Stop, Workspace};

use crate::git::{git, git_command, path_str};
use crate::git_http::GitHttpServer;
use crate::measure::{MEASURE_CHILD, median};
use crate::repo::{Size, push_upstream_commit};

pub struct SizeResult {
    pub name: &'static str,
    pub files: usize,
    pub clone_upkeep: Duration,
    pub clone_git: Duration,
    /// Remote unchanged since the last cycle, then remote gained a commit: (upkeep, git, clean).
    pub refresh: [(Duration, Duration, Duration); 2],
    pub tree_bytes: usize,
    pub tree_shown: usize,
    pub tree_time: Duration,
    pub run_base: Duration,
    pub run_turns: Duration,
    /// From the run's own events: first to last `model_response`, divided by the turns between.
    pub per_turn: Duration,
    /// Peak resident set of upkeep over its runs, and of `git clone --depth 1` (its processes).
    pub peak_kib: u64,
    pub git_peak_kib: u64,
}

impl SizeResult {
    /// The same from wall-clock time: the run with `turns` turns minus the run with none (clone
    /// and prompt included in both), divided by the turns. Noisier: the clone's spread is in it.
    pub fn per_turn_by_difference(&self, turns: usize) -> Duration {
        self.run_turns.saturating_sub(self.run_base) / u32::try_from(turns).unwrap_or(u32::MAX)
    }
}

/// Serves a copy of `cached` (a local clone: a file copy) from under `root`, so that the
/// refresh's pushes leave the cache alone. Returns the server, the served bare repository and
/// its URL.
pub fn serve_copy(size: &Size, cached: &Path, root: &Path) -> (GitHttpServer, PathBuf, String) {
    let bare = root.join("bench").join(format!("{}.git", size.name));
    git(root, &["clone", "-q", "--bare", path_str(cached), path_str(&bare)]);
    let server = GitHttpServer::start(root, None);
    let url = format!("{}/bench/{}.git", server.url(), size.name);
    (server, bare, url)
}

pub fn bench_size(size: &Size, cached: &Path, runs: usize, turns: usize) -> SizeResult {
    let served = tempfile::tempdir().expect("tempdir for the served copy");
    let (server, bare, url) = serve_copy(size, cached, served.path());
    let scratch = tempfile::tempdir().expect("tempdir for git clones");

    eprintln!("[{}] first clone x{runs}", size.name);
    let mut clone_upkeep = Vec::new();
    let mut clone_git = Vec::new();
    for run in 0..runs {
        // Alternate who goes first, so neither always meets a warmer cache.
        for upkeep_turn in if run % 2 == 0 { [true, false] } else { [false, true] } {
            if upkeep_turn {
                let started = Instant::now();
                let workspace = upkeep_clone(&url);
                clone_upkeep.push(started.elapsed());
                drop(workspace);
            } else {
                let dir = scratch.path().join(format!("clone-{run}"));
                let started = Instant::now();
                git(scratch.path(), &["clone", "-q", "--depth", "1", &url, path_str(&dir)]);
                clone_git.push(started.elapsed());
                std::fs::remove_dir_all(&dir).expect("remove the git clone");
            }
        }
    }

    eprintln!("[{}] refresh x{runs} (remote unchanged, remote moved)", size.name);
    let mut workspace = upkeep_clone(&url);
    assert_eq!(
        workspace_git(&workspace, &["status", "--porcelain", "--ignored"]),
        "",
        "upkeep's clone is complete: every file on disk and in the index"
    );
    let git_clone = scratch.path().join("refreshed");
    git(
        scratch.path(),
        &["clone", "-q", "--depth", "1", &url, path_str(&git_clone)],
    );
    let mut unchanged = RefreshTimes::default();
    let mut moved = RefreshTimes::default();
    for run in 0..runs {
        refresh_round(&mut workspace, &git_clone, run, &mut unchanged);
        push_upstream_commit(&bare, size, run);
        refresh_round(&mut workspace, &git_clone, run, &mut moved);
    }

    eprintln!("[{}] file tree x{runs}", size.name);
    let mut tree_times = Vec::new();
    let files = workspace.files(&[]).expect("the clone opens");
    let mut tree = FileTree::scan(&files, DEFAULT_TREE_BUDGET);
    for _ in 0..runs {
        let started = Instant::now();
        tree = FileTree::scan(&files, DEFAULT_TREE_BUDGET);
        let rendered = tree.render();
        tree_times.push(started.elapsed());
        assert!(!rendered.is_empty());
    }
    let rendered = tree.render().to_owned();
    assert_eq!(tree.total, size.files + 3, "every file counted");
    drop(files);
    drop(workspace);

    eprintln!("[{}] whole runs of the binary x{runs} (0 and {turns} turns)", size.name);
    let none = Script::new(0);
    let many = Script::new(turns);
    let mut run_base = Vec::new();
    let mut run_turns = Vec::new();
    let mut turn_times = Vec::new();
    let mut peak_kib = 0;
    let mut git_peak_kib = 0;
    for run in 0..runs {
        let base = run_upkeep(&url, &none, turns);
        run_base.push(base.elapsed);
        let full = run_upkeep(&url, &many, turns);
        run_turns.push(full.elapsed);
        turn_times.push(full.per_turn);
        peak_kib = peak_kib.max(base.peak_kib).max(full.peak_kib);
        git_peak_kib = git_peak_kib.max(git_clone_peak_kib(scratch.path(), &url, run));
    }
    drop(server);

    SizeResult {
        name: size.name,
        files: size.files + 3,
        clone_upkeep: median(clone_upkeep),
        clone_git: median(clone_git),
        refresh: [unchanged, moved].map(|t| (median(t.upkeep), median(t.git), median(t.clean))),
        tree_bytes: rendered.len(),
        tree_shown: rendered.lines().count(),
        tree_time: median(tree_times),
        run_base: median(run_base),
        run_turns: median(run_turns),
        per_turn: median(turn_times),
        peak_kib,
        git_peak_kib,
    }
}

pub fn upkeep_clone(url: &str) -> Workspace {
    let request = CloneRequest::new(url, false);
    Workspace::clone_blocking(&request, &Stop::never()).expect("upkeep clone over HTTP")
}

/// git on upkeep's clone, whose git directory is outside the work tree.
fn workspace_git(workspace: &Workspace, args: &[&str]) -> String {
    let mut full = vec![
        "--git-dir",
        path_str(workspace.git_dir()),
        "--work-tree",
        path_str(workspace.root()),
    ];
    full.extend_from_slice(args);
    git(workspace.root(), &full)
}

#[derive(Default)]
struct RefreshTimes {
    upkeep: Vec<Duration>,
    git: Vec<Duration>,
    clean: Vec<Duration>,
}

/// Dirties both clones as a cycle does (the bot's commit included), then brings each back to
/// the remote's tip: upkeep's refresh against `git fetch --depth 1` plus `git reset --hard`,
/// with `git clean -fdx` (which upkeep's refresh also does) timed on its own.
fn refresh_round(workspace: &mut Workspace, git_clone: &Path, run: usize, times: &mut RefreshTimes) {
    dirty_like_a_cycle(workspace.root(), run);
    std::fs::write(workspace.scratch().join("scratch.txt"), "scratch").expect("write scratch");
    workspace
        .commit_blocking(
            &format!("upkeep/bench-{run}"),
            "bench",
            &Identity::default(),
            &upkeep::secrets::Redactor::default(),
        )
        .expect("commit on a bot branch");
    dirty_like_a_cycle(git_clone, run);
    git(git_clone, &["commit", "-q", "-a", "-m", "bench"]);

    let started = Instant::now();
    workspace
        .refresh_blocking(&GitAuth::default(), &Stop::never())
        .expect("refresh");
    times.upkeep.push(started.elapsed());

    let started = Instant::now();
    git(git_clone, &["fetch", "-q", "--depth", "1", "origin", "main"]);
    git(git_clone, &["reset", "-q", "--hard", "FETCH_HEAD"]);
    times.git.push(started.elapsed());
    let started = Instant::now();
    git(git_clone, &["clean", "-q", "-f", "-d", "-x"]);
    times.clean.push(started.elapsed());
    assert_eq!(
        workspace_git(workspace, &["rev-parse", "HEAD"]),
        git(git_clone, &["rev-parse", "HEAD"]),
        "both refreshed to the same tip"
    );
}

/// What a cycle leaves in a clone: an edited tracked file, an untracked file, an ignored file.
fn dirty_like_a_cycle(root: &Path, run: usize) {
    std::fs::write(root.join("README.md"), format!("edited in run {run}\n")).expect("edit README.md");
    std::fs::write(root.join(format!("untracked-{run}.txt")), "new\n").expect("write an untracked file");
    std::fs::create_dir_all(root.join("target")).expect("mkdir target");
    std::fs::write(root.join("target/build.log"), "ignored\n").expect("write an ignored file");
}

/// A replay script: `turns` replies that each read README.md, then `finish{no_tasks}`.
pub struct Script {
    dir: tempfile::TempDir,
}

impl Script {
    pub fn new(turns: usize) -> Self {
        let dir = tempfile::tempdir().expect("tempdir for the script");
        let read = serde_json::json!({"plan": "read", "tool_calls": [
            {"tool_name": "read_file", "arguments": {"path": "README.md"}}
        ]});
        let finish = serde_json::json!({"plan": "done", "tool_calls": [
            {"tool_name": "finish", "arguments": {"status": "no_tasks", "summary": "benchmark"}}
        ]});
        let mut lines = String::new();
        for _ in 0..turns {
            lines.push_str(&serde_json::json!({"content": read.to_string()}).to_string());
            lines.push('\n');
        }
        lines.push_str(&serde_json::json!({"content": finish.to_string()}).to_string());
        lines.push('\n');
        std::fs::write(dir.path().join("script.jsonl"), lines).expect("write the script");
        Self { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("script.jsonl")
    }
}

pub struct UpkeepRun {
    pub elapsed: Duration,
    pub peak_kib: u64,
    pub per_turn: Duration,
}

/// Runs `upkeep run` on `url` (over HTTP, or a local path) with a replay script (events to a
/// trace file), measured.
pub fn run_upkeep(url: &str, script: &Script, max_turns: usize) -> UpkeepRun {
    let home = tempfile::tempdir().expect("tempdir for HOME and TMPDIR");
    let trace = home.path().join("trace.jsonl");
    let mut command = Command::new(env!("CARGO_BIN_EXE_upkeep"));
    command
        .args(["run", "--quiet", "--task", "benchmark", "--repo", url, "--replay"])
        .arg(script.path())
        .arg("--trace")
        .arg(&trace)
        .args(["--max-turns", &(max_turns + 1).to_string()])
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1");
    let run = measured(&command, true);
    assert_eq!(run.code, 0, "upkeep run failed (exit {}):\n{}", run.code, run.stderr);
    let events = std::fs::read_to_string(&trace).expect("read the trace");
    let replies: Vec<jiff::Timestamp> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "model_response")
        .filter_map(|event| event["ts"].as_str().and_then(|ts| ts.parse().ok()))
        .collect();
    let per_turn = match (replies.first(), replies.last()) {
        (Some(first), Some(last)) if replies.len() > 1 => {
            let span = last.duration_since(*first).unsigned_abs();
            span / u32::try_from(replies.len() - 1).unwrap_or(u32::MAX)
        }
        _ => Duration::ZERO,
    };
    UpkeepRun {
        elapsed: run.elapsed,
        peak_kib: run.peak_kib,
        per_turn,
    }
}

pub struct Measured {
    pub elapsed: Duration,
    pub peak_kib: u64,
    pub code: i32,
    pub stderr: String,
}

/// The peak memory of `git clone --depth 1 URL` into a fresh directory of `scratch`: what
/// upkeep's own clone is held against.
pub fn git_clone_peak_kib(scratch: &Path, url: &str, run: usize) -> u64 {
    let dir = scratch.join(format!("peak-{run}"));
    let mut clone = git_command(scratch);
    clone.args(["clone", "-q", "--depth", "1", url]).arg(&dir);
    let git_clone = measured(&clone, false);
    assert_eq!(git_clone.code, 0, "git clone failed: {}", git_clone.stderr);
    std::fs::remove_dir_all(&dir).expect("remove the git clone");
    git_clone.peak_kib
}

/// Runs `command` through the measuring wrapper: wall time, peak resident set (the largest of
/// its processes), exit code, stderr. `clear_env`: the command sees only the variables set on it.
pub fn measured(command: &Command, clear_env: bool) -> Measured {
    let mut wrapper = Command::new(std::env::current_exe().expect("path of this benchmark"));
    wrapper
        .arg(MEASURE_CHILD)
        .arg(command.get_program())
        .args(command.get_args())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(dir) = command.get_current_dir() {
        wrapper.current_dir(dir);
    }
    if clear_env {
        wrapper.env_clear();
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapper.env(name, value),
            None => wrapper.env_remove(name),
        };
    }
    let started = Instant::now();
    let output = wrapper.output().expect("run the measuring wrapper");
    let elapsed = started.elapsed();
    let report = String::from_utf8_lossy(&output.stdout);
    let mut fields = report.split_whitespace();
    Measured {
        elapsed,
        peak_kib: fields.next().and_then(|v| v.parse().ok()).unwrap_or(0),
        code: fields.next().and_then(|v| v.parse().ok()).unwrap_or(-1),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn bench_startup(runs: usize) -> Duration {
    let mut times = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_upkeep"))
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .expect("run upkeep --version");
        times.push(started.elapsed());
        assert!(output.status.success(), "upkeep --version failed");
    }
    median(times)
}
