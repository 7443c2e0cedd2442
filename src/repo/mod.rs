//! The only gate to the repository: its files, the temporary clone, its git history and the
//! transports that reach the remote.
//!
//! - [`fs`] and [`walk`]: the work tree as a directory capability; every read, write and
//!   listing of repository files goes through them; [`text_encoding`] turns a file's bytes
//!   into text and back in the file's own encoding, for every file tool; `blocking.rs` runs
//!   work on the tree off the async threads, stopped by the interrupt between files.
//! - [`git`]: the [`Workspace`] (clone, commit, diff, push) with its git directory outside the
//!   work tree; `refresh.rs` (continuous mode's fresh copy in place), `checkout.rs` and
//!   `fetch.rs` are its parts.
//! - `local_clone.rs`: a local path cloned by sharing its objects read-only, shallow at
//!   `--depth`, instead of repacking its history.
//! - [`source`]: the operator's local repository that the `local` forge writes bot branches to;
//!   [`questions`]: the questions the bot asked there, kept in its git config.
//! - `continuation.rs`: a cycle that goes on from a bot branch the remote has (a review
//!   follow-up) and pushes only on top of it.
//! - [`rebase`]: a bot branch rebased onto its moved base when only the bot committed to it,
//!   pushed with a lease.
//! - [`transport`]: git over HTTP(S) with the token pinned to the operator URL's origin;
//!   `transfer.rs` holds what one operation may do (token, origin, stop, stall timeout) and
//!   `waiting.rs` gives up its waits on an interrupt, the deadline or a stall.
//! - [`setup`]: libgit2 made blind to user and system git configuration and given upkeep's
//!   transport, once per process; `with_transfer` runs an operation with its transfer.
//! - [`cleanup`]: every temporary directory, removed on every way out.
//! - [`stop`]: what ends git work early (interrupt, `--timeout`) and the stall timeout.
//!
//! `docs/git.md` describes the git side for users, `docs/safety.md` the whole boundary.

mod blocking;
mod changes;
mod checkout;
pub mod cleanup;
mod continuation;
mod error;
mod export;
mod fetch;
pub(crate) mod fs;
mod gate_error;
pub(crate) mod git;
mod layout;
mod local_clone;
pub(crate) mod path;
mod publish;
pub(crate) mod questions;
pub mod rebase;
mod refresh;
pub(crate) mod setup;
pub(crate) mod source;
pub(crate) mod stop;
pub(crate) mod text_encoding;
mod transfer;
pub(crate) mod transport;
mod waiting;
pub(crate) mod walk;

pub use changes::UnsavedChanges;
pub(crate) use fs::{EntryKind, RepoPath};
pub use fs::{GateError, WorkTree, Written};
pub use git::{BOT_BRANCH_PREFIX, CloneRequest, GitAuth, Identity, Workspace, WorkspaceError, patch_text};
pub use stop::{Stop, StopReason};
