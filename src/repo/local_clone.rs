//! Cloning a local repository at git's speed: the clone borrows the source's objects read-only
//! instead of receiving a pack of them.
//!
//! Why: libgit2's local transport makes a pack of everything the clone lacks, object by object
//! with fresh delta compression, and cannot make shallow fetches; for a long history that costs
//! seconds to minutes and hundreds of megabytes before the first model call. The objects are on
//! this disk already, so the clone's git directory names the source's object directory in
//! `objects/info/alternates` (what `git clone --shared` does), and `--depth` is honoured by
//! writing the clone's `shallow` file, as a shallow fetch would.
//!
//! Guarantees:
//! - Nothing is ever written into the source's objects through the clone: libgit2 writes new
//!   objects (commits, fetched packs) only into the clone's own object directory, never into an
//!   alternate, and commands cannot write either (the clone's git directory is upkeep's; the
//!   source is outside what the sandbox lets them write). The bot branch reaches the source only
//!   through [`super::source`]'s publishing, as before. (libgit2, like git, refreshes the
//!   modification time of a shared object the clone writes again, e.g. an unchanged tree of a
//!   commit, so that a `gc` in the source does not prune it meanwhile; contents never change.)
//! - The source's object directory is found the way [`super::source::LocalSource`] opens the
//!   source: a `commondir` other than the one a linked work tree has is refused. Only object
//!   directories are read through the alternates (the source's own alternates included, as git
//!   reads them); no configuration, hook or ref of the source reaches the clone this way.
//! - The history the clone shows is cut at `--depth` commits as a shallow fetch cuts it, so
//!   commands see the same history for a local path as for a URL.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use git2::{Oid, Repository};

use super::error::WorkspaceError;
use super::source::LocalSource;

/// Makes the clone at `git_dir` read objects from the local repository at `source`: its object
/// directory becomes the clone's alternate. Call before the clone is opened for the fetch.
pub(super) fn share_objects(git_dir: &Path, source: &Path) -> Result<(), WorkspaceError> {
    let repo = LocalSource::new(source.to_path_buf()).open()?;
    let objects = repo.commondir().join("objects").canonicalize()?;
    let unsafe_source = |reason: String| WorkspaceError::UnsafeSource {
        path: source.to_path_buf(),
        reason,
    };
    if !objects.is_dir() {
        return Err(unsafe_source(format!("{} is not a directory", objects.display())));
    }
    let line = objects.as_os_str().as_bytes();
    // One path per line, and git reads a line starting with `"` as a quoted path.
    if line.contains(&b'\n') || line.contains(&b'\r') || line.first() == Some(&b'"') {
        return Err(unsafe_source(format!(
            "its object directory {} cannot be named in an alternates file",
            objects.display()
        )));
    }
    let info = git_dir.join("objects").join("info");
    std::fs::create_dir_all(&info)?;
    let mut file = std::fs::File::create(info.join("alternates"))?;
    file.write_all(line)?;
    file.write_all(b"\n")?;
    Ok(())
}

impl super::Workspace {
    /// The object directories this clone borrows from a local source (its alternates file, which
    /// only `share_objects` writes): commands must be able to read them for `git log` and
    /// `git show` to work, read-only like the clone's own git directory. Empty for a clone of a
    /// URL. The source's own alternates are not followed here.
    pub fn shared_objects(&self) -> Vec<std::path::PathBuf> {
        let alternates = self.git_dir().join("objects").join("info").join("alternates");
        std::fs::read(alternates)
            .map(|text| {
                text.split(|byte| *byte == b'\n')
                    .filter(|line| !line.is_empty())
                    .map(|line| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(line)))
                    .filter(|path| path.is_absolute())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// After the clone learned that the source's `tip` is `branch`'s tip (its objects are shared,
/// nothing to download): cuts the clone's history at `depth` commits from `tip` (0 = none), and
/// adds the advertised tags that point into that history, as a fetch that follows tags would.
pub(super) fn adopt(repo: &Repository, heads: &[(String, Oid)], tip: Oid, depth: u32) -> Result<(), WorkspaceError> {
    let tags = tags_of(heads);
    let history = walk(repo, tip, depth, !tags.is_empty())?;
    if !history.shallow.is_empty() {
        add_shallow(repo.path(), &history.shallow)?;
    }
    for (name, (target, peeled)) in tags {
        if history.commits.contains(&peeled) {
            match repo.reference(&name, target, false, "upkeep: tag in the fetched history") {
                Err(error) if error.code() == git2::ErrorCode::Exists => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}

/// Advertised tags: name, the object the ref points at, and the commit it peels to (the
/// advertisement's `^{}` entry, or the object itself for a lightweight tag).
fn tags_of(heads: &[(String, Oid)]) -> HashMap<String, (Oid, Oid)> {
    let mut tags: HashMap<String, (Oid, Oid)> = HashMap::new();
    for (name, oid) in heads {
        if !name.starts_with("refs/tags/") {
            continue;
        }
        match name.strip_suffix("^{}") {
            Some(tag) => {
                if let Some(entry) = tags.get_mut(tag) {
                    entry.1 = *oid;
                } else {
                    tags.insert(tag.to_owned(), (Oid::ZERO_SHA1, *oid));
                }
            }
            None => {
                let entry = tags.entry(name.clone()).or_insert((*oid, *oid));
                entry.0 = *oid;
            }
        }
    }
    tags.retain(|_, (target, _)| !target.is_zero());
    tags
}

/// The commits within `depth` generations of a tip, and the ones the history is cut at.
struct History {
    /// Every commit reached (only collected when asked: for tags).
    commits: HashSet<Oid>,
    /// Commits `depth - 1` generations from the tip that have parents.
    shallow: Vec<Oid>,
}

/// Walks `depth` generations from `tip` (0 = all of them), breadth first so that each commit is
/// first reached by its shortest path, as a shallow fetch counts depth.
fn walk(repo: &Repository, tip: Oid, depth: u32, collect: bool) -> Result<History, WorkspaceError> {
    let mut history = History {
        commits: HashSet::new(),
        shallow: Vec::new(),
    };
    if depth == 0 && !collect {
        return Ok(history);
    }
    let mut seen = HashSet::from([tip]);
    let mut queue = VecDeque::from([(tip, 1u32)]);
    while let Some((oid, generation)) = queue.pop_front() {
        let commit = repo.find_commit(oid)?;
        history.commits.insert(oid);
        if depth > 0 && generation >= depth {
            if commit.parent_count() > 0 {
                history.shallow.push(oid);
            }
            continue;
        }
        for parent in commit.parent_ids() {
            if seen.insert(parent) {
                queue.push_back((parent, generation + 1));
            }
        }
    }
    Ok(history)
}

/// Adds `commits` to the clone's `shallow` file (what is there stays, as a fetch keeps it),
/// replacing the file in one rename.
fn add_shallow(git_dir: &Path, commits: &[Oid]) -> Result<(), WorkspaceError> {
    let path = git_dir.join("shallow");
    let mut all: Vec<Oid> = match std::fs::read_to_string(&path) {
        Ok(text) => text
            .lines()
            .filter_map(|line| Oid::from_str(line.trim()).ok())
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    all.extend_from_slice(commits);
    all.sort();
    all.dedup();
    let text: String = all.iter().map(|oid| format!("{oid}\n")).collect();
    let staged = git_dir.join("shallow.upkeep");
    std::fs::write(&staged, text)?;
    std::fs::rename(&staged, &path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(digit: char) -> Oid {
        Oid::from_str(&digit.to_string().repeat(40)).expect("oid")
    }

    #[test]
    fn annotated_tags_peel_through_their_advertised_entry() {
        let heads = vec![
            ("refs/heads/main".to_owned(), oid('1')),
            ("refs/tags/v1".to_owned(), oid('2')),
            ("refs/tags/v1^{}".to_owned(), oid('1')),
            ("refs/tags/light".to_owned(), oid('3')),
            ("refs/tags/orphan^{}".to_owned(), oid('4')),
        ];
        let tags = tags_of(&heads);
        assert_eq!(tags.get("refs/tags/v1"), Some(&(oid('2'), oid('1'))));
        assert_eq!(tags.get("refs/tags/light"), Some(&(oid('3'), oid('3'))));
        assert!(
            !tags.contains_key("refs/tags/orphan"),
            "a peeled entry alone names no tag"
        );
        assert_eq!(tags.len(), 2);
    }

    #[test]
    fn the_history_is_cut_at_the_depth_counted_along_the_shortest_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let signature = git2::Signature::now("t", "t@example.com").expect("signature");
        let tree = repo
            .find_tree(repo.treebuilder(None).expect("builder").write().expect("tree"))
            .expect("tree");
        let mut parents: Vec<git2::Commit<'_>> = Vec::new();
        for n in 0..5 {
            let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
            let id = repo
                .commit(None, &signature, &signature, &format!("c{n}"), &tree, &refs)
                .expect("commit");
            parents = vec![repo.find_commit(id).expect("commit")];
        }
        let tip = parents[0].id();
        let one = walk(&repo, tip, 1, true).expect("walk");
        assert_eq!(one.shallow, vec![tip]);
        assert_eq!(one.commits.len(), 1);
        let three = walk(&repo, tip, 3, true).expect("walk");
        assert_eq!(three.commits.len(), 3);
        assert_eq!(three.shallow.len(), 1);
        let all = walk(&repo, tip, 0, true).expect("walk");
        assert_eq!((all.commits.len(), all.shallow.len()), (5, 0));
        let deeper = walk(&repo, tip, 9, false).expect("walk");
        assert!(deeper.shallow.is_empty(), "the root has no parents to cut");

        add_shallow(repo.path(), &[tip]).expect("shallow");
        add_shallow(repo.path(), &three.shallow).expect("shallow");
        let text = std::fs::read_to_string(repo.path().join("shallow")).expect("read");
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}
