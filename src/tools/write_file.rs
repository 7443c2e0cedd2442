//! `write_file`: create or overwrite a file inside the clone (parent folders created).

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::path::{Access, MAX_WRITE_BYTES};
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

pub struct WriteFile;

/// Writes `content` to an already-resolved path, creating parent folders.
pub fn write_resolved(path: &std::path::Path, requested: &str, content: &str) -> Result<(), ToolError> {
    if content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::model(format!(
            "content for {requested:?} is {} bytes; the limit is {MAX_WRITE_BYTES} bytes per file",
            content.len()
        )));
    }
    if path.is_dir() {
        return Err(ToolError::model(format!("{requested:?} is a directory")));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| ToolError::model(format!("cannot create the folder for {requested:?}: {error}")))?;
    }
    std::fs::write(path, content).map_err(|error| ToolError::model(format!("cannot write {requested:?}: {error}")))
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write_file",
            ToolClass::Safe,
            "Create or overwrite a file with the given content (the whole file). Folders are created as needed.",
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
        let content = &ctx.redactor.redact(args::required_str(arguments, "content")?);
        let path = ctx.paths.resolve(requested, Access::Write)?;
        let existed = path.exists();
        write_resolved(&path, requested, content)?;
        Ok(ToolOutput::Text(format!(
            "{} {} ({} bytes)",
            if existed { "overwrote" } else { "created" },
            ctx.paths.display(&path),
            content.len()
        )))
    }
}
