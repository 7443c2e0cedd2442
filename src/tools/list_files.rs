//! `list_files`: the files under a folder that git would track (ignored files left out), so
//! the model sees the project, not its build output. Walks through the repository gate.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use tokio_util::sync::CancellationToken;

use crate::repo::{EntryKind, WorkTree, walk};

/// Most paths one call returns.
const MAX_ENTRIES: usize = 2000;

pub(crate) struct ListFiles;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListFilesArgs {
    /// folder relative to the repository root; omit for the root
    path: Option<String>,
}

#[async_trait]
impl TypedTool for ListFiles {
    type Args = ListFilesArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "list_files",
            ToolClass::Safe,
            "List the files under a folder (default: the whole repository), one path per line; files ignored by .gitignore are left out.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, ListFilesArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let requested = args.path.unwrap_or_else(|| ".".to_owned());
        let text = ctx
            .tree
            .off_thread(ctx.cancel, move |tree, cancel| list(tree, cancel, &requested))
            .await??;
        Ok(ToolOutput::Text(text))
    }
}

/// The listing of the folder `requested`. Runs off the async threads: the walk of a large
/// repository takes seconds, and stops at the interrupt.
fn list(tree: &WorkTree, cancel: &CancellationToken, requested: &str) -> Result<String, ToolError> {
    let dir = tree
        .resolve(requested)
        .map_err(|error| ToolError::model(error.to_string()))?;
    if tree.kind(&dir) != Some(EntryKind::Dir) {
        return Err(ToolError::model(format!(
            "{requested:?} is not a folder of the repository"
        )));
    }
    let (files, truncated) =
        walk::list(tree, &dir, MAX_ENTRIES, cancel).map_err(|error| ToolError::model(error.to_string()))?;
    let mut text = files
        .iter()
        .map(|path| crate::text::escape_control(&path.display()))
        .collect::<Vec<_>>()
        .join("\n");
    if files.is_empty() {
        text = format!("(no files under {requested:?})");
    }
    if truncated {
        text.push_str(&format!(
            "\n[notice: only the first {MAX_ENTRIES} files are listed; list a subfolder to see more]"
        ));
    }
    Ok(text)
}
