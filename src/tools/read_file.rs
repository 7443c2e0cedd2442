//! `read_file`: a file's text. Large files come back as a bounded window with a notice, so one
//! call can never flood the model's context.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::path::{Access, MAX_READ_BYTES};
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read_file",
            ToolClass::Safe,
            "Read a text file of the repository. Files over 64 KiB are cut to their first 64 KiB with a notice; use search_files to find lines further down.",
            object_schema(&[("path", "string", "file path relative to the repository root", true)]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let requested = args::required_str(arguments, "path")?;
        let path = ctx.paths.resolve(requested, Access::Read)?;
        if path.is_dir() {
            return Err(ToolError::model(format!(
                "{requested:?} is a directory; use list_files to see what it holds"
            )));
        }
        let bytes =
            std::fs::read(&path).map_err(|error| ToolError::model(format!("cannot read {requested:?}: {error}")))?;
        if bytes.iter().take(8192).any(|b| *b == 0) {
            return Err(ToolError::model(format!(
                "{requested:?} is a binary file ({} bytes); read_file shows text only",
                bytes.len()
            )));
        }
        if bytes.len() <= MAX_READ_BYTES {
            return Ok(ToolOutput::Text(String::from_utf8_lossy(&bytes).into_owned()));
        }
        let window = String::from_utf8_lossy(&bytes[..MAX_READ_BYTES]);
        // Cut at the last whole line so the model never sees half a line as if it were whole.
        let window = match window.rfind('\n') {
            Some(end) => &window[..=end],
            None => &window[..],
        };
        let lines_shown = window.lines().count();
        let total_lines = bytecount_lines(&bytes);
        Ok(ToolOutput::Text(format!(
            "{window}\n[notice: {requested} is {} bytes and {total_lines} lines; only lines 1-{lines_shown} are shown. Use search_files to find what you need further down.]",
            bytes.len()
        )))
    }
}

fn bytecount_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count() + usize::from(!bytes.ends_with(b"\n"))
}
