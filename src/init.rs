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
//! The workflows use upkeep's own action pinned to a full commit, as every action is pinned
//! (DESIGN section 8): `uses: upkeep-bot/upkeep@<40-hex> # v0.1.0`, the commit this build was
//! made from (embedded by `build.rs`: the release's commit, a published crate's, or a
//! checkout's HEAD). A build that knows no commit refuses to write a workflow (exit 2) rather
//! than write a movable tag or a made-up commit. init also writes `.github/dependabot.yml`
//! (Dependabot's `github-actions` ecosystem) so the pin moves with each release; that one file
//! is optional: when the repository already has one, init leaves it and says to check it.
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
/// The Dependabot config `init` writes where the repository has none.
pub const DEPENDABOT_TEMPLATE: &str = include_str!("../templates/dependabot.yml");
/// Where it goes.
pub const DEPENDABOT_FILE: &str = ".github/dependabot.yml";

/// upkeep's own action, as workflows name it.
pub const ACTION_REPOSITORY: &str = "upkeep-bot/upkeep";
/// The commit this build was made from (see `build.rs`), empty when it knows none.
pub const ACTION_COMMIT: &str = env!("UPKEEP_ACTION_COMMIT");
/// Where [`ACTION_COMMIT`] came from: `release`, `crate`, `checkout` or `none`.
pub const ACTION_COMMIT_SOURCE: &str = env!("UPKEEP_ACTION_COMMIT_SOURCE");
/// What the workflow templates hold where upkeep's action goes.
const ACTION_PLACEHOLDER: &str = "{upkeep_action}";

/// `upkeep-bot/upkeep@<commit> # v<version>`: upkeep's action pinned to this build's commit.
pub fn action_reference() -> Result<String, InitError> {
    reference_to(ACTION_COMMIT)
}

/// upkeep's action pinned to `commit`; a build that knows none writes none.
fn reference_to(commit: &str) -> Result<String, InitError> {
    if commit.is_empty() {
        return Err(InitError::UnknownCommit);
    }
    Ok(format!("{ACTION_REPOSITORY}@{commit} # v{}", env!("CARGO_PKG_VERSION")))
}

/// A workflow template as `init` writes it: upkeep's action pinned ([`action_reference`]).
pub fn pinned(template: &str) -> Result<String, InitError> {
    Ok(template.replace(ACTION_PLACEHOLDER, &action_reference()?))
}

/// The workflow `init` writes, upkeep's action pinned.
pub fn workflow() -> Result<String, InitError> {
    pinned(WORKFLOW_TEMPLATE)
}

/// The workflow `init --fleet` writes, upkeep's action pinned.
pub fn fleet_workflow() -> Result<String, InitError> {
    pinned(FLEET_WORKFLOW_TEMPLATE)
}

/// Whether `init` may leave a file alone when it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    /// Written, or nothing is: an existing one stops init.
    Required,
    /// Written when absent; an existing one is the repository's and is kept.
    Optional,
}

/// What `init` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub created: Vec<PathBuf>,
    /// Optional files that existed and were left as they are.
    pub kept: Vec<PathBuf>,
}

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
    #[error(
        "this build of upkeep does not know the commit it was built from (UPKEEP_ACTION_COMMIT_SOURCE=none: \
         no UPKEEP_RELEASE_COMMIT, no .cargo_vcs_info.json, no git checkout), so it cannot pin its own \
         action in the workflow; nothing was written (install a release build, or build from a git \
         checkout of upkeep)"
    )]
    UnknownCommit,
    #[error("writing {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl InitError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            InitError::Exists(_)
            | InitError::NotADirectory(_)
            | InitError::Symlink(_)
            | InitError::NotAWorkTreeRoot(_)
            | InitError::UnknownCommit => ExitStatus::Usage,
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
             `upkeep` on the repositories to work, and commit the files. See upkeep's docs/fleet.md.",
        )
    } else {
        (
            init(&args.repo_dir),
            "\nNext: add your model provider's API key as the secret OPENAI_API_KEY of the `upkeep`\n\
             environment (Settings > Environments; or as a repository secret), allow GitHub\n\
             Actions to create pull requests (Settings > Actions > General), create the `upkeep`\n\
             label, and commit the files. Then label an issue `upkeep`.",
        )
    };
    match result {
        Ok(written) => {
            let mut stdout = std::io::stdout().lock();
            for path in &written.created {
                let _ = writeln!(stdout, "created {}", path.display());
            }
            for path in &written.kept {
                let _ = writeln!(
                    stdout,
                    "kept {} (it exists): make sure it has a `github-actions` entry, so Dependabot keeps the pinned upkeep action current",
                    path.display()
                );
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

/// Writes `.upkeep.toml`, the workflow and (where there is none) `.github/dependabot.yml` into
/// `dir`. Checks every file before writing any, and creates each with `create_new`, so a file
/// that appears meanwhile is not overwritten either.
pub fn init(dir: &Path) -> Result<Written, InitError> {
    // The repository's CI workflows go into the checks trigger (a directory that cannot be
    // opened is reported by `write_files`, which opens it again).
    let ci = open_work_tree_root(dir)
        .map(|root| crate::ci_workflows::ci_workflow_names(&root))
        .unwrap_or_default();
    let workflow = crate::ci_workflows::with_ci_workflows(pinned(WORKFLOW_TEMPLATE)?, &ci);
    write_files(
        dir,
        &[
            (REPO_CONFIG_FILE, CONFIG_TEMPLATE.to_owned(), Presence::Required),
            (WORKFLOW_FILE, workflow, Presence::Required),
            (DEPENDABOT_FILE, DEPENDABOT_TEMPLATE.to_owned(), Presence::Optional),
        ],
    )
}

/// Writes the fleet workflow (and the Dependabot config) into `dir`, on the same terms as
/// [`init`].
pub fn init_fleet(dir: &Path) -> Result<Written, InitError> {
    write_files(
        dir,
        &[
            (
                FLEET_WORKFLOW_FILE,
                pinned(FLEET_WORKFLOW_TEMPLATE)?,
                Presence::Required,
            ),
            (DEPENDABOT_FILE, DEPENDABOT_TEMPLATE.to_owned(), Presence::Optional),
        ],
    )
}

fn write_files(dir: &Path, files: &[(&str, String, Presence)]) -> Result<Written, InitError> {
    let root = open_work_tree_root(dir)?;
    // Every file checked before any is written: all or nothing.
    let mut kept = Vec::new();
    for (file, _, presence) in files {
        let (parents, name) = split(file);
        if let Some(parent) = open_parents(&root, dir, &parents, Missing::Stop)? {
            if parent.symlink_metadata(name).is_ok() {
                match presence {
                    Presence::Required => return Err(InitError::Exists(dir.join(file))),
                    Presence::Optional => kept.push(*file),
                }
            }
        }
    }
    let mut written: Vec<(Dir, &str, PathBuf)> = Vec::new();
    for (file, content, _) in files.iter().filter(|(file, _, _)| !kept.contains(file)) {
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
    Ok(Written {
        created: written.into_iter().map(|(_, _, path)| path).collect(),
        kept: kept.into_iter().map(|file| dir.join(file)).collect(),
    })
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
        assert_eq!(parsed.pr_limit, Some(crate::limits::DEFAULT_PR_LIMIT));
        assert_eq!(parsed.pr_hourly_limit, Some(crate::limits::DEFAULT_PR_HOURLY_LIMIT));
        assert!(parsed.schedule.is_some() && parsed.timezone.is_some());
        assert_eq!(parsed.dashboard, Some(false));
    }

    #[test]
    fn the_workflows_pin_upkeeps_action_to_the_built_commit() {
        for template in [WORKFLOW_TEMPLATE, FLEET_WORKFLOW_TEMPLATE] {
            assert_eq!(template.matches(ACTION_PLACEHOLDER).count(), 1);
            let text = pinned(template).expect("this build knows its commit");
            // A step's `- uses:` (a permission such as `statuses: read` also contains "uses: ").
            let line = text
                .lines()
                .find(|line| line.trim_start().starts_with("- uses: "))
                .expect("a uses line");
            let reference = line.trim().trim_start_matches("- uses: ");
            let (pin, comment) = reference.split_once(" # ").expect("a version comment");
            let commit = pin.strip_prefix("upkeep-bot/upkeep@").expect("upkeep's action");
            assert!(
                commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{line}"
            );
            assert_eq!(commit, ACTION_COMMIT);
            assert_eq!(comment, format!("v{}", env!("CARGO_PKG_VERSION")));
            assert!(!text.contains("zizmor: ignore[unpinned-uses]"), "{text}");
        }
    }

    /// A build that knows no commit (no release variable, no packaged commit, no checkout)
    /// refuses to write a workflow, with exit 2, rather than write a tag or a made-up commit.
    #[test]
    fn a_build_without_a_commit_writes_no_workflow() {
        let refused = reference_to("").expect_err("no commit, no reference");
        assert!(matches!(refused, InitError::UnknownCommit));
        assert_eq!(refused.exit_status(), ExitStatus::Usage);
        assert!(refused.to_string().contains("nothing was written"), "{refused}");
    }

    #[test]
    fn init_fleet_writes_only_the_fleet_workflow_and_never_overwrites() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The root of a work tree, as init requires.
        std::fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").expect("write");
        let written = init_fleet(dir.path()).expect("writes");
        assert_eq!(
            written.created,
            [dir.path().join(FLEET_WORKFLOW_FILE), dir.path().join(DEPENDABOT_FILE)]
        );
        assert_eq!(
            std::fs::read_to_string(&written.created[0]).expect("read"),
            pinned(FLEET_WORKFLOW_TEMPLATE).expect("pinned")
        );
        assert!(!dir.path().join(REPO_CONFIG_FILE).exists());
        assert!(matches!(init_fleet(dir.path()), Err(InitError::Exists(_))));
        // The plain init keeps the Dependabot config the fleet init wrote, and says so.
        let written = init(dir.path()).expect("writes");
        assert_eq!(written.kept, [dir.path().join(DEPENDABOT_FILE)]);
        assert_eq!(written.created.len(), 2);
    }
}
