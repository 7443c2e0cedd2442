//! `read_file`: a file's text, whole or a range of lines. A large file comes back as a window
//! with its total line count and how to read on, so one call can never flood the model's
//! context. Files are read through the repository gate (regular files only, capped while
//! reading) and decoded by `repo::text_encoding`: text that is not UTF-8 is shown decoded with
//! a notice naming its encoding, binary files are refused.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::args::WholeNumber;
use super::{Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::repo::WorkTree;
use crate::repo::text_encoding::{DecodedText, Input, decode};

/// Most bytes one call returns; a larger file or range comes back as a window.
pub(crate) const MAX_READ_BYTES: usize = 64 * 1024;
/// Most bytes of a file read at all (to count its lines and cut a window).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

pub(crate) struct ReadFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadFileArgs {
    /// file path relative to the repository root
    path: String,
    /// first line to read (1-based); omit to start at the top
    start_line: Option<WholeNumber>,
    /// last line to read (inclusive); omit to read to the end
    end_line: Option<WholeNumber>,
}

#[async_trait]
impl TypedTool for ReadFile {
    type Args = ReadFileArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "read_file",
            ToolClass::Safe,
            "Read a text file of the repository, whole or lines start_line..end_line (1-based, inclusive). Output over 64 KiB is cut to a window of whole lines, with the file's total line count and the start_line to read on from. Text that is not UTF-8 is shown decoded with its encoding named; binary files are refused.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, ReadFileArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let requested = args.path;
        let start = args.start_line.map(|line| line.0);
        let end = args.end_line.map(|line| line.0);
        let output = ctx
            .tree
            .off_thread(ctx.cancel, move |tree, _| read_window(tree, &requested, start, end))
            .await??;
        Ok(ToolOutput::Text(output))
    }
}

/// Lines `start..=end` of the file `requested`, with the notices that go with them. Runs off the
/// async threads: reading and decoding a file of up to 16 MiB takes a while.
fn read_window(tree: &WorkTree, requested: &str, start: Option<u64>, end: Option<u64>) -> Result<String, ToolError> {
    let (path, file) = tree.read(requested, MAX_FILE_BYTES).map_err(|error| match error {
        crate::repo::GateError::IsDir(_) => ToolError::model(format!(
            "{requested:?} is a directory; use list_files to see what it holds"
        )),
        other => ToolError::model(other.to_string()),
    })?;
    let size = file.size;
    let truncated = file.truncated;
    let decoded = decode(&file.bytes, Input::cut(truncated)).map_err(|error| {
        ToolError::model(format!(
            "{} ({size} bytes) is {error}; read_file shows text only",
            path.display()
        ))
    })?;
    let text = decoded.text.as_str();
    let window = Window::of(text, start, end)?;
    let mut output = window.text.to_owned();
    let total = if truncated {
        format!("more than {}", window.total_lines)
    } else {
        window.total_lines.to_string()
    };
    let whole = window.first == 1 && window.last == window.total_lines && !truncated;
    if !whole && window.total_lines > 0 {
        if !output.ends_with('\n') {
            output.push('\n');
        }
        let next = if window.last < window.total_lines {
            format!("; call read_file with start_line={} to read on", window.last + 1)
        } else if truncated {
            format!(
                "; the file is larger than {} MiB and the rest cannot be read: use search_files to find lines further down",
                MAX_FILE_BYTES / (1024 * 1024)
            )
        } else {
            String::new()
        };
        output.push_str(&format!(
            "[notice: lines {}-{} of {total} of {} are shown{next}]",
            window.first,
            window.last,
            path.display()
        ));
    }
    if !decoded.encoding.is_plain_utf8() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&encoding_notice(&path.display(), &decoded, &file.bytes, truncated));
    }
    Ok(output)
}

/// What the model must know about a file that is not plain UTF-8: its encoding, that the text
/// shown is decoded, and what writing it will do.
fn encoding_notice(path: &str, decoded: &DecodedText, bytes: &[u8], truncated: bool) -> String {
    let name = decoded.encoding.name();
    let mut notice = match decoded.first_non_utf8_line {
        Some(line) => format!(
            "[notice: {path} is not UTF-8 (from line {line} on); it is shown decoded as {name}, the encoding detected"
        ),
        None => format!("[notice: {path} is {}, shown decoded", decoded.encoding.describe()),
    };
    notice.push_str(&format!("; write_file and edit_file write it back in {name}"));
    if decoded.encoding.has_bom() {
        notice.push_str(" with the mark");
    }
    if !decoded.encoding.holds_every_character() {
        notice.push_str(&format!(" and refuse characters {name} cannot hold"));
    }
    // An edit must change only what it replaces; a file whose text does not encode back to the
    // same bytes cannot promise that.
    if !truncated && !decoded.round_trips(bytes) {
        notice.push_str(&format!(
            "; its text does not encode back to the same bytes in {name}, so edit_file refuses it"
        ));
    }
    notice.push(']');
    notice
}

/// The lines of a file a call returns.
struct Window<'a> {
    text: &'a str,
    first: u64,
    last: u64,
    total_lines: u64,
}

impl<'a> Window<'a> {
    /// Lines `start..=end` of `text` (1-based), cut to [`MAX_READ_BYTES`] at a line boundary.
    fn of(text: &'a str, start: Option<u64>, end: Option<u64>) -> Result<Self, ToolError> {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(at, _)| at + 1))
            .filter(|&at| at < text.len())
            .collect();
        let total_lines = starts.len() as u64;
        let first = start.unwrap_or(1).max(1);
        let last = end.unwrap_or(total_lines).min(total_lines);
        if total_lines == 0 {
            return Ok(Self {
                text: "",
                first: 0,
                last: 0,
                total_lines,
            });
        }
        if first > total_lines {
            return Err(ToolError::model(format!(
                "start_line {first} is past the end: the file has {total_lines} lines"
            )));
        }
        if last < first {
            return Err(ToolError::model(format!(
                "end_line {last} is before start_line {first}"
            )));
        }
        let line_start = |line: u64| starts[usize::try_from(line - 1).unwrap_or(0)];
        let line_end = |line: u64| {
            starts
                .get(usize::try_from(line).unwrap_or(usize::MAX))
                .copied()
                .unwrap_or(text.len())
        };
        let from = line_start(first);
        let mut shown_last = last;
        while shown_last > first && line_end(shown_last) - from > MAX_READ_BYTES {
            shown_last -= 1;
        }
        let mut to = line_end(shown_last);
        // A single line longer than the window is cut on a character boundary.
        if to - from > MAX_READ_BYTES {
            to = from + crate::text::prefix_bytes(&text[from..], MAX_READ_BYTES).0.len();
        }
        Ok(Self {
            text: &text[from..to],
            first,
            last: shown_last,
            total_lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_windows_cut_at_whole_lines() {
        let text = "one\ntwo\nthree\n";
        let all = Window::of(text, None, None).expect("whole");
        assert_eq!((all.text, all.first, all.last, all.total_lines), (text, 1, 3, 3));
        let middle = Window::of(text, Some(2), Some(2)).expect("line 2");
        assert_eq!(middle.text, "two\n");
        assert!(Window::of(text, Some(9), None).is_err());
        assert!(Window::of(text, Some(3), Some(2)).is_err());
        let long: String = (0..20_000).map(|n| format!("line {n}\n")).collect();
        let window = Window::of(&long, None, None).expect("window");
        assert!(window.text.len() <= MAX_READ_BYTES);
        assert!(window.text.ends_with('\n'));
        assert_eq!(window.total_lines, 20_000);
        assert!(window.last < 20_000);
    }
}
