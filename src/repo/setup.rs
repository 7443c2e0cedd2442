//! The process-wide libgit2 settings upkeep depends on, made once before any git operation.
//!
//! Why: libgit2 reads the user's and the system's git configuration (`~/.gitconfig`,
//! `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`) and the attributes and ignore files next to
//! them. Those can rewrite the URL a fetch or push goes to (`url.<base>.insteadOf`), add
//! attributes that change what a checkout writes, and more. upkeep's git operations must depend
//! only on what the operator gave on the command line, so every such search path is emptied:
//! the only configuration libgit2 ever sees is the one in the clone's own git directory, which
//! upkeep writes and no command may change.
//!
//! It also installs upkeep's own HTTP transport ([`super::transport`]) in place of libgit2's, and
//! [`with_transfer`] runs a fetch or push with that transport governed by the operation's
//! [`Transfer`]: setting up first is what guarantees the transport an operation gets is upkeep's.
//!
//! Guarantees: [`setup`] runs its body exactly once per process, and every libgit2 operation in
//! upkeep happens after it returned (each entry point of [`crate::repo`] calls it first). When
//! it fails, every git operation fails with the same error instead of running unprotected.

use std::sync::{Arc, OnceLock};

use git2::{ConfigLevel, Error, ErrorClass, ErrorCode};

use super::transfer::{Transfer, scoped};

/// Configuration levels whose files libgit2 looks up through a search path.
const OUTSIDE_LEVELS: [ConfigLevel; 4] = [
    ConfigLevel::ProgramData,
    ConfigLevel::System,
    ConfigLevel::XDG,
    ConfigLevel::Global,
];

/// Makes libgit2 ignore every configuration outside the repository and installs upkeep's HTTP
/// transport ([`super::transport`]). Idempotent and cheap after the first call; blocks while
/// another thread runs the first call.
pub(crate) fn setup() -> Result<(), Error> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        // libgit2's object cache keeps every tree and commit read, for lookups upkeep never
        // repeats; on a 100k-file clone that is about 8 MB of peak memory.
        git2::opts::enable_caching(false);
        configure_once().map_err(|error| error.message().to_owned())
    })
    .clone()
    .map_err(|message| Error::new(ErrorCode::GenericError, ErrorClass::Config, message))
}

/// Opens a repository for reading (the operator's `--repo`, the demo's sample) after [`setup`],
/// so that no code path reaches libgit2 before it is blind to user and system configuration.
pub(crate) fn open_repository(path: &std::path::Path) -> Result<git2::Repository, Error> {
    setup()?;
    git2::Repository::open(path)
}

/// Opens the repository that `path` is in: the path itself, or the nearest enclosing work tree
/// or git directory (git's own discovery), after [`setup`].
pub(crate) fn discover_repository(path: &std::path::Path) -> Result<git2::Repository, Error> {
    setup()?;
    git2::Repository::discover(path)
}

/// Runs `operation` (a libgit2 fetch, clone or push) after [`setup`], with upkeep's transport
/// governed by `transfer` for the HTTP(S) requests it makes; the transfer is forgotten again
/// afterwards, even on a panic. Errs only if libgit2 cannot be set up; the operation's own
/// result is returned as it is.
pub(crate) fn with_transfer<T>(transfer: &Arc<Transfer>, operation: impl FnOnce() -> T) -> Result<T, Error> {
    setup()?;
    Ok(scoped(transfer, operation))
}

#[expect(
    unsafe_code,
    reason = "git2 offers no safe way to set search paths or register a transport"
)]
fn configure_once() -> Result<(), Error> {
    for level in OUTSIDE_LEVELS {
        // SAFETY: `set_search_path` replaces a global buffer that libgit2 reads whenever it loads
        // configuration, attributes or ignore files; it must not run while another thread does
        // that. It runs only here, inside `setup`'s `OnceLock` initialisation, and every libgit2
        // operation upkeep performs goes through `setup` first: any other thread that is about
        // to use libgit2 is blocked in `setup` until this initialisation has returned. An empty
        // path is a list of no directories: no file is found at that level.
        unsafe { git2::opts::set_search_path(level, "")? };
    }
    for scheme in ["http", "https"] {
        // SAFETY: `git2::transport::register` must not run while libgit2 creates a transport on
        // another thread. It runs only here, under the same `OnceLock` as above, and every
        // libgit2 operation that may create a transport (clone, fetch, push, local ones
        // included) calls `setup` first, so any such operation on another thread is blocked
        // until the registration is done.
        unsafe { git2::transport::register(scheme, super::transport::factory)? };
    }
    Ok(())
}
