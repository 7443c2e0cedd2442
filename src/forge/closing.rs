//! Closing references in what the bot sends. A pull request whose description or commit message
//! says `Fixes #8` closes #8 when it is merged; so does `Fixes other/repo#1` or an issue URL, in
//! another repository. The model writes titles and bodies, but which issue a pull request closes
//! is the run's decision (DESIGN section 8b): every closing keyword in model text that names
//! anything but the run's own issue is rewritten so that it no longer closes anything, and the
//! bot adds its own `Closes #N` ([`super::body_with_issue`]).
//!
//! The words stay for people to read: `Fixes #8` becomes `Fixes (see #8)`, which no forge reads
//! as a closing reference (the keyword must be followed by the reference itself).

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// A closing keyword (`close`, `fix`, `resolve` in every form, any case) followed by a list of
/// things that look like references: anything holding `#` or `/`, or `GH-N`, separated by
/// commas, `and` or `&`. Between the keyword and the list: white space, a colon, and anything
/// that renders as nothing or as formatting (tags and HTML comments, emphasis, brackets), so
/// that `Fixes <!-- -->#8` or `Fixes **#8**` count too, whatever the forge reads. The keyword's
/// word boundary is ASCII, as the forge's is, so `éfixes #8` still counts.
static CLOSING: LazyLock<Regex> = LazyLock::new(|| {
    let reference = r"[^\s,]*(?:[#/]|(?i:gh-)\d)[^\s,]*";
    Regex::new(&format!(
        r"(?i)(?-u:\b)(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?-u:\b)((?:\s|:|<[^>]*>|[*_`~\[(])*)({reference}(?:\s*(?:,|\band\b|&)\s*{reference})*)"
    ))
    .expect("a constant pattern, exercised by the tests below")
});

/// `text` with every closing reference to anything but `#keep` (when given) made inert.
pub(crate) fn neutralise(text: &str, keep: Option<u64>) -> String {
    let kept = keep.map(|number| format!("#{number}"));
    CLOSING
        .replace_all(text, |caps: &Captures<'_>| {
            let separator = &caps[2];
            let references = &caps[3];
            let plain = separator.chars().all(|c| c.is_whitespace() || c == ':');
            let only_kept = references
                .split(|c: char| c == ',' || c == '&' || c.is_whitespace())
                .map(|item| item.trim_end_matches(['.', ';', ':', '!', '?', ')']))
                .filter(|item| !item.is_empty() && !item.eq_ignore_ascii_case("and"))
                .all(|item| kept.as_deref() == Some(item));
            if plain && only_kept {
                caps[0].to_owned()
            } else {
                let junk = separator.trim_start_matches(|c: char| c.is_whitespace() || c == ':');
                format!("{} (see {junk}{references})", &caps[1])
            }
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::neutralise;

    #[test]
    fn only_the_kept_issue_stays_a_closing_reference() {
        assert_eq!(neutralise("Fixes #7.", Some(7)), "Fixes #7.");
        assert_eq!(neutralise("Fixes #8", Some(7)), "Fixes (see #8)");
        assert_eq!(neutralise("Fixes #7", None), "Fixes (see #7)");
        assert_eq!(neutralise("closes: other/repo#1", Some(7)), "closes (see other/repo#1)");
        assert_eq!(
            neutralise("Resolved https://github.com/o/r/issues/1 now", Some(7)),
            "Resolved (see https://github.com/o/r/issues/1) now"
        );
        assert_eq!(neutralise("fixes GH-3", Some(7)), "fixes (see GH-3)");
        assert_eq!(neutralise("Fixes #7, #8", Some(7)), "Fixes (see #7, #8)");
        assert_eq!(neutralise("fix #7 and o/r#2", Some(7)), "fix (see #7 and o/r#2)");
        assert_eq!(
            neutralise("Fixes#8 éfixes #9", Some(7)),
            "Fixes (see #8) éfixes (see #9)"
        );
        assert_eq!(neutralise("FIXES **#8**", Some(7)), "FIXES (see **#8**)");
        assert_eq!(neutralise("Fixes <!-- -->#8", Some(7)), "Fixes (see <!-- -->#8)");
        assert_eq!(neutralise("Fixes *#7*", Some(7)), "Fixes (see *#7*)");
        assert_eq!(
            neutralise("Fixes [#8](https://x/8)", Some(7)),
            "Fixes (see [#8](https://x/8))"
        );
    }

    #[test]
    fn ordinary_words_and_repeated_passes_are_left_alone() {
        let plain = "Fixes the typo; prefixes #8 stay; a fix to the closing logic";
        assert_eq!(neutralise(plain, Some(7)), plain);
        let once = neutralise("Fixes #8 and closes other/repo#9", Some(7));
        assert_eq!(neutralise(&once, Some(7)), once);
    }
}
