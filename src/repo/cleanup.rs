//! Every temporary directory upkeep makes, and its removal on every way out of the process.
//!
//! A [`TempRoot`] removes its directory when dropped, which covers returns, errors and
//! unwinding. Two exits skip destructors: blocking git work that the run stopped waiting for
//! (it still holds its clone while it winds down), and the second interrupt, which exits the
//! process at once. For those, every live directory is also in a process-wide registry, and
//! [`settle`] (called by the run before it reports, by `main` before it exits, and by the
//! second-interrupt path before `exit(130)`) waits briefly for the owners to finish, then
//! removes whatever is left itself.
//!
//! Guarantees: a directory leaves the registry only once it is gone from disk, so "removed" is
//! said only when it is true; [`settle`] returns what it could not remove.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The mode of every directory upkeep makes for itself: its owner's only.
pub const PRIVATE: u32 = 0o700;

/// Makes the directory `path` with mode [`PRIVATE`] (not the umask's).
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(PRIVATE).create(path)
}

/// How often [`settle`] looks whether the owners have removed their directories.
const POLL: Duration = Duration::from_millis(20);

/// A registered directory: its path and the scope it was made in.
struct Entry {
    path: PathBuf,
    scope: u64,
}

static LIVE: Mutex<BTreeMap<u64, Entry>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The directories one run makes, so that the run can wait for its own (and not another run's
/// in the same process) before it says they are gone. The default scope is the process's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope(u64);

impl Scope {
    pub fn new() -> Self {
        Self(NEXT_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// [`settle`] for this scope's directories only.
    pub fn settle(&self, grace: Duration) -> Vec<(PathBuf, io::Error)> {
        settle_matching(grace, |entry| entry.scope == self.0)
    }
}

fn live() -> MutexGuard<'static, BTreeMap<u64, Entry>> {
    // A panic while the lock was held cannot leave the map half-updated (each update is one
    // insert or remove), so a poisoned lock is still good.
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A private temporary directory (mode 0700, under `TMPDIR`), removed when dropped or, at the
/// latest, by [`settle`].
#[derive(Debug)]
pub struct TempRoot {
    id: u64,
    path: PathBuf,
}

impl TempRoot {
    /// Creates `<TMPDIR>/<prefix>XXXXXX`, registered before this returns. The path is canonical
    /// (symlinks in `TMPDIR` resolved), so paths under it compare as the kernel sees them.
    pub fn create(prefix: &str, scope: &Scope) -> io::Result<Self> {
        // Held while the directory is made, so that `settle` on another thread cannot miss it.
        let mut live = live();
        // Until it is registered, `TempDir` removes the directory on the error paths.
        // Private from the start: other users of the machine must never see a clone, not even
        // for the moment between creation and a later chmod.
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(PRIVATE))
            .tempdir()?;
        let path = dir.path().canonicalize()?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        live.insert(
            id,
            Entry {
                path: path.clone(),
                scope: scope.0,
            },
        );
        let _owned_by_self = dir.keep();
        Ok(Self { id, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        match remove(&self.path) {
            Ok(()) => {
                live().remove(&self.id);
            }
            // Left registered: `settle` tries again and reports it if it stays.
            Err(error) => tracing::warn!("could not remove {}: {error}", self.path.display()),
        }
    }
}

/// Removes a directory tree; one already gone is fine.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Waits up to `grace` for every registered directory to be removed by its owner, then removes
/// the ones left. Returns each directory that is still on disk afterwards, with the reason.
pub fn settle(grace: Duration) -> Vec<(PathBuf, io::Error)> {
    settle_matching(grace, |_| true)
}

fn settle_matching(grace: Duration, matching: impl Fn(&Entry) -> bool) -> Vec<(PathBuf, io::Error)> {
    let left = || -> Vec<(u64, PathBuf)> {
        live()
            .iter()
            .filter(|(_, entry)| matching(entry))
            .map(|(id, entry)| (*id, entry.path.clone()))
            .collect()
    };
    let deadline = Instant::now() + grace;
    while !left().is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let mut failed = Vec::new();
    for (id, path) in left() {
        match remove(&path) {
            Ok(()) => {
                live().remove(&id);
            }
            Err(error) => failed.push((path, error)),
        }
    }
    failed
}

/// How many temporary directories are on disk now.
pub fn live_count() -> usize {
    live().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_root_is_gone_and_unregistered() {
        let root = TempRoot::create("upkeep-test-", &Scope::new()).expect("create");
        let path = root.path().to_owned();
        std::fs::create_dir_all(path.join("a/b")).expect("mkdir");
        assert!(live().values().any(|entry| entry.path == path));
        drop(root);
        assert!(!path.exists());
        assert!(!live().values().any(|entry| entry.path == path));
    }

    #[test]
    fn settle_removes_a_root_whose_owner_never_finishes_and_only_in_its_scope() {
        let (scope, other_scope) = (Scope::new(), Scope::new());
        let root = TempRoot::create("upkeep-test-", &scope).expect("create");
        let other = TempRoot::create("upkeep-test-", &other_scope).expect("create");
        let path = root.path().to_owned();
        std::fs::write(path.join("file"), "x").expect("write");
        // An owner stuck forever: its destructor never runs.
        std::mem::forget(root);
        let failed = scope.settle(Duration::from_millis(50));
        assert!(failed.is_empty(), "{failed:?}");
        assert!(!path.exists());
        assert!(!live().values().any(|entry| entry.path == path));
        assert!(other.path().exists(), "another scope's directory stays");
    }
}
