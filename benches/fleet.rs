//! `cargo bench --bench fleet`: what running a fleet costs on one machine.
//!
//! 50 small generated repositories (a README, a task file and 20 source files each) are served
//! over smart HTTP on loopback by `git http-backend`; the model is a replay script whose one
//! reply writes a file, proposes it and finishes (`--forge none`: the commit stays in the
//! clone, so nothing but upkeep and git is measured). Measured, as medians of
//! `UPKEEP_BENCH_RUNS` runs (default 3):
//! - `upkeep fleet --jobs 1, 4, 8` over all 50: wall time, repositories per minute, and the
//!   peak resident memory of the fleet process (its `ru_maxrss`, read by a wrapper process
//!   whose only child it is);
//! - `upkeep run` on one repository (`UPKEEP_BENCH_SINGLE` runs, default 10): wall time and peak
//!   memory, so that the fleet's overhead per repository (`--jobs 1` wall time / 50, minus one
//!   single run) shows what the fleet adds to, or saves on, running each repository alone.
//!
//! Then one PASS/MISS line per goal (see [`GOALS`] for why each is what it is). The repositories
//! are cached under `target/bench-repos/fleet-v1/`; clones go to `UPKEEP_BENCH_TMPDIR`, else
//! `/dev/shm` when there is one (as `benches/overhead/main.rs` does, so disk noise does not drown
//! what is measured).

#![allow(clippy::print_stdout, reason = "the table on stdout is what a benchmark is for")]

#[path = "support/git.rs"]
mod git;
#[path = "../tests/suite/support/git_http/mod.rs"]
mod git_http;
#[path = "support/measure.rs"]
mod measure;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git::{git, path_str};
use measure::{MEASURE_CHILD, env_number, machine, measure_child, median, target_dir};
use serde_json::{Value, json};

/// Bumped whenever the generated repositories change.
const GENERATOR_VERSION: u32 = 1;
const REPOSITORIES: usize = 50;
const FILES_PER_REPOSITORY: usize = 20;
const JOBS: [u32; 3] = [1, 4, 8];

/// The goals, and why.
const GOALS: &str = "\
- peak memory at --jobs 8 <= 256 MiB: the Kubernetes manifest requests 256Mi for a worker
  that runs 2 at a time; eight at once must still fit what one pod is given.
- memory per extra parallel run <= 8 MiB: memory must grow with --jobs, not with the fleet, and
  predictably (at that rate 256 MiB still holds --jobs 24).
- overhead per repository (fleet --jobs 1 vs one upkeep run) <= +50 ms: listing, sharding and
  the table must not make a repository dearer than running it alone.
- --jobs 4 >= 1.5x the repositories per minute of --jobs 1: runs wait on git and the network,
  so running several at once must pay off even on a 2-core machine.
- >= 100 repositories per minute at --jobs 8 with an instant model: a real model takes tens of
  seconds per repository, so upkeep's own work must be far from the bottleneck.";
const PEAK_MEMORY_GOAL_KIB: u64 = 256 * 1024;
const PER_RUN_MEMORY_GOAL_MIB: f64 = 8.0;
const OVERHEAD_GOAL: Duration = Duration::from_millis(50);
const PARALLEL_SPEEDUP_GOAL: f64 = 1.5;
const RATE_GOAL: f64 = 100.0;

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == MEASURE_CHILD) {
        measure_child(&args[2..]);
    }
    let runs = env_number("UPKEEP_BENCH_RUNS", 3).max(1);
    let single_runs = env_number("UPKEEP_BENCH_SINGLE", 10).max(1);
    let temp = clone_dir();
    let cache = bench_repos();
    let server = git_http::GitHttpServer::start(&cache, None);
    let work = tempfile::tempdir().expect("tempdir");
    let urls: Vec<String> = (0..REPOSITORIES)
        .map(|i| format!("{}/bench/repo-{i:02}.git", server.url()))
        .collect();
    let list = work.path().join("fleet.txt");
    std::fs::write(&list, urls.join("\n") + "\n").expect("write the list");
    let script = work.path().join("script.jsonl");
    // Each run's pull request is reviewed first, as in a real run: the reviewer's line is
    // served to it alone (docs/agents.md, Replay).
    let lines = [
        json!({"content": reply()}),
        json!({"agent": "root>reviewer", "content": review()}),
    ];
    let lines: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&script, lines.join("\n") + "\n").expect("write the script");

    println!("# upkeep fleet benchmark");
    println!();
    println!("{}", machine());
    println!(
        "{REPOSITORIES} repositories ({} files each) over git http-backend on loopback; scripted replies; --forge none",
        FILES_PER_REPOSITORY + 2
    );
    println!("runs per figure: {runs} (UPKEEP_BENCH_RUNS); single runs: {single_runs} (UPKEEP_BENCH_SINGLE)");
    println!("clones in: {} (UPKEEP_BENCH_TMPDIR)", temp.display());
    println!();

    let single = bench_single(&urls[0], &script, &temp, work.path(), single_runs);
    let fleets: Vec<FleetFigure> = JOBS
        .iter()
        .map(|&jobs| bench_fleet(jobs, &list, &script, &temp, work.path(), runs))
        .collect();
    report(&single, &fleets);
}

struct Measured {
    wall: Duration,
    peak_kib: u64,
}

struct FleetFigure {
    jobs: u32,
    wall: Duration,
    peak_kib: u64,
}

impl FleetFigure {
    fn per_minute(&self) -> f64 {
        REPOSITORIES as f64 * 60.0 / self.wall.as_secs_f64()
    }
}

/// Runs `upkeep ARGS` under the measuring wrapper, with events in `trace`.
fn measure(args: &[OsString], temp: &Path) -> Measured {
    let started = Instant::now();
    let output = Command::new(std::env::current_exe().expect("this benchmark"))
        .arg(MEASURE_CHILD)
        .arg(env!("CARGO_BIN_EXE_upkeep"))
        .args(args)
        .env("TMPDIR", temp)
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run the wrapper");
    let wall = started.elapsed();
    let text = String::from_utf8_lossy(&output.stdout);
    let (peak, code) = text.trim().split_once(' ').expect("the wrapper's line");
    assert_eq!(
        code,
        "0",
        "upkeep {args:?} exited {code}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Measured {
        wall,
        peak_kib: peak.parse().expect("a number"),
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn bench_single(url: &str, script: &Path, temp: &Path, work: &Path, runs: usize) -> Measured {
    let mut walls = Vec::new();
    let mut peak = 0;
    for run in 0..runs {
        let trace = work.join(format!("single-{run}.jsonl"));
        let mut args = os(&["run", "--forge", "none", "--quiet", "--repo", url, "--replay"]);
        args.extend([script.into(), "--trace".into(), trace.clone().into()]);
        let measured = measure(&args, temp);
        let finished = events(&trace, "run_finished");
        assert_eq!(finished[0]["outcome"], "pull_request", "the single run did its work");
        walls.push(measured.wall);
        peak = peak.max(measured.peak_kib);
    }
    Measured {
        wall: median(walls),
        peak_kib: peak,
    }
}

fn bench_fleet(jobs: u32, list: &Path, script: &Path, temp: &Path, work: &Path, runs: usize) -> FleetFigure {
    let mut walls = Vec::new();
    let mut peak = 0;
    for run in 0..runs {
        let trace = work.join(format!("fleet-{jobs}-{run}.jsonl"));
        let mut args = os(&[
            "fleet",
            "--forge",
            "none",
            "--quiet",
            "--jobs",
            &jobs.to_string(),
            "--repos",
        ]);
        args.extend([
            list.into(),
            "--replay".into(),
            script.into(),
            "--trace".into(),
            trace.clone().into(),
        ]);
        let measured = measure(&args, temp);
        let finished = events(&trace, "fleet_finished");
        let outcomes = finished[0]["outcomes"].as_array().expect("outcomes");
        assert_eq!(outcomes.len(), REPOSITORIES);
        assert!(
            outcomes.iter().all(|outcome| outcome["outcome"] == "pull_request"),
            "every repository did its work: {}",
            finished[0]
        );
        eprintln!(
            "[--jobs {jobs}] run {}: {:.2?}, peak {} KiB",
            run + 1,
            measured.wall,
            measured.peak_kib
        );
        walls.push(measured.wall);
        peak = peak.max(measured.peak_kib);
    }
    FleetFigure {
        jobs,
        wall: median(walls),
        peak_kib: peak,
    }
}

fn events(trace: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(trace)
        .expect("the trace")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == kind)
        .collect()
}

fn report(single: &Measured, fleets: &[FleetFigure]) {
    println!("| run | wall time | repositories/min | peak memory |");
    println!("|---|---:|---:|---:|");
    println!(
        "| one `upkeep run` | {} | {:.0} | {} |",
        ms(single.wall),
        60.0 / single.wall.as_secs_f64(),
        memory(single.peak_kib)
    );
    for figure in fleets {
        println!(
            "| `upkeep fleet --jobs {}`, {REPOSITORIES} repositories | {} | {:.0} | {} |",
            figure.jobs,
            ms(figure.wall),
            figure.per_minute(),
            memory(figure.peak_kib)
        );
    }
    let by_jobs = |jobs: u32| fleets.iter().find(|f| f.jobs == jobs).expect("measured");
    let (one, four, eight) = (by_jobs(1), by_jobs(4), by_jobs(8));
    let per_repository = one.wall / REPOSITORIES as u32;
    let overhead = per_repository.as_secs_f64() - single.wall.as_secs_f64();
    println!();
    println!(
        "fleet --jobs 1 per repository: {} against {} for one `upkeep run` (overhead {:+.1} ms)",
        ms(per_repository),
        ms(single.wall),
        overhead * 1000.0
    );
    let extra = (eight.peak_kib.saturating_sub(one.peak_kib)) as f64 / 7.0 / 1024.0;
    println!("memory per extra parallel run (--jobs 8 vs 1, / 7): {extra:.1} MiB");
    println!();
    println!("Goals:\n{GOALS}");
    println!();
    verdict(
        eight.peak_kib <= PEAK_MEMORY_GOAL_KIB,
        &format!("peak memory at --jobs 8: {} (goal <= 256 MiB)", memory(eight.peak_kib)),
    );
    verdict(
        extra <= PER_RUN_MEMORY_GOAL_MIB,
        &format!("memory per extra parallel run: {extra:.1} MiB (goal <= {PER_RUN_MEMORY_GOAL_MIB:.0} MiB)"),
    );
    verdict(
        overhead <= OVERHEAD_GOAL.as_secs_f64(),
        &format!("overhead per repository: {:+.1} ms (goal <= +50 ms)", overhead * 1000.0),
    );
    let speedup = four.per_minute() / one.per_minute();
    verdict(
        speedup >= PARALLEL_SPEEDUP_GOAL,
        &format!("--jobs 4 vs --jobs 1: {speedup:.2}x the repositories per minute (goal >= {PARALLEL_SPEEDUP_GOAL}x)"),
    );
    verdict(
        eight.per_minute() >= RATE_GOAL,
        &format!(
            "--jobs 8: {:.0} repositories per minute (goal >= {RATE_GOAL:.0})",
            eight.per_minute()
        ),
    );
}

fn verdict(pass: bool, text: &str) {
    println!("{} {text}", if pass { "PASS" } else { "MISS" });
}

/// The one scripted reply: write a file, propose it, finish.
fn reply() -> String {
    json!({"plan": "add notes", "tool_calls": [
        {"tool_name": "write_file", "arguments": {"path": "NOTES.md", "content": "Notes.\n"}},
        {"tool_name": "create_pull_request", "arguments": {"title": "Add notes", "body": "Adds NOTES.md."}},
        {"tool_name": "finish", "arguments": {"status": "completed", "summary": "added notes"}},
    ]})
    .to_string()
}

/// The reviewer's verdict on that change.
fn review() -> String {
    json!({"plan": "NOTES.md is added as asked; nothing else changed.", "tool_calls": [
        {"tool_name": "complete_task", "arguments": {"answer": {"verdict": "pass", "findings": []}}},
    ]})
    .to_string()
}

// ---- repositories ----

/// The served root holding `bench/repo-NN.git`, built once and cached (built aside and renamed
/// into place, so an interrupted build leaves no half-made cache).
fn bench_repos() -> PathBuf {
    let root = target_dir()
        .join("bench-repos")
        .join(format!("fleet-v{GENERATOR_VERSION}"));
    if root.join("ready").is_file() {
        return root;
    }
    let building = target_dir()
        .join("bench-repos")
        .join(format!("fleet-building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    eprintln!("building {REPOSITORIES} repositories under {}...", root.display());
    for index in 0..REPOSITORIES {
        let work = building.join("work").join(index.to_string());
        std::fs::create_dir_all(work.join("src")).expect("mkdir");
        std::fs::write(
            work.join("README.md"),
            format!("# Repository {index}\n\nA fleet benchmark repository.\n"),
        )
        .expect("write");
        std::fs::write(work.join("TODO.md"), "- [ ] add notes\n").expect("write");
        for file in 0..FILES_PER_REPOSITORY {
            std::fs::write(
                work.join("src").join(format!("f{file:02}.rs")),
                format!("pub fn f{file}() -> u32 {{ {} }}\n", index * 100 + file),
            )
            .expect("write");
        }
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "Initial commit"]);
        let bare = building.join("bench").join(format!("repo-{index:02}.git"));
        git(&work, &["clone", "-q", "--bare", ".", path_str(&bare)]);
    }
    std::fs::remove_dir_all(building.join("work")).expect("remove the work trees");
    std::fs::write(building.join("ready"), "").expect("mark ready");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&building, &root).expect("move into the cache");
    root
}

// ---- measuring ----

/// Where clones go: `UPKEEP_BENCH_TMPDIR`, else `/dev/shm`, else the system's.
fn clone_dir() -> PathBuf {
    match std::env::var_os("UPKEEP_BENCH_TMPDIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Some(PathBuf::from("/dev/shm"))
            .filter(|dir| dir.is_dir())
            .unwrap_or_else(std::env::temp_dir),
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}

fn memory(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}
