//! `write_file`: create or overwrite a file inside the clone (parent folders created), through
//! the repository gate. A rewrite keeps the file's line-ending style and final newline.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::line_endings::conform;
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};
use crate::repo::Written;

/// Most bytes `write_file`/`edit_file` will write in one file.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

pub struct WriteFile;

/// Writes `content` as the whole file `requested`, refusing oversized content; says what it did.
pub fn write_checked(ctx: &ToolContext<'_>, requested: &str, content: &str) -> Result<String, ToolError> {
    if content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::model(format!(
            "content for {requested:?} is {} bytes; the limit is {MAX_WRITE_BYTES} bytes per file",
            content.len()
        )));
    }
    let (path, written) = ctx
        .tree
        .write(requested, content.as_bytes())
        .map_err(|error| ToolError::model(error.to_string()))?;
    Ok(format!(
        "{} {} ({} bytes)",
        match written {
            Written::Created => "created",
            Written::Replaced => "overwrote",
        },
        path.display(),
        content.len()
    ))
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write_file",
            ToolClass::Safe,
            "Create or overwrite a file with the given content (the whole file). Folders are created as needed; an existing file keeps its line endings and final newline.",
            object_schema(&[
                ("path", "string", "file path relative to the repository root", true),
                ("content", "string", "the complete new content of the file", true),
            ]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let requested = args::required_str(arguments, "path")?;
        // A secret can only reach the model through a leak elsewhere; should one have, it still
        // never lands in a file of the clone (and so never in a pull request).
        let content = ctx.redactor.redact(args::required_str(arguments, "content")?);
        // Refused paths are refused before the old content is looked at.
        let target = ctx
            .tree
            .writable(requested)
            .map_err(|error| ToolError::model(error.to_string()))?;
        let content = match ctx.tree.read_resolved(&target, MAX_WRITE_BYTES as u64) {
            Ok(previous) if !previous.truncated => conform(&String::from_utf8_lossy(&previous.bytes), &content),
            _ => content,
        };
        Ok(ToolOutput::Text(write_checked(ctx, requested, &content)?))
    }
}
