//! `search_files`: lines matching a regular expression, as `file:line: text`, over the files
//! `list_files` would show. Bounded in matches and line length.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::list_files::walk;
use super::path::Access;
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

const MAX_MATCHES: usize = 200;
const MAX_LINE_CHARS: usize = 300;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;

pub struct SearchFiles;

#[async_trait]
impl Tool for SearchFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "search_files",
            ToolClass::Safe,
            "Search the repository's text files for a regular expression (Rust regex syntax); returns matching lines as `path:line: text`, at most 200.",
            object_schema(&[
                ("pattern", "string", "regular expression to search for", true),
                (
                    "path",
                    "string",
                    "folder or file to search in; omit for the whole repository",
                    false,
                ),
            ]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let pattern = args::required_str(arguments, "pattern")?;
        let requested = args::optional_str(arguments, "path")?.unwrap_or(".");
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|error| ToolError::model(format!("invalid regular expression {pattern:?}: {error}")))?;
        let target = ctx.paths.resolve(requested, Access::Read)?;
        let files = if target.is_file() {
            vec![ctx.paths.display(&target)]
        } else {
            walk(ctx.paths.root(), &target, 50_000).0
        };
        let mut matches = Vec::new();
        let mut truncated = false;
        'files: for relative in &files {
            let path = ctx.paths.root().join(relative);
            if std::fs::metadata(&path)
                .map(|m| m.len() > MAX_FILE_BYTES)
                .unwrap_or(true)
            {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else { continue };
            if bytes.iter().take(8192).any(|b| *b == 0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (number, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() >= MAX_MATCHES {
                        truncated = true;
                        break 'files;
                    }
                    let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
                    matches.push(format!("{relative}:{}: {shown}", number + 1));
                }
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
        Ok(ToolOutput::Text(text))
    }
}
