//! What the benchmarks share: the measuring wrapper (a re-run of the benchmark binary whose
//! only child is the measured program, so its `ru_maxrss` is that program's peak memory),
//! medians, the environment knobs and a line describing the machine.

#![allow(dead_code, reason = "each benchmark uses its own part")]
#![allow(clippy::print_stdout, reason = "the wrapper reports on stdout")]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// First argument that makes a benchmark binary the measuring wrapper (see [`measure_child`]).
pub const MEASURE_CHILD: &str = "--measure-child";

pub fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {value:?}")),
        Err(_) => default,
    }
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

pub fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    match values.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2,
    }
}

/// The wrapper: runs one child (stdout discarded, stderr passed on) and prints the child's peak
/// resident set in KiB and its exit code. A process of its own, because `RUSAGE_CHILDREN` is
/// the maximum over every child ever waited for, and the benchmark itself runs many git
/// processes (the HTTP server's among them).
pub fn measure_child(args: &[OsString]) -> ! {
    let Some((program, rest)) = args.split_first() else {
        eprintln!("{MEASURE_CHILD} PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let status = Command::new(program)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run the measured program");
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    println!("{} {}", usage.max_rss(), status.code().unwrap_or(-1));
    std::process::exit(0);
}

pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let git_version = Command::new("git")
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|_| "git unknown".into());
    format!("machine: {cpus} CPUs ({cpu}), {memory} memory, Linux {kernel}, {git_version}")
}
