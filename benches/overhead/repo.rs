//! The repositories measured: generated with `git fast-import` from a deterministic
//! pseudo-random source, so every machine measures the same history, and cached under
//! `target/bench-repos/` by size and generator version. Also the upstream commit a refresh
//! round pushes to the served copy.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::git::{git, git_command, path_str};
use crate::measure::target_dir;

/// Bumped whenever the generated repositories change, so stale caches are not reused.
const GENERATOR_VERSION: u32 = 1;

pub struct Size {
    pub name: &'static str,
    pub files: usize,
    pub commits: usize,
}

pub const SIZES: [Size; 3] = [
    Size {
        name: "small",
        files: 100,
        commits: 10,
    },
    Size {
        name: "10k",
        files: 10_000,
        commits: 100,
    },
    Size {
        name: "100k",
        files: 100_000,
        commits: 300,
    },
];

/// The bare repository for `size`, built once and cached. Built in a private directory and
/// renamed into place, so an interrupted build never leaves a half-made cache entry.
pub fn bench_repo(size: &Size) -> PathBuf {
    let dir = target_dir().join("bench-repos");
    let path = dir.join(format!("v{GENERATOR_VERSION}-{}.git", size.name));
    if path.join("HEAD").is_file() {
        return path;
    }
    std::fs::create_dir_all(&dir).expect("create target/bench-repos");
    let building = dir.join(format!("building-{}-{}", size.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    eprintln!(
        "[{}] building the test repository ({} files, {} commits)...",
        size.name, size.files, size.commits
    );
    git(&dir, &["init", "-q", "--bare", "-b", "main", path_str(&building)]);
    let mut child = git_command(&building)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start git fast-import");
    {
        let stdin = child.stdin.take().expect("fast-import stdin is piped");
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdin);
        write_history(&mut out, size).expect("write the fast-import stream");
        out.flush().expect("flush the fast-import stream");
    }
    let status = child.wait().expect("wait for git fast-import");
    assert!(status.success(), "git fast-import failed: {status}");
    // One well-formed pack, as a hosted repository would have.
    git(&building, &["repack", "-a", "-d", "-q"]);
    std::fs::rename(&building, &path).expect("move the built repository into the cache");
    path
}

/// A deterministic pseudo-random generator (xorshift64*): the same repository on every machine.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: [&str; 32] = [
    "value", "count", "index", "buffer", "config", "result", "error", "state", "reader", "writer", "parse", "render",
    "token", "budget", "branch", "commit", "remote", "client", "server", "request", "reply", "event", "cycle", "turn",
    "path", "tree", "entry", "cache", "limit", "retry", "signal", "scope",
];

/// Source-like text of 300 to 900 bytes, different for every (file, version).
fn file_content(file: usize, version: usize) -> String {
    let mut rng = Rng::new((file as u64) << 20 | version as u64);
    let target = 300 + rng.below(600);
    let mut text = format!("// file {file}, version {version}\n");
    while text.len() < target {
        let (a, b, c) = (WORDS[rng.below(32)], WORDS[rng.below(32)], WORDS[rng.below(32)]);
        match rng.below(3) {
            0 => text.push_str(&format!(
                "pub fn {a}_{b}_{}(x: u32) -> u32 {{ x + {} }}\n",
                rng.below(1000),
                rng.below(97)
            )),
            1 => text.push_str(&format!("// The {a} keeps the {b} of the {c}.\n")),
            _ => text.push_str(&format!(
                "const {}_{}: usize = {};\n",
                a.to_uppercase(),
                b.to_uppercase(),
                rng.below(1 << 16)
            )),
        }
    }
    text
}

/// `src/mNNN/sN/fNNNNN.rs`: 100 files a folder, 10 folders a module, like a large source tree.
fn file_path(file: usize) -> String {
    let leaf = file / 100;
    format!("src/m{:03}/s{}/f{file:05}.rs", leaf / 10, leaf % 10)
}

fn readme() -> String {
    let mut text = String::from("# Bench\n\nA generated repository for upkeep's overhead benchmark.\n\n");
    for line in 0..30 {
        text.push_str(&format!(
            "- line {line}: the README is what every benchmark turn reads.\n"
        ));
    }
    text
}

fn write_data(out: &mut impl std::io::Write, data: &[u8]) -> std::io::Result<()> {
    writeln!(out, "data {}", data.len())?;
    out.write_all(data)?;
    writeln!(out)
}

/// The fast-import stream: one commit with every file, then `commits - 1` small commits that
/// each change three files.
fn write_history(out: &mut impl std::io::Write, size: &Size) -> std::io::Result<()> {
    let when = 1_700_000_000u64;
    writeln!(out, "commit refs/heads/main")?;
    writeln!(out, "committer Bench <bench@example.com> {when} +0000")?;
    write_data(out, b"Initial import")?;
    for (path, content) in [
        ("README.md".to_owned(), readme()),
        (".gitignore".to_owned(), "target/\n*.log\n".to_owned()),
        ("TODO.md".to_owned(), "- [ ] nothing yet\n".to_owned()),
    ] {
        writeln!(out, "M 100644 inline {path}")?;
        write_data(out, content.as_bytes())?;
    }
    for file in 0..size.files {
        writeln!(out, "M 100644 inline {}", file_path(file))?;
        write_data(out, file_content(file, 0).as_bytes())?;
    }
    let mut rng = Rng::new(42);
    for commit in 1..size.commits {
        writeln!(out, "commit refs/heads/main")?;
        writeln!(
            out,
            "committer Bench <bench@example.com> {} +0000",
            when + commit as u64 * 60
        )?;
        write_data(out, format!("Change {commit}").as_bytes())?;
        for _ in 0..3 {
            let file = rng.below(size.files);
            writeln!(out, "M 100644 inline {}", file_path(file))?;
            write_data(out, file_content(file, commit).as_bytes())?;
        }
    }
    Ok(())
}

/// Adds one commit changing three files on the served repository's `main` (what a merged pull
/// request does to the remote between two cycles).
pub fn push_upstream_commit(bare: &Path, size: &Size, round: usize) {
    let mut stream = Vec::new();
    let write = |out: &mut Vec<u8>| -> std::io::Result<()> {
        let when = 1_800_000_000 + round as u64 * 60;
        writeln!(out, "commit refs/heads/main")?;
        writeln!(out, "committer Upstream <up@example.com> {when} +0000")?;
        write_data(out, format!("Upstream change {round}").as_bytes())?;
        writeln!(out, "from refs/heads/main^0")?;
        let mut rng = Rng::new(1_000 + round as u64);
        for _ in 0..3 {
            let file = rng.below(size.files);
            writeln!(out, "M 100644 inline {}", file_path(file))?;
            write_data(out, file_content(file, 10_000 + round).as_bytes())?;
        }
        Ok(())
    };
    write(&mut stream).expect("writing to a Vec cannot fail");
    let mut child = git_command(bare)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start git fast-import");
    child
        .stdin
        .take()
        .expect("fast-import stdin is piped")
        .write_all(&stream)
        .expect("write the upstream commit");
    assert!(
        child.wait().expect("wait for fast-import").success(),
        "upstream commit failed"
    );
}
