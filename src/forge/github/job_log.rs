//! A failing GitHub Actions job's log, cut to what a fix needs: the tail of the step that failed.
//!
//! Why: a job's log can be megabytes of anything the code under test printed, colour escapes
//! and carriage-return progress bars included, and it goes into a prompt. So the download keeps
//! only its last [`DOWNLOAD_WINDOW_BYTES`] (reading at most [`MAX_DOWNLOAD_BYTES`]), and the
//! tail kept is the failing step's last [`TAIL_LINES`] lines and at most [`TAIL_BYTES`] bytes,
//! cleaned by [`clean`]: terminal escape sequences removed, a line rewritten by carriage returns
//! kept as a terminal would show it, every other control character dropped, Actions' timestamps
//! taken off each line.
//!
//! The failing step is found by the markers the Actions runner writes: the step whose
//! `##[group]` header comes last before the last `##[error]` line. A log without an
//! `##[error]` line is kept by its tail.

/// Lines of the failing step's tail kept.
pub(super) const TAIL_LINES: usize = 200;
/// Bytes of the failing step's tail kept (after cleaning).
pub(super) const TAIL_BYTES: usize = 16 * 1024;
/// Bytes from the end of the log kept while downloading, from which the tail is cut.
pub(super) const DOWNLOAD_WINDOW_BYTES: usize = 256 * 1024;
/// Bytes read from the log's download at most; a longer log's last part is not seen.
pub(super) const MAX_DOWNLOAD_BYTES: u64 = 64 * 1024 * 1024;

/// Untrusted text cleaned for a prompt or a comment: terminal escape sequences removed, each
/// line as a terminal would end up showing it after carriage returns, other control characters
/// (and Unicode bidirectional overrides) dropped; tabs and line breaks stay.
pub(crate) fn clean(text: &str) -> String {
    let stripped = anstream::adapter::strip_str(text).to_string();
    let mut out = String::with_capacity(stripped.len());
    for (i, line) in stripped.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        // What stays on screen after a progress bar: the last non-empty rewrite.
        let shown = line.rsplit('\r').find(|part| !part.trim().is_empty()).unwrap_or("");
        out.extend(shown.chars().filter(|c| {
            *c == '\t' || !(c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
        }));
    }
    out
}

/// The failing step's tail of a job log's last bytes (`cut_at_start`: the bytes do not begin at
/// the log's start), bounded by [`TAIL_LINES`] and [`TAIL_BYTES`], with a first line saying
/// what was left out.
pub(crate) fn failing_step_tail(bytes: &[u8], cut_at_start: bool) -> String {
    let text = clean(&String::from_utf8_lossy(bytes));
    let mut lines: Vec<&str> = text.lines().map(without_timestamp).collect();
    if cut_at_start && !lines.is_empty() {
        // The first line is likely cut in the middle.
        lines.remove(0);
    }
    let error = lines.iter().rposition(|line| line.contains("##[error]"));
    let (start, end) = match error {
        Some(error) => {
            let start = lines[..error]
                .iter()
                .rposition(|line| line.starts_with("##[group]"))
                .unwrap_or(0);
            (start, error + 1)
        }
        None => (0, lines.len()),
    };
    let step = &lines[start..end];
    let first = step.len().saturating_sub(TAIL_LINES);
    let mut kept = step[first..].join("\n");
    let mut cut = first > 0 || start > 0 || cut_at_start;
    if kept.len() > TAIL_BYTES {
        let mut from = kept.len() - TAIL_BYTES;
        while !kept.is_char_boundary(from) {
            from += 1;
        }
        // Start on a whole line where one begins within the window.
        if let Some(newline) = kept[from..].find('\n') {
            from += newline + 1;
        }
        kept = kept[from..].to_owned();
        cut = true;
    }
    if cut {
        format!("[… earlier lines of the log left out]\n{kept}")
    } else {
        kept
    }
}

/// A line without the timestamp the Actions runner puts before it
/// (`2024-05-01T10:00:00.1234567Z `).
fn without_timestamp(line: &str) -> &str {
    let bytes = line.as_bytes();
    let looks_like_date = bytes.len() > 20
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T';
    if !looks_like_date {
        return line;
    }
    match line.split_once(' ') {
        Some((stamp, rest)) if stamp.ends_with('Z') => rest,
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_step_is_kept_without_timestamps_and_later_steps() {
        let log = "\
2024-05-01T10:00:00.0000000Z ##[group]Run actions/checkout@v4
2024-05-01T10:00:01.0000000Z checked out
2024-05-01T10:00:02.0000000Z ##[endgroup]
2024-05-01T10:00:03.0000000Z ##[group]Run cargo test
2024-05-01T10:00:04.0000000Z test parse ... FAILED
2024-05-01T10:00:05.0000000Z ##[error]Process completed with exit code 101.
2024-05-01T10:00:06.0000000Z Post job cleanup.
";
        let tail = failing_step_tail(log.as_bytes(), false);
        assert_eq!(
            tail,
            "[… earlier lines of the log left out]\n##[group]Run cargo test\ntest parse ... FAILED\n##[error]Process completed with exit code 101."
        );
    }

    #[test]
    fn colours_progress_bars_and_control_characters_are_cleaned() {
        let text = "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}ok\r\n10%\r50%\r100%\nbell\u{7}\u{0} nul\u{202e}rtl\tend";
        assert_eq!(clean(text), "red ok\n100%\nbell nulrtl\tend");
    }

    /// A huge log on one line and a huge log of many lines both end up within the bounds, with
    /// the failing end kept.
    #[test]
    fn a_huge_log_is_bounded_to_the_documented_size() {
        let one_line = format!("{}FAILED at the end", "x".repeat(1_000_000));
        let tail = failing_step_tail(one_line.as_bytes(), false);
        assert!(tail.len() <= TAIL_BYTES + 64, "{}", tail.len());
        let many: String = (0..10_000).map(|n| format!("line {n}\n")).collect();
        let tail = failing_step_tail(many.as_bytes(), false);
        assert_eq!(tail.lines().count(), TAIL_LINES + 1);
        assert!(tail.ends_with("line 9999"), "{tail}");
    }
}
