//! The repository's files as the cycle prompt lists them, within a byte budget.
//!
//! A small repository is listed whole. A repository whose list does not fit gets a breadth-first
//! summary instead of an alphabetical prefix (which would hide whole directories the model then
//! never hears of): every top-level directory comes first with its file count (and keeps it when
//! it is opened), then the top level's files, then deeper directories opened level by level while
//! the budget allows.
//! Names are escaped (see [`crate::text::escape_control`]), so a file name cannot add a line or
//! a section to the prompt. The walk goes through the repository gate (`repo::walk`), off the
//! async threads and stopped by the interrupt: on 100,000 files it takes seconds.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::ops::ControlFlow;

use tokio_util::sync::CancellationToken;

use crate::repo::{RepoPath, StopReason, WorkTree, walk};

/// Bytes of file tree in the cycle prompt, by default.
pub const DEFAULT_TREE_BUDGET: usize = 16 * 1024;
/// The tree's budget for a model with a window of `window` tokens: about an eighth of a small
/// window (at four bytes a token), so the first request of a large repository still fits a
/// small local model's 4,096 or 8,192 tokens; never under 2 KiB, never over the default.
pub(crate) fn tree_budget(window: u64) -> usize {
    usize::try_from(window / 2)
        .unwrap_or(usize::MAX)
        .clamp(2 * 1024, DEFAULT_TREE_BUDGET)
}

/// Bytes of the budget kept for the notices after the listing.
const NOTICE_RESERVE: usize = 200;

/// A directory of the tree: its own files (names, escaped) and its subdirectories.
#[derive(Debug, Default)]
struct Folder {
    files: Vec<String>,
    folders: BTreeMap<String, Folder>,
    /// Files in this folder and every folder below it.
    total: usize,
}

impl Folder {
    fn insert(&mut self, parts: &[String]) {
        self.total += 1;
        match parts {
            [] => {}
            [file] => self.files.push(file.clone()),
            [folder, rest @ ..] => self.folders.entry(folder.clone()).or_default().insert(rest),
        }
    }

    fn at(&self, path: &[String]) -> Option<&Folder> {
        match path {
            [] => Some(self),
            [first, rest @ ..] => self.folders.get(first)?.at(rest),
        }
    }
}

/// The rendered listing, and how many files the repository has.
#[derive(Debug, Clone)]
pub struct FileTree {
    text: String,
    pub total: usize,
}

/// Whether the top-level folder `name` was opened: some listed line lies inside it.
fn opened_top(lines: &BTreeMap<String, String>, name: &str) -> bool {
    let inside = format!("{name}/");
    lines
        .range(inside.clone()..)
        .next()
        .is_some_and(|(key, _)| key.starts_with(&inside))
}

fn joined(prefix: &[String], name: &str) -> String {
    let mut path = prefix.join("/");
    if !path.is_empty() {
        path.push('/');
    }
    path.push_str(name);
    path
}

fn summary_line(prefix: &[String], name: &str, folder: &Folder) -> String {
    format!("{}/ [{} files]", joined(prefix, name), folder.total)
}

impl FileTree {
    /// Lists the work tree's unignored files within `budget` bytes, off the async threads;
    /// [`StopReason::Interrupted`] as soon as `cancel` is.
    pub async fn scan_until(tree: &WorkTree, budget: usize, cancel: &CancellationToken) -> Result<Self, StopReason> {
        tree.off_thread(cancel, move |tree, cancel| Self::scan_walking(tree, budget, cancel))
            .await
    }

    /// Lists the work tree's unignored files within `budget` bytes, on this thread.
    pub fn scan(tree: &WorkTree, budget: usize) -> Self {
        Self::scan_walking(tree, budget, &CancellationToken::new())
    }

    fn scan_walking(tree: &WorkTree, budget: usize, cancel: &CancellationToken) -> Self {
        let mut root = Folder::default();
        let _ = walk::walk(tree, &RepoPath::root(), cancel, |path, _| {
            let parts: Vec<String> = path
                .as_path()
                .iter()
                .map(|part| crate::text::escape_control(&part.to_string_lossy()))
                .collect();
            root.insert(&parts);
            ControlFlow::Continue(())
        });
        Self::layout(&root, budget)
    }

    fn layout(root: &Folder, budget: usize) -> Self {
        // Room kept for the closing notices, so the whole stays within the budget.
        let budget = budget.saturating_sub(NOTICE_RESERVE);
        let total = root.total;
        if total == 0 {
            return Self {
                text: "(no files)".into(),
                total,
            };
        }
        // Lines keyed by path, so the result reads as a sorted listing however it was opened.
        let mut lines: BTreeMap<String, String> = BTreeMap::new();
        let mut used = 0;
        let add = |lines: &mut BTreeMap<String, String>, used: &mut usize, key: String, line: String| {
            *used += line.len() + 1;
            lines.insert(key, line);
        };
        // Every top-level folder is named with its count, whatever the budget, and stays named
        // when it is opened below: these lines come first in a summarised tree.
        let heads: Vec<String> = root
            .folders
            .iter()
            .map(|(name, folder)| summary_line(&[], name, folder))
            .collect();
        used += heads.iter().map(|line| line.len() + 1).sum::<usize>();
        let mut left_out = 0;
        for (index, file) in root.files.iter().enumerate() {
            if used + file.len() + 1 > budget {
                left_out = root.files.len() - index;
                break;
            }
            add(&mut lines, &mut used, file.clone(), file.clone());
        }
        // Open folders breadth first while their contents fit in place of their summary line.
        let mut queue: VecDeque<Vec<String>> = root.folders.keys().map(|name| vec![name.clone()]).collect();
        while let Some(path) = queue.pop_front() {
            let Some(folder) = root.at(&path) else { continue };
            let (name, prefix) = path.split_last().map(|(n, p)| (n.as_str(), p)).unwrap_or(("", &[]));
            let summary = summary_line(prefix, name, folder);
            let opened: Vec<(String, String)> = folder
                .files
                .iter()
                .map(|file| {
                    let full = joined(&path, file);
                    (full.clone(), full)
                })
                .chain(
                    folder
                        .folders
                        .iter()
                        .map(|(sub, inner)| (format!("{}/", joined(&path, sub)), summary_line(&path, sub, inner))),
                )
                .collect();
            let cost: usize = opened.iter().map(|(_, line)| line.len() + 1).sum();
            // A deeper folder's summary line gives way to its contents; a top-level one stays.
            let freed = if path.len() > 1 { summary.len() + 1 } else { 0 };
            if used - freed + cost > budget {
                continue;
            }
            if path.len() > 1 {
                lines.remove(&format!("{}/", path.join("/")));
                used -= freed;
            }
            for (key, line) in opened {
                add(&mut lines, &mut used, key, line);
            }
            queue.extend(folder.folders.keys().map(|sub| {
                let mut deeper = path.clone();
                deeper.push(sub.clone());
                deeper
            }));
        }
        // Summary lines are the only keys that end with `/` (an escaped name holds no `/`); a
        // top-level folder left unopened counts too.
        let unopened_top = root.folders.iter().any(|(name, _)| !opened_top(&lines, name));
        let summarised = left_out > 0 || unopened_top || lines.keys().any(|key| key.ends_with('/'));
        let listing = lines.into_values();
        let mut text = if summarised {
            heads.into_iter().chain(listing).collect::<Vec<_>>().join("\n")
        } else {
            listing.collect::<Vec<_>>().join("\n")
        };
        if left_out > 0 {
            let _ = write!(text, "\n[… {left_out} more files at the top level]");
        }
        if summarised {
            let _ = write!(
                text,
                "\n[the repository has {total} files: every top-level folder comes first with its file count, then what fitted; a line `dir/ [N files]` stands for a folder whose files are not listed here: use list_files on it]"
            );
        }
        Self { text, total }
    }

    pub fn render(&self) -> &str {
        &self.text
    }

    /// A tree rendered elsewhere (tests and snapshots).
    pub fn from_rendered(text: &str, total: usize) -> Self {
        Self {
            text: text.to_owned(),
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(paths: &[&str]) -> Folder {
        let mut root = Folder::default();
        for path in paths {
            let parts: Vec<String> = path.split('/').map(str::to_owned).collect();
            root.insert(&parts);
        }
        root
    }

    /// The scan runs off the async threads and gives way to the interrupt; uninterrupted, it
    /// lists what the scan on this thread lists.
    #[tokio::test]
    async fn the_scan_off_the_async_threads_lists_the_same_and_stops_at_the_interrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        for path in ["README.md", "src/lib.rs", "src/a/b.rs"] {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, "x").expect("write");
        }
        let tree = WorkTree::open_for_tests(dir.path());
        let cancel = CancellationToken::new();
        let scanned = FileTree::scan_until(&tree, 1024, &cancel).await.expect("scanned");
        assert_eq!(scanned.render(), FileTree::scan(&tree, 1024).render());
        assert_eq!(scanned.total, 3);
        cancel.cancel();
        assert!(matches!(
            FileTree::scan_until(&tree, 1024, &cancel).await,
            Err(StopReason::Interrupted)
        ));
    }

    #[test]
    fn a_small_repository_is_listed_whole() {
        let tree = FileTree::layout(&folder(&["README.md", "src/lib.rs", "src/a/b.rs"]), 1024);
        assert_eq!(tree.render(), "README.md\nsrc/a/b.rs\nsrc/lib.rs");
        assert_eq!(tree.total, 3);
    }

    #[test]
    fn a_large_repository_names_every_top_level_folder() {
        let mut paths: Vec<String> = (0..3000).map(|n| format!("aaa/file{n:04}.txt")).collect();
        paths.extend((0..10).map(|n| format!("zzz/deep/er/f{n}.rs")));
        paths.push("Cargo.toml".into());
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let tree = FileTree::layout(&folder(&refs), 1024);
        let text = tree.render();
        assert!(text.contains("aaa/ [3000 files]"), "{text}");
        assert!(text.contains("zzz/deep/er/f9.rs"), "small folders are opened: {text}");
        assert!(text.contains("Cargo.toml"));
        assert!(text.len() <= 1024, "{}", text.len());
    }

    /// A repository shaped like a large documentation collection: many top-level folders, each
    /// with second-level folders. Opening the first top-level folders replaced their count lines
    /// with their subfolders, so the model saw no count for them; every top-level folder now
    /// comes first with its count, and deeper levels follow as the budget allows.
    #[test]
    fn every_top_level_folder_keeps_its_count_first_when_deeper_levels_open() {
        let mut paths = Vec::new();
        for language in ["pages", "pages.de", "pages.fr", "pages.ja", "pages.zh"] {
            for platform in ["common", "linux", "osx", "windows"] {
                paths.extend((0..400).map(|n| format!("{language}/{platform}/page{n:03}.md")));
            }
        }
        paths.extend(["README.md".to_owned(), "scripts/build.py".to_owned()]);
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let tree = FileTree::layout(&folder(&refs), 1024);
        let text = tree.render();
        let lines: Vec<&str> = text.lines().collect();
        let expected_first = [
            "pages/ [1600 files]",
            "pages.de/ [1600 files]",
            "pages.fr/ [1600 files]",
            "pages.ja/ [1600 files]",
            "pages.zh/ [1600 files]",
            "scripts/ [1 files]",
        ];
        assert_eq!(lines.get(..expected_first.len()), Some(&expected_first[..]), "{text}");
        assert!(
            text.contains("pages/common/ [400 files]"),
            "deeper levels follow: {text}"
        );
        assert!(text.contains("README.md"), "{text}");
        assert!(text.len() <= 1024, "{}", text.len());
    }

    #[test]
    fn a_small_window_gets_a_smaller_tree_and_a_large_one_the_default() {
        assert_eq!(tree_budget(4_096), 2 * 1024);
        assert_eq!(tree_budget(8_192), 4 * 1024);
        assert_eq!(tree_budget(32_768), DEFAULT_TREE_BUDGET);
        assert_eq!(tree_budget(1_047_576), DEFAULT_TREE_BUDGET);
        assert_eq!(tree_budget(1_024), 2 * 1024);
    }
}
