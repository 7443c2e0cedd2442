//! Path confinement for every file tool, in one place.
//!
//! A path from the model is accepted only if it is relative, has no `..` component, does not
//! name anything under `.git/`, and still lies inside the clone after every symlink on the way
//! is resolved. Writes are also refused under `protected_paths`. Every refusal says why, in
//! words the model can act on. Nothing here touches the file itself: tools resolve first, then
//! read or write the resolved path.

use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::ToolError;

/// Most bytes `write_file`/`edit_file` will write in one file.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;
/// Most bytes `read_file` returns; larger files are shown as a window with a notice.
pub const MAX_READ_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

#[derive(Debug)]
pub struct PathPolicy {
    root: PathBuf,
    protected: GlobSet,
    protected_patterns: Vec<String>,
}

impl PathPolicy {
    /// `root` must be canonical (the workspace guarantees it).
    pub fn new(root: &Path, protected_paths: &[String]) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for pattern in protected_paths {
            builder.add(Glob::new(pattern)?);
        }
        Ok(Self {
            root: root.to_owned(),
            protected: builder.build()?,
            protected_patterns: protected_paths.to_vec(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The clean relative form of a model-given path (`./a//b` -> `a/b`), or why it is refused.
    pub fn normalise(&self, requested: &str) -> Result<PathBuf, ToolError> {
        let trimmed = requested.trim();
        if trimmed.is_empty() {
            return Err(ToolError::model(
                "path is empty; give a path relative to the repository root",
            ));
        }
        if trimmed.contains('\0') {
            return Err(ToolError::model("path contains a NUL byte"));
        }
        let path = Path::new(trimmed);
        let mut clean = PathBuf::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => {
                    if part == ".git" {
                        return Err(ToolError::model(format!(
                            "{requested:?} is inside .git/, which file tools never read or write; use the repository's files instead"
                        )));
                    }
                    clean.push(part);
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::model(format!(
                        "{requested:?} contains `..`; paths must stay inside the repository: give a path relative to its root without `..`"
                    )));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::model(format!(
                        "{requested:?} is absolute; give a path relative to the repository root (for example `src/main.rs`)"
                    )));
                }
            }
        }
        Ok(clean)
    }

    /// Resolves a model-given path to a real path inside the clone. An empty relative path
    /// (`.`) is the root itself.
    pub fn resolve(&self, requested: &str, access: Access) -> Result<PathBuf, ToolError> {
        let relative = self.normalise(requested)?;
        if access == Access::Write {
            if relative.as_os_str().is_empty() {
                return Err(ToolError::model(
                    "cannot write to the repository root itself; give a file path",
                ));
            }
            if self.protected.is_match(&relative) {
                return Err(ToolError::model(format!(
                    "{requested:?} is protected (protected_paths: {}); upkeep may not change it. Leave it as it is, or ask a human with ask_question",
                    self.protected_patterns.join(", ")
                )));
            }
        }
        let joined = self.root.join(&relative);
        // Resolve symlinks on the longest existing prefix; what does not exist yet cannot be a link.
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        let resolved = loop {
            match existing.canonicalize() {
                Ok(real) => break real,
                Err(_) => match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name.to_owned());
                        existing = parent;
                    }
                    _ => return Err(ToolError::model(format!("cannot resolve {requested:?}"))),
                },
            }
        };
        let mut full = resolved;
        for name in rest.iter().rev() {
            full.push(name);
        }
        let inside = full.strip_prefix(&self.root).map_err(|_| {
            ToolError::model(format!(
                "{requested:?} resolves (through a symlink) to a place outside the repository; file tools only work inside it"
            ))
        })?;
        if inside
            .components()
            .next()
            .is_some_and(|first| first.as_os_str() == ".git")
        {
            return Err(ToolError::model(format!(
                "{requested:?} resolves (through a symlink) into .git/, which file tools never read or write"
            )));
        }
        if access == Access::Write && self.protected.is_match(inside) {
            return Err(ToolError::model(format!(
                "{requested:?} resolves to the protected path {:?}; upkeep may not change it",
                inside.display()
            )));
        }
        Ok(full)
    }

    /// The path relative to the root, for messages.
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.root).unwrap_or(path).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> (tempfile::TempDir, PathPolicy) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        let policy = PathPolicy::new(&root, &[".github/workflows/**".into()]).expect("globs");
        (dir, policy)
    }

    #[test]
    fn refuses_every_escape_form() {
        let (dir, policy) = policy();
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join(".git"), dir.path().join("gitlink")).expect("symlink");
        for bad in [
            "../x",
            "src/../../x",
            "/etc/passwd",
            ".git/config",
            "src/.git/x",
            "link/x",
            "gitlink/config",
            "",
            ".github/workflows/ci.yml",
        ] {
            assert!(policy.resolve(bad, Access::Write).is_err(), "{bad:?} must be refused");
        }
        assert!(policy.resolve(".github/workflows/ci.yml", Access::Read).is_ok());
        let ok = policy.resolve("./src//new/file.rs", Access::Write).expect("inside");
        assert!(ok.starts_with(policy.root()));
        assert!(ok.ends_with("src/new/file.rs"));
    }
}
