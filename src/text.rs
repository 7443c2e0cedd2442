//! Cutting text to a size without splitting a character. Prompts, comments, error messages and
//! progress lines all bound what they show; they share these so every cut lands on a character
//! boundary and says it was cut.

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
}
