//! Keeping a file's own conventions when the model rewrites or edits it.
//!
//! Models write `\n` line breaks and often drop a file's final newline. Real files use CRLF
//! (Windows projects, `.bat` files) and nearly always end with a newline, and a pull request
//! that flips every line ending or strips the last newline is noise a reviewer must reject.
//! So an edit matches across line-ending styles, and both tools write back in the file's style.

/// How a file breaks its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineEnding {
    Lf,
    /// Every line break is `\r\n`.
    Crlf,
}

impl LineEnding {
    /// The style of `text`: CRLF only when it has CRLF breaks and no bare `\n` (a mixed file is
    /// left exactly as the model writes it).
    pub(crate) fn of(text: &str) -> Self {
        let breaks = text.matches('\n').count();
        let crlf = text.matches("\r\n").count();
        if crlf > 0 && crlf == breaks {
            LineEnding::Crlf
        } else {
            LineEnding::Lf
        }
    }

    fn newline(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::Crlf => "\r\n",
        }
    }

    /// `text` with its line breaks in this style. Text that already holds a `\r` is the model
    /// writing line endings on purpose and is left alone.
    pub(crate) fn apply(self, text: &str) -> String {
        match self {
            LineEnding::Crlf if !text.contains('\r') => text.replace('\n', "\r\n"),
            LineEnding::Lf if text.contains("\r\n") => text.replace("\r\n", "\n"),
            _ => text.to_owned(),
        }
    }
}

/// New content for a file that held `previous`: in its line-ending style, and ending with a
/// newline when the previous content did (unless the new content is empty).
pub(crate) fn conform(previous: &str, new: &str) -> String {
    let style = LineEnding::of(previous);
    let mut text = match style {
        LineEnding::Crlf => style.apply(new),
        LineEnding::Lf => new.to_owned(),
    };
    let ended_with_newline = previous.ends_with('\n');
    if ended_with_newline && !text.is_empty() && !text.ends_with('\n') {
        text.push_str(style.newline());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_detected_and_applied() {
        assert_eq!(LineEnding::of("a\r\nb\r\n"), LineEnding::Crlf);
        assert_eq!(LineEnding::of("a\nb\n"), LineEnding::Lf);
        assert_eq!(LineEnding::of("a\r\nb\n"), LineEnding::Lf, "mixed stays as written");
        assert_eq!(LineEnding::Crlf.apply("x\ny"), "x\r\ny");
        assert_eq!(LineEnding::Lf.apply("x\r\ny"), "x\ny");
    }

    #[test]
    fn a_rewrite_keeps_the_final_newline_and_the_line_endings() {
        assert_eq!(conform("a\nb\n", "a\nc"), "a\nc\n");
        assert_eq!(conform("a\r\nb\r\n", "a\nc"), "a\r\nc\r\n");
        assert_eq!(conform("no newline", "still none"), "still none");
        assert_eq!(conform("a\n", ""), "", "an emptied file stays empty");
        assert_eq!(conform("a\n", "kept\n"), "kept\n");
    }
}
