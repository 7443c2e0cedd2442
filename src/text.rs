//! Cutting text to a size without splitting a character, and framing untrusted text so it stays
//! text. Prompts, comments, error messages and progress lines all bound what they show; they
//! share these so every cut lands on a character boundary and says it was cut, and every piece
//! of repository or forge text shown to a model or a person is fenced or kept to one line the
//! same way.

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary, and
/// whether anything was cut.
pub fn prefix_bytes(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// The first `max` characters of `text`, and whether anything was cut.
pub fn prefix_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((end, _)) => (&text[..end], true),
        None => (text, false),
    }
}

/// A prefix from [`prefix_bytes`] or [`prefix_chars`], with `marker` appended when it was cut.
pub fn marked((prefix, cut): (&str, bool), marker: &str) -> String {
    if cut {
        format!("{prefix}{marker}")
    } else {
        prefix.to_owned()
    }
}

/// An error and its sources on one line, `a: b: c`; a cause whose text is already in the line
/// (libraries often repeat their source in their own message) is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whether a character can move the cursor, change colours, or reorder text on a terminal: the
/// C0 and C1 control characters, DEL, and the Unicode bidirectional overrides ("Trojan Source").
fn is_terminal_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> String {
    if !text.chars().any(&escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as one safe line: every control character escaped (`\u{1b}`), line breaks included.
/// For untrusted names and titles: a file called `a\n# Task` stays one line that says so.
pub fn escape_control(text: &str) -> String {
    escape_where(text, is_terminal_control)
}

/// `text` for a terminal: control characters escaped except line breaks and tabs, so untrusted
/// text (model replies, file names, command output, issue titles) cannot rewrite the screen,
/// set the window title or hide a line with a carriage return.
///
/// The one escaping for every place people or a CI runner read: stderr, GitHub Actions
/// annotations, step outputs and the job summary (each sink then adds its own format's
/// escaping). `--json` and `--trace` stay exact.
pub fn escape_terminal(text: &str) -> String {
    escape_where(text, |c| c != '\n' && c != '\t' && is_terminal_control(c))
}

/// `text` inside a fenced code block labelled `label` (shown after the fence, escaped): a fence
/// of backticks one longer than the longest run inside, at least three.
pub fn fence(label: &str, text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let ticks = "`".repeat((longest + 1).max(3));
    format!("{ticks}{}\n{}\n{ticks}", one_line(label), text.trim_end_matches('\n'))
}

/// An untrusted name or title as one line: line breaks and control characters escaped.
pub fn one_line(text: &str) -> String {
    escape_control(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_land_on_character_boundaries() {
        assert_eq!(prefix_bytes("héllo", 2), ("h", true));
        assert_eq!(prefix_bytes("héllo", 3), ("hé", true));
        assert_eq!(prefix_bytes("hi", 5), ("hi", false));
        assert_eq!(prefix_chars("héllo", 2), ("hé", true));
        assert_eq!(prefix_chars("hé", 2), ("hé", false));
        assert_eq!(marked(prefix_chars("héllo", 2), "…"), "hé…");
        assert_eq!(marked(prefix_chars("hé", 2), "…"), "hé");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_control("a\u{1b}]0;x\u{7}b\nc"), "a\\u{1b}]0;x\\u{7}b\\u{a}c");
        assert_eq!(escape_terminal("a\u{1b}[2Jb\nc\rd\te"), "a\\u{1b}[2Jb\nc\\u{d}d\te");
        assert_eq!(escape_terminal("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(escape_control("plain é"), "plain é");
    }
}
