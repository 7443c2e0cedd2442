//! The local-path rows: a local repository (`--repo ~/src/project`) cloned by upkeep against
//! `git clone --depth 1 file://` and `git clone --local`, on generated repositories with long
//! histories, where cloning by repacking the history used to cost minutes.
//!
//! Measured per repository (medians of the runs): `Workspace::clone_blocking` of the local path
//! at depth 1 against both git clones; its peak memory (this benchmark run as a process that
//! only clones, [`CLONE_CHILD`]) against `git clone --depth 1 file://`'s; and, for reference,
//! the peak memory of a whole `upkeep run` on the path (clone, prompt, one reply), which adds
//! what the binary holds whatever the repository.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use upkeep::repo::{CloneRequest, Stop, Workspace};

use crate::git::{git, path_str};
use crate::measure::median;
use crate::measurements::{Script, git_clone_peak_kib, measured, run_upkeep};
use crate::repo::{SIZES, Size};

/// A long history over a few hundred files, like a mature project.
pub const LONG_HISTORY: Size = Size {
    name: "local-6k",
    files: 400,
    commits: 6_000,
};

/// The local repositories `UPKEEP_BENCH_LOCAL` names (`6k`, `100k`; default both): the long
/// history, and the 100k-file repository the HTTP rows use.
pub fn local_sizes(wanted: &str) -> Vec<&'static Size> {
    wanted
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| match name {
            "6k" => &LONG_HISTORY,
            "100k" => &SIZES[2],
            other => panic!("UPKEEP_BENCH_LOCAL: unknown repository {other:?} (6k, 100k)"),
        })
        .collect()
}

/// The first argument that makes this benchmark a process that clones one local path and exits.
pub const CLONE_CHILD: &str = "--local-clone-child";

/// [`CLONE_CHILD`]: clones the path in `args` as upkeep does, so that its peak memory can be
/// measured apart from the benchmark's.
pub fn clone_child(args: &[OsString]) -> ! {
    let Some(path) = args.first().and_then(|path| path.to_str()) else {
        eprintln!("{CLONE_CHILD} PATH");
        std::process::exit(2);
    };
    let request = CloneRequest::new(path, true);
    match Workspace::clone_blocking(&request, &Stop::never()) {
        Ok(workspace) => {
            drop(workspace);
            std::process::exit(0)
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1)
        }
    }
}

pub struct LocalResult {
    pub name: &'static str,
    pub files: usize,
    pub commits: usize,
    pub upkeep: Duration,
    pub git_depth_1: Duration,
    pub git_local: Duration,
    /// Peak resident set of the clone alone, of a whole run, and of `git clone --depth 1 file://`.
    pub clone_peak_kib: u64,
    pub run_peak_kib: u64,
    pub git_peak_kib: u64,
}

pub fn bench_local(size: &Size, cached: &Path, runs: usize) -> LocalResult {
    let scratch = tempfile::tempdir().expect("tempdir for git clones");
    // A copy beside the clones: `git clone --local` hard-links, which needs one file system, and
    // the cache stays untouched.
    let source = &scratch.path().join(format!("{}.git", size.name));
    git(
        scratch.path(),
        &["clone", "-q", "--bare", path_str(cached), path_str(source)],
    );
    let url = format!("file://{}", path_str(source));
    eprintln!("[{}] local clone x{runs}", size.name);
    let (mut upkeep, mut depth_1, mut local) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        // Rotate who goes first, so none always meets a warmer cache.
        for turn in 0..3 {
            let dir = scratch.path().join(format!("clone-{run}-{turn}"));
            let started = Instant::now();
            match (run + turn) % 3 {
                0 => {
                    let request = CloneRequest::new(path_str(source), true);
                    let workspace = Workspace::clone_blocking(&request, &Stop::never()).expect("upkeep local clone");
                    upkeep.push(started.elapsed());
                    drop(workspace);
                    continue;
                }
                1 => {
                    git(scratch.path(), &["clone", "-q", "--depth", "1", &url, path_str(&dir)]);
                    depth_1.push(started.elapsed());
                }
                _ => {
                    git(
                        scratch.path(),
                        &["clone", "-q", "--local", path_str(source), path_str(&dir)],
                    );
                    local.push(started.elapsed());
                }
            }
            std::fs::remove_dir_all(&dir).expect("remove the git clone");
        }
    }

    eprintln!("[{}] whole runs on the local path x{runs}", size.name);
    let none = Script::new(0);
    let (mut clone_peak_kib, mut run_peak_kib, mut git_peak_kib) = (0, 0, 0);
    for run in 0..runs {
        let mut child = Command::new(std::env::current_exe().expect("path of this benchmark"));
        child.arg(CLONE_CHILD).arg(source).env("TMPDIR", scratch.path());
        let clone = measured(&child, false);
        assert_eq!(clone.code, 0, "upkeep's clone failed: {}", clone.stderr);
        clone_peak_kib = clone_peak_kib.max(clone.peak_kib);
        run_peak_kib = run_peak_kib.max(run_upkeep(path_str(source), &none, 1).peak_kib);
        git_peak_kib = git_peak_kib.max(git_clone_peak_kib(scratch.path(), &url, run));
    }
    LocalResult {
        name: size.name,
        files: size.files + 3,
        commits: size.commits,
        upkeep: median(upkeep),
        git_depth_1: median(depth_1),
        git_local: median(local),
        clone_peak_kib,
        run_peak_kib,
        git_peak_kib,
    }
}
