//! `write_file`: create or overwrite a file inside the clone (parent folders created), through
//! the repository gate. A rewrite keeps the file's encoding (see `repo::text_encoding`),
//! line-ending style and final newline; a new file is UTF-8.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::line_endings::conform;
use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::repo::text_encoding::{Input, NotText, TextEncoding, decode};
use crate::repo::{WorkTree, Written};

/// Most bytes `write_file`/`edit_file` will write in one file.
pub(crate) const MAX_WRITE_BYTES: usize = 1024 * 1024;

pub(crate) struct WriteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteFileArgs {
    /// file path relative to the repository root
    path: String,
    /// the complete new content of the file
    content: String,
}

/// Writes `content` as the whole file `requested` in `encoding`, refusing oversized content and
/// characters the encoding cannot hold; says what it did.
pub(crate) fn write_checked(
    tree: &WorkTree,
    requested: &str,
    content: &str,
    encoding: TextEncoding,
) -> Result<String, ToolError> {
    let bytes = encoding.encode(content).map_err(|error| {
        ToolError::model(format!(
            "{requested:?} is {} text: {error}; nothing was written. Leave the character out or write it as the file's format escapes it",
            encoding.describe()
        ))
    })?;
    if bytes.len() > MAX_WRITE_BYTES {
        return Err(ToolError::model(format!(
            "content for {requested:?} is {} bytes; the limit is {MAX_WRITE_BYTES} bytes per file",
            bytes.len()
        )));
    }
    let (path, written) = tree
        .write(requested, &bytes)
        .map_err(|error| ToolError::model(error.to_string()))?;
    let encoded = if encoding.is_plain_utf8() {
        String::new()
    } else {
        format!(" in {}", encoding.describe())
    };
    Ok(format!(
        "{} {} ({} bytes{encoded})",
        match written {
            Written::Created => "created",
            Written::Replaced => "overwrote",
        },
        path.display(),
        bytes.len()
    ))
}

#[async_trait]
impl TypedTool for WriteFile {
    type Args = WriteFileArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "write_file",
            ToolClass::Safe,
            "Create or overwrite a file with the given content (the whole file). Folders are created as needed; a new file is UTF-8; an existing file keeps its encoding (a character its encoding cannot hold is refused), line endings and final newline.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, WriteFileArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let requested = args.path;
        // A secret can only reach the model through a leak elsewhere; should one have, it still
        // never lands in a file of the clone (and so never in a pull request).
        let content = ctx.redactor.redact(&args.content);
        let done = ctx
            .tree
            .off_thread(ctx.cancel, move |tree, _| write_conformed(tree, &requested, content))
            .await??;
        Ok(ToolOutput::Text(done))
    }
}

/// Writes `content` as the whole file `requested`, in the encoding and conventions of the file
/// it replaces; says what it did. Runs off the async threads, as every file tool does.
fn write_conformed(tree: &WorkTree, requested: &str, content: String) -> Result<String, ToolError> {
    // Refused paths are refused before the old content is looked at.
    let target = tree
        .writable(requested)
        .map_err(|error| ToolError::model(error.to_string()))?;
    // An existing text file keeps its encoding and conventions; a new file, or one that is
    // not text, becomes UTF-8.
    let previous = tree
        .read_resolved(&target, MAX_WRITE_BYTES as u64)
        .ok()
        .map(|previous| {
            (
                decode(&previous.bytes, Input::cut(previous.truncated)),
                previous.truncated,
            )
        });
    let (content, encoding) = match previous {
        Some((Ok(decoded), false)) => (conform(&decoded.text, &content), decoded.encoding),
        Some((Ok(decoded), true)) => (content, decoded.encoding),
        // Not valid in the encoding its byte-order mark names: the new content is.
        Some((Err(NotText::BadBom(encoding)), _)) => (content, encoding),
        Some((Err(NotText::Binary), _)) | None => (content, TextEncoding::UTF8),
    };
    write_checked(tree, requested, &content, encoding)
}
