//! `cargo bench --bench overhead`: what upkeep itself costs, measured against the git CLI doing
//! the same work, on repositories of three sizes served over smart HTTP on loopback.
//!
//! Measured per size (medians of `UPKEEP_BENCH_RUNS` runs, default 5; sizes picked with
//! `UPKEEP_BENCH_SIZES=small,10k,100k`):
//! - first clone: `Workspace::clone_blocking` at depth 1 vs `git clone --depth 1`;
//! - continuous-mode refresh: `Workspace::refresh_blocking` vs `git fetch --depth 1` plus
//!   `git reset --hard` (and vs the fresh clone a cycle would otherwise make), with the clone
//!   dirtied the way a cycle dirties it, once with the remote unchanged since the last cycle and
//!   once after it gained a commit;
//! - prompt building: bytes and estimated tokens of the rendered file tree, and the time to
//!   build it;
//! - orchestration per turn: the real binary with a replay script of `UPKEEP_BENCH_TURNS`
//!   (default 200) `read_file` turns: the time from the first to the last `model_response`
//!   event of its trace, divided by the turns (and, as a cross-check, the run minus the same run
//!   with no turns);
//! - peak memory of that whole run (clone, prompt, turns), next to `git clone --depth 1`'s, and
//!   `upkeep --version` start-up;
//! - an interrupt while `search_files` works through the 100k-file repository: the time from
//!   SIGINT to the exit, against removing a clone of it (`interrupt.rs`);
//! - local paths (`UPKEEP_BENCH_LOCAL=6k,100k`): a 6,000-commit repository and the 100k-file
//!   one cloned from their path, against `git clone --depth 1 file://` and `git clone --local`
//!   (`local.rs`).
//!
//! `UPKEEP_BENCH_SERVE=1` measures nothing: it serves the chosen sizes and prints their URLs
//! until interrupted, for profiling a run by hand.
//!
//! Then one PASS/MISS line per goal. The repositories are generated with `git fast-import` and
//! cached under `target/bench-repos/` (by size and generator version), so only the first run
//! pays for building them; every run serves a copy, so the pushes the refresh needs never
//! touch the cache.
//!
//! Here: the command line, the choice of temporary directory and the serve mode. The
//! repositories are built in `repo.rs`, measured in `measurements.rs` and reported in
//! `output.rs`; `git.rs` runs the git CLI the measurements compare against.

#![allow(clippy::print_stdout, reason = "the table on stdout is what a benchmark is for")]

#[path = "../support/git.rs"]
mod git;
#[path = "../../tests/suite/support/git_http/mod.rs"]
mod git_http;
mod interrupt;
mod local;
#[path = "../support/measure.rs"]
mod measure;
mod measurements;
mod output;
mod repo;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use interrupt::bench_interrupt;
use local::{bench_local, local_sizes};
use measure::{MEASURE_CHILD, env_number, machine, measure_child};
use measurements::{bench_size, bench_startup, serve_copy};
use output::{report, report_interrupt, report_local};
use repo::{SIZES, Size, bench_repo};

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == MEASURE_CHILD) {
        measure_child(&args[2..]);
    }
    if args.get(1).is_some_and(|arg| arg == local::CLONE_CHILD) {
        local::clone_child(&args[2..]);
    }
    let temp = std::env::temp_dir();
    if let Some(wanted) = wanted_temp_dir().filter(|wanted| *wanted != temp) {
        rerun_with_temp_dir(&wanted, &args);
    }
    let runs = env_number("UPKEEP_BENCH_RUNS", 5).max(1);
    let turns = env_number("UPKEEP_BENCH_TURNS", 200).max(1);
    let wanted = std::env::var("UPKEEP_BENCH_SIZES").unwrap_or_else(|_| "small,10k,100k".into());
    let sizes: Vec<&Size> = wanted
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            SIZES
                .iter()
                .find(|size| size.name == name)
                .unwrap_or_else(|| panic!("UPKEEP_BENCH_SIZES: unknown size {name:?} (small, 10k, 100k)"))
        })
        .collect();

    println!("# upkeep overhead benchmark");
    println!();
    println!("{}", machine());
    println!("runs per figure: {runs} (UPKEEP_BENCH_RUNS); turns: {turns} (UPKEEP_BENCH_TURNS)");
    println!("clones and work trees in: {} (UPKEEP_BENCH_TMPDIR)", temp.display());
    println!();

    if std::env::var_os("UPKEEP_BENCH_SERVE").is_some() {
        serve(&sizes);
    }
    let mut results = Vec::new();
    let mut interrupts = Vec::new();
    for size in sizes {
        let started = Instant::now();
        let cached = bench_repo(size);
        eprintln!(
            "[{}] repository ready in {:.1?}: {}",
            size.name,
            started.elapsed(),
            cached.display()
        );
        results.push(bench_size(size, &cached, runs, turns));
        // The interrupt row is about a large repository: the 100k one only.
        if size.files >= 100_000 {
            interrupts.push(bench_interrupt(size, &cached, runs));
        }
    }
    let startup = bench_startup(runs.max(20));
    report(&results, startup, turns);
    report_interrupt(&interrupts);

    let local = std::env::var("UPKEEP_BENCH_LOCAL").unwrap_or_else(|_| "6k,100k".into());
    let mut local_results = Vec::new();
    for size in local_sizes(&local) {
        let source = bench_repo(size);
        local_results.push(bench_local(size, &source, runs));
    }
    report_local(&local_results);
}

/// Where clones go: `UPKEEP_BENCH_TMPDIR`, else `/dev/shm` when there is one. File creation on
/// a VM's disk is slow and noisy enough to drown what is measured here (the same files are
/// written by upkeep and by git either way); `UPKEEP_BENCH_TMPDIR=/tmp` measures on disk.
fn wanted_temp_dir() -> Option<PathBuf> {
    match std::env::var_os("UPKEEP_BENCH_TMPDIR") {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => Some(PathBuf::from("/dev/shm")).filter(|dir| dir.is_dir()),
    }
}

/// Runs this benchmark again with `TMPDIR` pointing at `dir` (every temporary directory, the
/// workspace's included, follows `TMPDIR`; setting it in-process would need `unsafe`).
fn rerun_with_temp_dir(dir: &Path, args: &[OsString]) -> ! {
    let status = Command::new(std::env::current_exe().expect("path of this benchmark"))
        .args(&args[1..])
        .env("TMPDIR", dir)
        .env("UPKEEP_BENCH_TMPDIR", dir)
        .status()
        .expect("rerun the benchmark with TMPDIR set");
    std::process::exit(status.code().unwrap_or(1));
}

/// `UPKEEP_BENCH_SERVE=1`: serves the repositories and measures nothing, until interrupted, so
/// that a run can be profiled by hand (`heaptrack upkeep run --repo <url> ...`).
fn serve(sizes: &[&Size]) -> ! {
    let served = tempfile::tempdir().expect("tempdir for the served copies");
    let mut servers = Vec::new();
    for size in sizes {
        let (server, _, url) = serve_copy(size, &bench_repo(size), served.path());
        println!("{}: {url}", size.name);
        servers.push(server);
    }
    println!("serving until interrupted");
    loop {
        std::thread::park();
    }
}
