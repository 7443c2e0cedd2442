//! What a command may read: the system, the toolchains the operator installed, and its own
//! clone and scratch directory. Nothing else of the machine, and above all nothing of its
//! temporary space, where other runs' clones (a fleet's other repositories) live.
//!
//! Why an allowlist: Landlock only grants, it cannot carve an exception out of a grant, so
//! reading "everything but the temporary directories" cannot be said. Instead a command gets
//! read access to a fixed list of system directories, to the directories its toolchains live
//! in (every `PATH` entry, rustup's and cargo's homes), and to what upkeep names for it (its
//! clone's git directory); its work tree and scratch directory are readable because they are
//! writable. Every directory of the list that is, contains, or lies in a temporary directory
//! (`/tmp`, `/var/tmp`, `/dev/shm`, upkeep's `TMPDIR`) is left out, so that a `PATH` entry
//! such as `/tmp/bin` or `/` cannot open them again.
//!
//! The list is computed in upkeep's process, from the operator's environment, never from the
//! command's (which a repository's declared tool can set).
//!
//! `docs/commands.md` ("What a command can read") is the user's view of this.

use std::path::{Path, PathBuf};

/// System directories every command may read (and run programs from), where they exist.
/// `/proc` is the command's own where a mount namespace can be made (see `namespaces`); `/sys`
/// holds what runtimes read to size themselves (CPUs, cgroup limits);
/// `/run/systemd/resolve` is where `/etc/resolv.conf` points on many systems, for commands
/// allowed the network.
pub const SYSTEM_DIRECTORIES: [&str; 13] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/run/systemd/resolve",
    "/proc",
    "/sys",
];

/// Devices a command may read and write: the ones countless tools open. Not `/dev` as a whole
/// (`/dev/shm` is shared temporary space).
pub const DEVICES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// The machine's temporary directories, besides upkeep's own `TMPDIR`.
const TEMPORARY_DIRECTORIES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// What of cargo's home a build needs: programs, the downloaded crates, git dependencies and
/// the configuration. Not `credentials.toml`, which holds registry tokens.
const CARGO_HOME_PARTS: [&str; 5] = ["bin", "registry", "git", "config.toml", "config"];

/// The toolchain homes of upkeep's environment, as `(variable, directory)`, for the commands'
/// environment (their `HOME` is their scratch directory, so rustup's proxies and cargo must be
/// told where the operator's toolchains are). Only the ones that exist.
pub fn toolchain_homes() -> Vec<(&'static str, PathBuf)> {
    toolchain_homes_from(|name| std::env::var_os(name))
}

fn toolchain_homes_from(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<(&'static str, PathBuf)> {
    let home = lookup("HOME").map(PathBuf::from).filter(|home| home.is_absolute());
    [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")]
        .into_iter()
        .filter_map(|(name, default)| {
            let dir = lookup(name)
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .or_else(|| home.as_ref().map(|home| home.join(default)))?;
            dir.is_dir().then_some((name, dir))
        })
        .collect()
}

/// Everything a command may read besides its writable directories: the system, the
/// toolchains, and `own` (its clone's git directory), with nothing that touches a temporary
/// directory other than `own`.
pub fn readable_paths(own: &[PathBuf]) -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut candidates: Vec<PathBuf> = SYSTEM_DIRECTORIES.iter().map(PathBuf::from).collect();
    candidates.extend(std::env::split_paths(&path));
    for (name, dir) in toolchain_homes() {
        if name == "CARGO_HOME" {
            candidates.extend(CARGO_HOME_PARTS.iter().map(|part| dir.join(part)));
        } else {
            candidates.push(dir);
        }
    }
    let mut temporary: Vec<PathBuf> = TEMPORARY_DIRECTORIES.iter().map(PathBuf::from).collect();
    temporary.push(std::env::temp_dir());
    let mut readable = allowed(candidates, &temporary);
    readable.extend(DEVICES.iter().map(PathBuf::from).filter(|device| device.exists()));
    readable.extend(own.iter().cloned());
    readable
}

/// The candidates that exist, absolute and canonical, without any that is, contains or lies in
/// one of `temporary`, and without duplicates.
fn allowed(candidates: Vec<PathBuf>, temporary: &[PathBuf]) -> Vec<PathBuf> {
    let temporary: Vec<PathBuf> = temporary
        .iter()
        .flat_map(|dir| [dir.clone(), dir.canonicalize().unwrap_or_else(|_| dir.clone())])
        .collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        if !candidate.is_absolute() {
            continue;
        }
        let Ok(real) = candidate.canonicalize() else {
            continue;
        };
        let touches_temporary = |path: &Path| {
            temporary
                .iter()
                .any(|temp| path.starts_with(temp) || temp.starts_with(path))
        };
        if touches_temporary(&candidate) || touches_temporary(&real) || out.contains(&real) {
            continue;
        }
        out.push(real);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_that_opens_a_temporary_directory_is_readable() {
        let temp = tempfile::tempdir().expect("tempdir");
        let inside = temp.path().join("bin");
        std::fs::create_dir(&inside).expect("mkdir");
        let candidates = vec![
            PathBuf::from("/"),
            PathBuf::from("/usr"),
            inside,
            temp.path().to_owned(),
            PathBuf::from("relative/bin"),
            PathBuf::from("/no/such/directory"),
            PathBuf::from("/usr"),
        ];
        let got = allowed(candidates, &[temp.path().to_owned()]);
        assert_eq!(got, [PathBuf::from("/usr")]);
    }

    #[test]
    fn toolchain_homes_default_to_home_and_exist() {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(home.path().join(".rustup")).expect("mkdir");
        let lookup = |name: &str| (name == "HOME").then(|| home.path().as_os_str().to_owned());
        assert_eq!(
            toolchain_homes_from(lookup),
            [("RUSTUP_HOME", home.path().join(".rustup"))]
        );
    }
}
