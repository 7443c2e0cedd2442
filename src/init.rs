//! `upkeep init`: sets a repository up for upkeep in one command.
//!
//! It writes `.upkeep.toml` (every key, commented, with its default) and
//! `.github/workflows/upkeep.yml` (work an issue when it is labelled `upkeep`, or a task started
//! by hand), the same files the README describes, so a new user does not copy YAML from a web
//! page. It never overwrites: when either file exists it writes nothing and exits 2 naming the
//! file, because both are files people edit and a second `init` must not undo their edits.
//! The templates are embedded at build time from `templates/`.
//!
//! `upkeep init --fleet` writes `.github/workflows/upkeep-fleet.yml` instead: the workflow that
//! runs `upkeep fleet` over an organisation as a matrix of shards (DESIGN section 13), for the
//! repository that operates the fleet.

use std::io::Write;
use std::path::{Path, PathBuf};

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
    #[error("writing {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl InitError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            InitError::Exists(_) | InitError::NotADirectory(_) => ExitStatus::Usage,
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
    if !dir.is_dir() {
        return Err(InitError::NotADirectory(dir.to_path_buf()));
    }
    let files: Vec<(PathBuf, &str)> = files.iter().map(|(path, content)| (dir.join(path), *content)).collect();
    for (path, _) in &files {
        // `exists` follows symlinks; a dangling symlink would be written through, so refuse it too.
        if path.exists() || path.symlink_metadata().is_ok() {
            return Err(InitError::Exists(path.clone()));
        }
    }
    let mut written: Vec<PathBuf> = Vec::new();
    for (path, content) in &files {
        if let Err(error) = write_new(path, content) {
            // All or nothing: take back what this run wrote.
            for done in &written {
                let _ = std::fs::remove_file(done);
            }
            return Err(error);
        }
        written.push(path.clone());
    }
    Ok(written)
}

fn write_new(path: &Path, content: &str) -> Result<(), InitError> {
    let io = |source| InitError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
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
