//! `upkeep init`: sets a repository up for upkeep in one command.
//!
//! It writes `.upkeep.toml` (every key, commented, with its default) and
//! `.github/workflows/upkeep.yml` (work an issue when it is labelled `upkeep`, or a task started
//! by hand), the same files the README describes, so a new user does not copy YAML from a web
//! page. It never overwrites: when either file exists it writes nothing and exits 2 naming the
//! file, because both are files people edit and a second `init` must not undo their edits.
//!
//! It writes through a directory handle on the repository's root (cap-std), opening `.github`
//! and `.github/workflows` one level at a time without following symlinks: a repository can
//! commit `.github` as a symlink to anywhere, and init must not write there. It writes only at
//! the root of a git work tree (exit 2 elsewhere), where GitHub and upkeep read the files.
//! The templates are embedded at build time from `templates/`.
//!
//! `upkeep init --fleet` writes `.github/workflows/upkeep-fleet.yml` instead: the workflow that
//! runs `upkeep fleet` over an organisation as a matrix of shards (DESIGN section 13), for the
//! repository that operates the fleet.

use std::io::Write;
use std::path::{Path, PathBuf};

use cap_fs_ext::DirExt as _;
use cap_std::fs::Dir;

use crate::cli::InitArgs;
use crate::config::REPO_CONFIG_FILE;
use crate::exit::ExitStatus;

/// `.upkeep.toml` as `init` writes it.
pub const CONFIG_TEMPLATE: &str = include_str!("../templates/upkeep.toml");
/// The workflow as `init` writes it.
pub const WORKFLOW_TEMPLATE: &str = include_str!("../templates/upkeep.yml");
/// Where `init` writes the workflow, relative to the repository.
pub const WORKFLOW_FILE: &str = ".github/workflows/upkeep.yml";
/// The workflow `init --fleet` writes.
pub const FLEET_WORKFLOW_TEMPLATE: &str = include_str!("../templates/upkeep-fleet.yml");
/// Where `init --fleet` writes it.
pub const FLEET_WORKFLOW_FILE: &str = ".github/workflows/upkeep-fleet.yml";

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("{} already exists; nothing was written (edit it, or remove it and run upkeep init again)", .0.display())]
    Exists(PathBuf),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is a symlink; nothing was written (upkeep init writes only into real directories of the repository)", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not the root of a git work tree (it has no .git); nothing was written (run upkeep init at the repository's top level)", .0.display())]
    NotAWorkTreeRoot(PathBuf),
    #[error("writing {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl InitError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            InitError::Exists(_)
            | InitError::NotADirectory(_)
            | InitError::Symlink(_)
            | InitError::NotAWorkTreeRoot(_) => ExitStatus::Usage,
            InitError::Io { .. } => ExitStatus::Failure,
        }
    }
}

pub fn run(args: &InitArgs) -> ExitStatus {
    let (result, next) = if args.fleet {
        (
            init_fleet(&args.repo_dir),
            "\nNext: add the secrets UPKEEP_FLEET_TOKEN (a token that can work the fleet's repositories)\n\
             and OPENAI_API_KEY to the `upkeep` environment (Settings > Environments), put the topic\n\
             `upkeep` on the repositories to work, and commit the file. See upkeep's docs/fleet.md.",
        )
    } else {
        (
            init(&args.repo_dir),
            "\nNext: add your model provider's API key as the secret OPENAI_API_KEY of the `upkeep`\n\
             environment (Settings > Environments; or as a repository secret), allow GitHub\n\
             Actions to create pull requests (Settings > Actions > General), create the `upkeep`\n\
             label, and commit both files. Then label an issue `upkeep`.",
        )
    };
    match result {
        Ok(written) => {
            let mut stdout = std::io::stdout().lock();
            for path in &written {
                let _ = writeln!(stdout, "created {}", path.display());
            }
            let _ = writeln!(stdout, "{next}");
            ExitStatus::Done
        }
        Err(error) => {
            eprintln!("upkeep init: {error}");
            error.exit_status()
        }
    }
}

/// Writes both files into `dir`; returns their paths. Checks both before writing either, and
/// creates each with `create_new`, so a file that appears meanwhile is not overwritten either.
pub fn init(dir: &Path) -> Result<Vec<PathBuf>, InitError> {
    write_files(
        dir,
        &[(REPO_CONFIG_FILE, CONFIG_TEMPLATE), (WORKFLOW_FILE, WORKFLOW_TEMPLATE)],
    )
}

/// Writes the fleet workflow into `dir`, on the same terms as [`init`].
pub fn init_fleet(dir: &Path) -> Result<Vec<PathBuf>, InitError> {
    write_files(dir, &[(FLEET_WORKFLOW_FILE, FLEET_WORKFLOW_TEMPLATE)])
}

fn write_files(dir: &Path, files: &[(&str, &str)]) -> Result<Vec<PathBuf>, InitError> {
    let root = open_work_tree_root(dir)?;
    // Every file checked before any is written: all or nothing.
    for (file, _) in files {
        let (parents, name) = split(file);
        if let Some(parent) = open_parents(&root, dir, &parents, Missing::Stop)? {
            if parent.symlink_metadata(name).is_ok() {
                return Err(InitError::Exists(dir.join(file)));
            }
        }
    }
    let mut written: Vec<(Dir, &str, PathBuf)> = Vec::new();
    for (file, content) in files {
        let (parents, name) = split(file);
        let path = dir.join(file);
        let result = open_parents(&root, dir, &parents, Missing::Create).and_then(|parent| {
            let parent = parent.ok_or_else(|| InitError::NotADirectory(path.clone()))?;
            write_new(&parent, name, &path, content)?;
            Ok(parent)
        });
        match result {
            Ok(parent) => written.push((parent, name, path)),
            Err(error) => {
                // All or nothing: take back what this run wrote, through the same handles.
                for (parent, name, _) in &written {
                    let _ = parent.remove_file(name);
                }
                return Err(error);
            }
        }
    }
    Ok(written.into_iter().map(|(_, _, path)| path).collect())
}

/// `.github/workflows/upkeep.yml` as its directories and its file name.
fn split(file: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = file.split('/').collect();
    let name = parts.pop().unwrap_or(file);
    (parts, name)
}

/// A handle on `dir`, the root of a git work tree: it holds `.git`, a directory with a `HEAD`
/// (a clone) or a file that names the git directory (`gitdir: ...`, a linked worktree or a
/// submodule). A subfolder of a work tree or a plain directory is refused: a workflow there is
/// one GitHub never reads, and a `.upkeep.toml` there one upkeep never reads.
fn open_work_tree_root(dir: &Path) -> Result<Dir, InitError> {
    if !dir.is_dir() {
        return Err(InitError::NotADirectory(dir.to_path_buf()));
    }
    let root = Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(|source| InitError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let is_root = match root.symlink_metadata(".git") {
        Ok(meta) if meta.is_dir() => root
            .open_dir_nofollow(".git")
            .and_then(|git| git.symlink_metadata("HEAD"))
            .is_ok_and(|head| head.is_file()),
        Ok(meta) if meta.is_file() => root
            .read_to_string(".git")
            .is_ok_and(|text| text.starts_with("gitdir: ")),
        _ => false,
    };
    if !is_root {
        return Err(InitError::NotAWorkTreeRoot(dir.to_path_buf()));
    }
    Ok(root)
}

/// What [`open_parents`] does with a directory that does not exist yet.
#[derive(Clone, Copy)]
enum Missing {
    /// Nothing to check inside it: `Ok(None)`.
    Stop,
    Create,
}

/// The directory `parents` (`[".github", "workflows"]`) below `root`, opened one level at a
/// time without following a symlink: a symlinked ancestor is refused wherever it points, and
/// a symlink swapped in between the check and the open fails the open.
fn open_parents(root: &Dir, dir: &Path, parents: &[&str], missing: Missing) -> Result<Option<Dir>, InitError> {
    let mut current = root.try_clone().map_err(|source| InitError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut shown = dir.to_path_buf();
    for part in parents {
        shown.push(part);
        let io = |source| InitError::Io {
            path: shown.clone(),
            source,
        };
        match current.symlink_metadata(part) {
            Ok(meta) if meta.is_symlink() => return Err(InitError::Symlink(shown)),
            Ok(meta) if !meta.is_dir() => return Err(InitError::NotADirectory(shown)),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => match missing {
                Missing::Stop => return Ok(None),
                Missing::Create => current.create_dir(part).map_err(io)?,
            },
            Err(error) => return Err(io(error)),
        }
        current = match current.open_dir_nofollow(part) {
            Ok(next) => next,
            // ELOOP or ENOTDIR: it became a symlink after the check.
            Err(error)
                if [nix::errno::Errno::ELOOP, nix::errno::Errno::ENOTDIR]
                    .iter()
                    .any(|errno| error.raw_os_error() == Some(*errno as i32)) =>
            {
                return Err(InitError::Symlink(shown));
            }
            Err(error) => return Err(io(error)),
        };
    }
    Ok(Some(current))
}

/// Creates `name` in `parent` with `create_new` (`O_EXCL`: never an existing file, never
/// through a symlink), so a file that appears meanwhile is not overwritten either.
fn write_new(parent: &Dir, name: &str, path: &Path, content: &str) -> Result<(), InitError> {
    let io = |source| InitError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let mut file = match parent.open_with(name, &options) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InitError::Exists(path.to_path_buf()));
        }
        Err(error) => return Err(io(error)),
    };
    file.write_all(content.as_bytes()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn the_config_template_parses_as_written_and_with_every_key_uncommented() {
        let parsed = FileConfig::parse_repository(CONFIG_TEMPLATE).expect("template parses");
        assert!(parsed.label.is_none(), "everything is commented out: defaults apply");
        // Uncommenting each `# key = value` line must give a valid file naming every key.
        let uncommented: String = CONFIG_TEMPLATE
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest) if rest.split_once(" = ").is_some_and(|(k, _)| !k.contains(' ')) => rest,
                _ => line,
            })
            .map(|line| format!("{line}\n"))
            .collect();
        let parsed = FileConfig::parse_repository(&uncommented).expect("uncommented template parses");
        assert_eq!(parsed.label.as_deref(), Some(crate::config::DEFAULT_LABEL));
        assert_eq!(parsed.tasks_file.as_deref(), Some(crate::config::DEFAULT_TASKS_FILE));
        assert_eq!(parsed.max_turns, Some(crate::config::DEFAULT_MAX_TURNS));
        assert_eq!(parsed.protected_paths, Some(vec!["LICENSE".to_owned()]));
        assert!(parsed.base.is_some() && parsed.instructions.is_some());
        assert_eq!(parsed.pr_limit, Some(crate::fleet::limits::DEFAULT_PR_LIMIT));
        assert_eq!(
            parsed.pr_hourly_limit,
            Some(crate::fleet::limits::DEFAULT_PR_HOURLY_LIMIT)
        );
        assert!(parsed.schedule.is_some() && parsed.timezone.is_some());
        assert_eq!(parsed.dashboard, Some(false));
    }

    #[test]
    fn init_fleet_writes_only_the_fleet_workflow_and_never_overwrites() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The root of a work tree, as init requires.
        std::fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").expect("write");
        let written = init_fleet(dir.path()).expect("writes");
        assert_eq!(written, [dir.path().join(FLEET_WORKFLOW_FILE)]);
        assert_eq!(
            std::fs::read_to_string(&written[0]).expect("read"),
            FLEET_WORKFLOW_TEMPLATE
        );
        assert!(!dir.path().join(REPO_CONFIG_FILE).exists());
        assert!(matches!(init_fleet(dir.path()), Err(InitError::Exists(_))));
    }
}
