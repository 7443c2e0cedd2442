//! The benchmark's repository: 10,000 generated source files of realistic sizes (mostly a few
//! kilobytes, some up to 60 KB), plus the handful of files the scripted cycle reads, searches
//! and edits, whose contents the script knows. Generated once, deterministically, and cached
//! under `target/bench-repos/`.

use crate::git::git;
use std::path::{Path, PathBuf};

/// Bumped whenever the generated repository changes, so a stale cache is not reused.
const GENERATOR_VERSION: u32 = 1;
pub const FILES: usize = 10_000;

const MODULES: &[&str] = &[
    "net", "storage", "auth", "cli", "config", "render", "sync", "jobs", "api", "util",
];
const NOUNS: &[&str] = &[
    "request", "buffer", "header", "session", "token", "record", "segment", "queue", "frame", "cursor", "entry",
    "payload", "index", "cache", "window", "stream", "handle", "ledger", "batch", "route",
];
const VERBS: &[&str] = &[
    "parse", "encode", "flush", "merge", "split", "resolve", "validate", "collect", "render", "dispatch", "compact",
    "retry", "advance", "reserve", "release", "observe",
];
const TYPES: &[&str] = &[
    "u32",
    "u64",
    "usize",
    "bool",
    "String",
    "Vec<u8>",
    "Option<u64>",
    "&str",
    "Duration",
];

/// Rust-like text of about `bytes` bytes: functions with doc comments, matches and loops, so
/// that a tokenizer sees what it sees in real code.
pub fn code(rng: &mut fastrand::Rng, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 512);
    text.push_str("//! Generated module for the context benchmark.\n\nuse std::collections::HashMap;\n\n");
    while text.len() < bytes {
        let noun = NOUNS[rng.usize(..NOUNS.len())];
        let verb = VERBS[rng.usize(..VERBS.len())];
        let ty = TYPES[rng.usize(..TYPES.len())];
        let n = rng.u32(1..5000);
        text.push_str(&format!(
            "/// {verb_cap}s the {noun} and reports how many {noun}s were seen ({n} at most).\n\
             pub fn {verb}_{noun}_{n}(input: &[{ty}], limit: usize) -> Result<usize, Error> {{\n\
             \x20   let mut seen = 0;\n\
             \x20   for (position, item) in input.iter().enumerate() {{\n\
             \x20       if position >= limit {{\n\
             \x20           return Err(Error::TooMany {{ limit, position }});\n\
             \x20       }}\n\
             \x20       match item {{\n\
             \x20           _ if seen % {m} == 0 => seen += 2,\n\
             \x20           _ => seen += 1,\n\
             \x20       }}\n\
             \x20   }}\n\
             \x20   Ok(seen)\n\
             }}\n\n",
            verb_cap = capitalise(verb),
            m = rng.u32(2..9),
        ));
    }
    text
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// The files the scripted cycle works on: (path, size, lines the script searches for or edits).
pub const KNOWN: &[(&str, usize, &[&str])] = &[
    (
        "src/net/http/parser.rs",
        24_000,
        &[
            "fn parse_header(line: &str) -> Option<(String, String)> {",
            "MAX_HEADER_BYTES",
        ],
    ),
    (
        "src/net/http/headers.rs",
        8_000,
        &["pub struct HeaderMap {", "MAX_HEADER_BYTES"],
    ),
    ("src/net/http/mod.rs", 3_000, &["pub mod parser;"]),
    ("src/net/http/chunked.rs", 60_000, &["MAX_HEADER_BYTES"]),
    (
        "src/net/limits.rs",
        5_000,
        &["pub const MAX_HEADER_BYTES: usize = 8192;"],
    ),
    ("tests/http_parser.rs", 40_000, &["fn parses_a_simple_header() {"]),
    ("docs/http.md", 12_000, &["## Header limits"]),
    ("CHANGELOG.md", 20_000, &["## Unreleased"]),
];

/// The path of the generated repository, made on first use.
pub fn repository() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-repos")
        .join(format!("context-{FILES}-v{GENERATOR_VERSION}"));
    if root.join(".git").is_dir() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    let building = root.with_extension("building");
    let _ = std::fs::remove_dir_all(&building);
    std::fs::create_dir_all(&building).expect("create the repository folder");
    let mut rng = fastrand::Rng::with_seed(13);
    for (path, size, lines) in KNOWN {
        let mut text = code(&mut rng, size / 2);
        for line in *lines {
            text.push_str(line);
            text.push_str("\n    // known line for the benchmark script\n}\n\n");
        }
        text.push_str(&code(&mut rng, size - text.len().min(*size)));
        write(&building, path, &text);
    }
    for index in 0..FILES - KNOWN.len() {
        let module = MODULES[index % MODULES.len()];
        let sub = NOUNS[(index / MODULES.len()) % NOUNS.len()];
        // Most files are a few kilobytes; one in fifty is large.
        let size = if rng.usize(..50) == 0 {
            rng.usize(20_000..60_000)
        } else {
            rng.usize(300..6_000)
        };
        let path = format!("src/{module}/{sub}/{sub}_{index}.rs");
        let text = code(&mut rng, size);
        write(&building, &path, &text);
    }
    git(&building, &["init", "-q", "-b", "main"]);
    git(&building, &["add", "-A"]);
    git(
        &building,
        &["commit", "-q", "-m", "Generated repository for the context benchmark"],
    );
    std::fs::rename(&building, &root).expect("move the repository into place");
    root
}

fn write(root: &Path, path: &str, text: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("a file has a folder")).expect("mkdir");
    std::fs::write(full, text).expect("write a generated file");
}
