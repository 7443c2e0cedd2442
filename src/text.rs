//! Cutting text to a size without splitting a character, and framing untrusted text so it stays
//! text. Prompts, comments, error messages and progress lines all bound what they show; they
//! share these so every cut lands on a character boundary and says it was cut, and every piece
//! of repository or forge text shown to a model or a person is fenced or kept to one line the
//! same way. Text the bot posts on a forge from model output passes [`neutralise_mentions`], so
//! it cannot notify people or teams.

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

/// What is put between `@` and a name so GitHub sees no mention: a zero-width space, invisible
/// when rendered.
const MENTION_BREAK: char = '\u{200b}';

/// `text` with every `@` mention made inert, for text the bot posts from model output (pull
/// request titles and bodies, questions, review replies, summaries): a model that a repository
/// talked into it must not be able to notify people or whole teams (`@org/team`) with the bot's
/// account. A zero-width space goes after an `@` that GitHub would read as the start of a
/// mention: one not preceded by a letter or digit (emphasis, a backslash or a tag around it does
/// not protect it), followed by anything but white space. `@` written as an HTML character
/// reference (`&#64;`, `&#x40;`, `&commat;`) is made a plain `@` first, since it renders as one.
/// Code spans and blocks are treated like the rest: the cost is an invisible character in code,
/// the gain that no Markdown trick decides what is code. `name@example.com` is left as it is.
pub fn neutralise_mentions(text: &str) -> String {
    let text = plain_at_signs(text);
    let mut out = String::with_capacity(text.len() + 8);
    let mut previous: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '@' {
            let joined = previous.is_some_and(|p| p.is_ascii_alphanumeric());
            let names = chars
                .peek()
                .is_some_and(|next| !next.is_whitespace() && *next != MENTION_BREAK);
            if !joined && names {
                out.push(MENTION_BREAK);
            }
        }
        previous = Some(c);
    }
    out
}

/// `text` with the HTML character references for `@` written as `@`. A decimal or hexadecimal
/// reference counts with or without its `;` (HTML parsers accept both), with any leading zeros.
fn plain_at_signs(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('&') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match at_reference_len(rest) {
            Some(len) => {
                out.push('@');
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// The length of the reference to `@` that `text` starts with, if it starts with one.
fn at_reference_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.len() >= 8 && bytes[..8].eq_ignore_ascii_case(b"&commat;") {
        return Some(8);
    }
    let (radix, start) = match bytes.get(1..3) {
        Some([b'#', b'x' | b'X']) => (16, 3),
        Some([b'#', _]) => (10, 2),
        _ => return None,
    };
    let digits = bytes[start..]
        .iter()
        .take_while(|b| (**b as char).is_digit(radix))
        .count();
    let value = u32::from_str_radix(&text[start..start + digits], radix).ok()?;
    if digits == 0 || value != u32::from('@') {
        return None;
    }
    let end = start + digits;
    Some(if bytes.get(end) == Some(&b';') { end + 1 } else { end })
}

/// Rough token count of text (about four bytes a token for English and code), for figures
/// that need no tokenizer; requests are estimated with [`crate::llm::tokens`].
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
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

    #[test]
    fn mentions_are_made_inert_and_emails_are_kept() {
        let z = MENTION_BREAK;
        assert_eq!(neutralise_mentions("cc @alice"), format!("cc @{z}alice"));
        assert_eq!(neutralise_mentions("@acme/team"), format!("@{z}acme/team"));
        assert_eq!(
            neutralise_mentions("_@erin_ `@frank` \\@grace"),
            format!("_@{z}erin_ `@{z}frank` \\@{z}grace")
        );
        assert_eq!(
            neutralise_mentions("&#64;carol &#x40;dan &COMMAT;eve &#0064x"),
            format!("@{z}carol @{z}dan @{z}eve @{z}x")
        );
        assert_eq!(
            neutralise_mentions("&#640; &amp; & @ me@example.com"),
            "&#640; &amp; & @ me@example.com"
        );
        let once = neutralise_mentions("@alice");
        assert_eq!(neutralise_mentions(&once), once, "applying it twice changes nothing");
    }
}
