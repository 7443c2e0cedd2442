//! `list_files`: the files under a folder that git would track (ignored files left out), so
//! the model sees the project, not its build output.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::path::Access;
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

/// Most paths one call returns.
const MAX_ENTRIES: usize = 2000;

pub struct ListFiles;

/// The files (and symlinks) under `dir` as git would see them: `.gitignore` honoured, hidden
/// files included, `.git/` left out, sorted by name. Every listing of the repository (tools and
/// the prompt's file tree) walks it the same way through here.
pub fn repository_files(dir: &std::path::Path) -> impl Iterator<Item = ignore::DirEntry> {
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git")
        .build()
        .flatten()
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file() || t.is_symlink()))
}

/// Files under `dir` (relative to `root`), at most `limit`; the flag says whether more were left out.
pub fn walk(root: &std::path::Path, dir: &std::path::Path, limit: usize) -> (Vec<String>, bool) {
    let mut files = Vec::new();
    let mut truncated = false;
    for entry in repository_files(dir) {
        if files.len() >= limit {
            truncated = true;
            break;
        }
        if let Ok(relative) = entry.path().strip_prefix(root) {
            files.push(relative.display().to_string());
        }
    }
    (files, truncated)
}

#[async_trait]
impl Tool for ListFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "list_files",
            ToolClass::Safe,
            "List the files under a folder (default: the whole repository), one path per line; files ignored by .gitignore are left out.",
            object_schema(&[(
                "path",
                "string",
                "folder relative to the repository root; omit for the root",
                false,
            )]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let requested = args::optional_str(arguments, "path")?.unwrap_or(".");
        let dir = ctx.paths.resolve(requested, Access::Read)?;
        if !dir.is_dir() {
            return Err(ToolError::model(format!(
                "{requested:?} is not a folder of the repository"
            )));
        }
        let (files, truncated) = walk(ctx.paths.root(), &dir, MAX_ENTRIES);
        let mut text = files.join("\n");
        if files.is_empty() {
            text = format!("(no files under {requested:?})");
        }
        if truncated {
            text.push_str(&format!(
                "\n[notice: only the first {MAX_ENTRIES} files are listed; list a subfolder to see more]"
            ));
        }
        Ok(ToolOutput::Text(text))
    }
}
