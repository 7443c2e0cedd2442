//! The headings of a prompt as a Markdown reader sees them, for the tests of untrusted text:
//! whatever a repository, an issue or a model writes into a prompt is fenced, so it must not
//! add a heading of its own. One copy serves the unit tests and, included by `#[path]`, the
//! integration tests (`tests/suite/support`).

/// The `#` lines of `text` outside code fences (a fence closes only on a line of at least as
/// many backticks as opened it).
pub fn headings_outside_fences(text: &str) -> Vec<&str> {
    let mut fence: Option<usize> = None;
    let mut headings = Vec::new();
    for line in text.lines() {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match fence {
            Some(open) if ticks >= open && line.trim_start_matches('`').trim().is_empty() => fence = None,
            Some(_) => {}
            None if ticks >= 3 => fence = Some(ticks),
            None if line.starts_with('#') => headings.push(line),
            None => {}
        }
    }
    headings
}

/// The top-level (`# `) headings among [`headings_outside_fences`]: the sections of a prompt.
pub fn sections_outside_fences(text: &str) -> Vec<&str> {
    headings_outside_fences(text)
        .into_iter()
        .filter(|heading| heading.starts_with("# "))
        .collect()
}
