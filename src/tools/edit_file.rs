//! `edit_file`: replace one exact, unique occurrence of a text. Refusing ambiguous or missing
//! matches (instead of guessing) keeps edits precise and tells the model what to fix. The
//! match works across line-ending styles (a model writes `\n`, a Windows file has `\r\n`) and
//! the replacement is written in the file's own style. The file is matched as decoded text and
//! written back in its own encoding (see `repo::text_encoding`); binary files are refused.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::line_endings::LineEnding;
use super::write_file::{MAX_WRITE_BYTES, write_checked};
use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::repo::WorkTree;
use crate::repo::text_encoding::{Input, decode};

pub(crate) struct EditFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditFileArgs {
    /// file path relative to the repository root
    path: String,
    /// the exact text to replace (must occur exactly once)
    old_text: String,
    /// the replacement text
    new_text: String,
}

#[async_trait]
impl TypedTool for EditFile {
    type Args = EditFileArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "edit_file",
            ToolClass::Safe,
            "Replace one exact occurrence of old_text with new_text in a file. old_text must appear exactly once; include surrounding lines to make it unique. The file keeps its encoding and line endings; a character its encoding cannot hold is refused.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, EditFileArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let requested = args.path;
        let old_text = args.old_text;
        let new_text = ctx.redactor.redact(&args.new_text);
        if old_text.is_empty() {
            return Err(ToolError::model("old_text is empty; to create a file use write_file"));
        }
        let done = ctx
            .tree
            .off_thread(ctx.cancel, move |tree, _| edit(tree, &requested, &old_text, &new_text))
            .await??;
        Ok(ToolOutput::Text(done))
    }
}

/// Replaces the one occurrence of `old_text` in the file `requested` with `new_text`; says what
/// it did. Runs off the async threads, as every file tool does.
fn edit(tree: &WorkTree, requested: &str, old_text: &str, new_text: &str) -> Result<String, ToolError> {
    let target = tree
        .writable(requested)
        .map_err(|error| ToolError::model(error.to_string()))?;
    let current = tree
        .read_resolved(&target, MAX_WRITE_BYTES as u64)
        .map_err(|error| ToolError::model(format!("cannot edit {requested:?}: {error}")))?;
    if current.truncated {
        return Err(ToolError::model(format!(
            "{requested:?} is larger than {MAX_WRITE_BYTES} bytes; upkeep does not edit files that large"
        )));
    }
    let decoded = decode(&current.bytes, Input::Whole)
        .map_err(|error| ToolError::model(format!("{requested:?} is {error}; edit_file changes text files only")))?;
    // An edit must change only what it replaces: a file whose text would not encode back to
    // the very same bytes is left alone.
    if !decoded.round_trips(&current.bytes) {
        return Err(ToolError::model(format!(
            "{requested:?} is {} text that upkeep cannot write back byte for byte (some of its characters have two byte sequences), so edit_file would change more than old_text; nothing was written",
            decoded.encoding.describe()
        )));
    }
    let encoding = decoded.encoding;
    let current = decoded.text;
    let style = LineEnding::of(&current);
    let old_text = style.apply(old_text);
    let new_text = style.apply(new_text);
    match current.matches(old_text.as_str()).count() {
        0 => Err(ToolError::model(format!(
            "old_text was not found in {requested:?}; read the file again and copy the text exactly, whitespace included"
        ))),
        1 => {
            let updated = current.replacen(old_text.as_str(), &new_text, 1);
            write_checked(tree, requested, &updated, encoding)?;
            Ok(format!("edited {}", target.display()))
        }
        n => Err(ToolError::model(format!(
            "old_text occurs {n} times in {requested:?}; include more surrounding lines so it occurs exactly once"
        ))),
    }
}
