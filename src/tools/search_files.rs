//! `search_files`: lines matching a regular expression, as `file:line: text`, over the files
//! `list_files` would show, read through the repository gate (symlinks are not followed: their
//! targets inside the tree are searched at their own paths). Files are searched as the text
//! `read_file` shows (decoded from their own encoding; binary files skipped). Bounded in
//! matches and line length.

use std::ops::ControlFlow;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::repo::text_encoding::{Input, decode};
use crate::repo::{EntryKind, RepoPath, WorkTree, walk};

const MAX_MATCHES: usize = 200;
const MAX_LINE_CHARS: usize = 300;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Files searched at most in one call.
const MAX_FILES: usize = 50_000;

pub(crate) struct SearchFiles;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchFilesArgs {
    /// regular expression to search for
    pattern: String,
    /// folder or file to search in; omit for the whole repository
    path: Option<String>,
}

#[async_trait]
impl TypedTool for SearchFiles {
    type Args = SearchFilesArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "search_files",
            ToolClass::Safe,
            "Search the repository's text files for a regular expression (Rust regex syntax); returns matching lines as `path:line: text`, at most 200.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, SearchFilesArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let pattern = args.pattern.as_str();
        let requested = args.path.as_deref().unwrap_or(".");
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|error| ToolError::model(format!("invalid regular expression {pattern:?}: {error}")))?;
        let (pattern, requested) = (pattern.to_owned(), requested.to_owned());
        let text = ctx
            .tree
            .off_thread(ctx.cancel, move |tree, cancel| {
                search(tree, cancel, &regex, &pattern, &requested)
            })
            .await??;
        Ok(ToolOutput::Text(text))
    }
}

/// Searches the files under `requested` (or that file) for `regex`, until the matches cap or
/// the interrupt. Runs off the async threads: on a large repository this is seconds of reading.
fn search(
    tree: &WorkTree,
    cancel: &CancellationToken,
    regex: &regex::Regex,
    pattern: &str,
    requested: &str,
) -> Result<String, ToolError> {
    let target = tree
        .resolve(requested)
        .map_err(|error| ToolError::model(error.to_string()))?;
    let files: Vec<RepoPath> = match tree.kind(&target) {
        Some(EntryKind::Dir) => {
            walk::list(tree, &target, MAX_FILES, cancel)
                .map_err(|error| ToolError::model(error.to_string()))?
                .0
        }
        Some(_) => vec![target],
        None => return Err(ToolError::model(format!("{requested:?} does not exist"))),
    };
    let mut matches = Vec::new();
    let mut truncated = false;
    for path in &files {
        // An interrupt ends the search within one file's work; the caller drops the rest.
        if cancel.is_cancelled() {
            break;
        }
        // Symlinks and anything unreadable (FIFOs, hard links, oversized files) are skipped.
        let Ok(file) = tree.read_resolved(path, MAX_FILE_BYTES) else {
            continue;
        };
        if file.truncated {
            continue;
        }
        // Matched as decoded text, as read_file shows it; binary files are skipped.
        let Ok(decoded) = decode(&file.bytes, Input::Whole) else {
            continue;
        };
        let text = decoded.text;
        let shown_path = crate::text::escape_control(&path.display());
        let flow = text.lines().enumerate().try_for_each(|(number, line)| {
            if !regex.is_match(line) {
                return ControlFlow::Continue(());
            }
            if matches.len() >= MAX_MATCHES {
                truncated = true;
                return ControlFlow::Break(());
            }
            let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
            matches.push(format!("{shown_path}:{}: {shown}", number + 1));
            ControlFlow::Continue(())
        });
        if flow.is_break() {
            break;
        }
    }
    let mut text = if matches.is_empty() {
        format!("no matches for {pattern:?}")
    } else {
        matches.join("\n")
    };
    if truncated {
        text.push_str(&format!(
            "\n[notice: stopped after {MAX_MATCHES} matches; narrow the pattern or the path]"
        ));
    }
    Ok(text)
}
