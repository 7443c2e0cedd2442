//! The lenient path of the reply parser: finding the one reply object in text that is not
//! strict JSON (code fences, prose around the object, JSON5 syntax, and the almost-JSON that
//! [`super::rewrite`] repairs), and telling a cut-off reply from a stray brace or from one that
//! only lacks its final `}`. Never panics: nesting is measured by a flat scan before the
//! recursive JSON5 parser sees a candidate.

use serde_json::{Map, Value};

use super::ReplyError;
use super::repairs::Repair;
use super::rewrite::rewrite;
use super::unambiguous::Unambiguous;

/// An object found in the text, with the repairs it needed.
pub(super) type Found = (Map<String, Value>, Vec<Repair>);

/// Deeper than any legitimate reply (reply > tool_calls > call > arguments > a few levels of
/// value), and shallow enough that the recursive JSON5 parser and `Value`'s recursive drop stay
/// far from the stack limit even on small test-thread stacks.
pub(super) const MAX_NESTING: usize = 64;

/// Each `{` that never closes is rescanned from the next `{`, which is quadratic on inputs such as
/// a megabyte of `{`. Real replies have at most a few stray braces in their prose, so after this
/// many the rest of the text is not worth scanning.
pub(super) const MAX_UNCLOSED_SPANS: usize = 64;

/// Finds the single reply object in text that is not strict JSON.
pub(super) fn extract_object(text: &str) -> Result<Found, ReplyError> {
    // Fenced blocks come first so that braces in the surrounding prose (`fn main() {}`) cannot
    // compete with the reply; if the fences hold no reply (say, a code sample), the reply may be
    // outside them, so the whole text is searched instead.
    let blocks: Vec<&str> = fenced_blocks(text)
        .into_iter()
        .filter(|block| block.contains('{'))
        .collect();
    if !blocks.is_empty() {
        let mut findings = Findings::default();
        for block in &blocks {
            findings.scan_region(block);
        }
        if !findings.replies.is_empty() || findings.truncated > 0 {
            return findings.decide();
        }
    }
    let mut findings = Findings::default();
    findings.scan_region(text);
    findings.decide()
}

/// What a scan for `{ ... }` candidates turned up.
#[derive(Default)]
struct Findings {
    /// Complete objects with a `plan` or `tool_calls` key.
    replies: Vec<Found>,
    /// Complete objects that do not look like a reply (prose examples, stray `{}`, a call
    /// without the wrapper).
    others: Vec<Found>,
    /// The last of `others` is an item of a list that does not close right after it
    /// (`[{...}, ...` or `[{...}` cut off): it is not the whole of what the model sent.
    last_other_in_open_list: bool,
    /// Regions that end inside an object which is a valid prefix of JSON5.
    truncated: usize,
    too_deep: bool,
    /// First parse failure of a candidate that mentions `tool_calls`.
    invalid_reply: Option<String>,
    /// First parse failure of any other candidate.
    invalid_other: Option<String>,
}

impl Findings {
    fn scan_region(&mut self, region: &str) {
        let bytes = region.as_bytes();
        let mut pos = 0;
        let mut unclosed = 0;
        while let Some(offset) = bytes.get(pos..).and_then(|rest| rest.iter().position(|&b| b == b'{')) {
            let start = pos + offset;
            let span = scan_object(bytes, start);
            if span.closed {
                pos = span.end;
            } else {
                // An unclosed `{` may be a stray brace in prose with the real object after it,
                // so scanning resumes just past it rather than giving up.
                pos = start + 1;
                unclosed += 1;
            }
            // Spans start and end on ASCII bytes, so they are char boundaries; `get` keeps the
            // no-panic promise even if that reasoning were ever wrong.
            let Some(candidate) = region.get(span.start..span.end) else {
                continue;
            };
            if span.max_nesting > MAX_NESTING {
                self.too_deep = true;
            } else {
                match parse_candidate(candidate, span.closed) {
                    Candidate::Object(object, repairs) => {
                        if is_reply_like(&object) {
                            self.replies.push((object, repairs));
                        } else {
                            self.others.push((object, repairs));
                            self.last_other_in_open_list = in_open_list(bytes, span.start, span.end);
                        }
                    }
                    Candidate::NotObject => {}
                    Candidate::Truncated => {
                        // The unclosed span runs to the end of the region, so every later
                        // candidate is a piece of this cut-off object, not a reply of its own.
                        self.truncated += 1;
                        return;
                    }
                    Candidate::Invalid(detail) => {
                        let slot = if candidate.contains("tool_calls") {
                            &mut self.invalid_reply
                        } else {
                            &mut self.invalid_other
                        };
                        if slot.is_none() {
                            *slot = Some(detail);
                        }
                    }
                }
            }
            if unclosed >= MAX_UNCLOSED_SPANS {
                return;
            }
        }
    }

    fn decide(mut self) -> Result<Found, ReplyError> {
        // A complete reply next to a cut-off one is still two replies: picking either would be
        // a guess about what the model meant.
        let candidates = self.replies.len() + self.truncated;
        if candidates >= 2 {
            return Err(ReplyError::MultipleObjects { count: candidates });
        }
        if let Some(reply) = self.replies.pop() {
            return Ok(reply);
        }
        if self.truncated > 0 {
            return Err(ReplyError::Truncated);
        }
        if self.too_deep {
            return Err(ReplyError::TooDeep { limit: MAX_NESTING });
        }
        if let Some(detail) = self.invalid_reply {
            return Err(ReplyError::InvalidJson { detail });
        }
        if self.others.len() >= 2 {
            return Err(ReplyError::MultipleObjects {
                count: self.others.len(),
            });
        }
        // A lone object without reply fields is returned so that the shape check can say which
        // field is missing, which helps the model more than "no JSON object".
        if let Some((object, repairs)) = self.others.pop() {
            // One call of a list that goes on (or was cut off): running it alone would drop the
            // rest of what the model asked for.
            if self.last_other_in_open_list && super::is_call_like(&Value::Object(object.clone())) {
                return Err(ReplyError::MissingToolCalls);
            }
            return Ok((object, repairs));
        }
        if let Some(detail) = self.invalid_other {
            return Err(ReplyError::InvalidJson { detail });
        }
        Err(ReplyError::NoJsonObject)
    }
}

/// True when the object at `start..end` follows a `[` or `,` and is not followed by `]`.
fn in_open_list(bytes: &[u8], start: usize, end: usize) -> bool {
    let before = bytes
        .get(..start)
        .and_then(|head| head.iter().rev().find(|b| !b.is_ascii_whitespace()));
    let after = bytes
        .get(end..)
        .and_then(|tail| tail.iter().find(|b| !b.is_ascii_whitespace()));
    matches!(before, Some(b'[' | b',')) && after != Some(&b']')
}

/// What one `{ ... }` candidate turned out to be.
enum Candidate {
    Object(Map<String, Value>, Vec<Repair>),
    NotObject,
    Truncated,
    /// Not readable, with the parser's description of the first problem in the original text.
    Invalid(String),
}

/// JSON5 first; then the repaired text; then, for a candidate that only lacks its outermost
/// `}` and holds calls, the repaired text closed. A reply whose calls array is closed and
/// nothing after it is open has only one possible ending, so that is not a guess; anything else
/// that runs out of text is reported as truncated.
fn parse_candidate(candidate: &str, closed: bool) -> Candidate {
    let original = match json5::from_str::<Unambiguous>(candidate) {
        Ok(Unambiguous(Value::Object(object))) => return Candidate::Object(object, Vec::new()),
        Ok(_) => return Candidate::NotObject,
        Err(err) => err,
    };
    let rewritten = rewrite(candidate);
    let mut truncated = is_truncation(&original, candidate);
    if !rewritten.repairs.is_empty() {
        match json5::from_str::<Unambiguous>(&rewritten.text) {
            Ok(Unambiguous(Value::Object(object))) => return Candidate::Object(object, rewritten.repairs),
            Ok(_) => return Candidate::NotObject,
            Err(err) => truncated = is_truncation(&err, &rewritten.text),
        }
    }
    if !closed && rewritten.lacks_only_final_brace {
        let text = format!("{}}}", rewritten.text);
        if let Ok(Unambiguous(Value::Object(object))) = json5::from_str::<Unambiguous>(&text)
            && object.contains_key("tool_calls")
        {
            let mut repairs = rewritten.repairs;
            repairs.push(Repair::MissingFinalBrace);
            return Candidate::Object(object, repairs);
        }
    }
    if !closed && truncated {
        return Candidate::Truncated;
    }
    Candidate::Invalid(describe_json5_error(&original, candidate, "the object's opening brace"))
}

pub(super) fn is_reply_like(object: &Map<String, Value>) -> bool {
    object.contains_key("tool_calls") || object.contains_key("plan")
}

/// `“` and `”` in UTF-8.
const SMART_OPEN: [u8; 3] = [0xE2, 0x80, 0x9C];
const SMART_CLOSE: [u8; 3] = [0xE2, 0x80, 0x9D];

/// Extent of one `{ ... }` candidate found by [`scan_object`].
pub(super) struct Span {
    start: usize,
    pub(super) end: usize,
    pub(super) closed: bool,
    pub(super) max_nesting: usize,
}

/// Scans from the `{` at `start` to its matching `}`, skipping strings of both quote kinds and
/// JSON5 comments, and measures nesting so that over-deep input never reaches the recursive
/// parser. Works on bytes: every delimiter is ASCII, and UTF-8 continuation bytes never equal an
/// ASCII byte, so multi-byte characters pass through untouched.
pub(super) fn scan_object(bytes: &[u8], start: usize) -> Span {
    let mut braces = 0usize;
    let mut nesting = 0usize;
    let mut max_nesting = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' | b'\'' => quote = Some(b),
            // `# ...` comments, which the rewrite removes: an apostrophe in one must not open a
            // string here. A `#` glued to a word (`{#12}` in prose) is not one.
            b'#' if bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace) => {
                i = find_from(bytes, i + 1, b"\n").unwrap_or(bytes.len());
                continue;
            }
            // A string between smart quotes: skipped so that braces in it are content.
            0xE2 if bytes.get(i..i + 3) == Some(SMART_OPEN.as_slice()) => {
                i = find_from(bytes, i + 3, &SMART_CLOSE).map_or(bytes.len(), |at| at + 3);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = find_from(bytes, i + 2, b"\n").unwrap_or(bytes.len());
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = find_from(bytes, i + 2, b"*/").map_or(bytes.len(), |at| at + 2);
                continue;
            }
            b'{' | b'[' => {
                nesting += 1;
                max_nesting = max_nesting.max(nesting);
                if b == b'{' {
                    braces += 1;
                }
            }
            b'}' | b']' => {
                nesting = nesting.saturating_sub(1);
                if b == b'}' {
                    braces = braces.saturating_sub(1);
                    if braces == 0 {
                        return Span {
                            start,
                            end: i + 1,
                            closed: true,
                            max_nesting,
                        };
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    Span {
        start,
        end: bytes.len(),
        closed: false,
        max_nesting,
    }
}

fn find_from(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| from + at)
}

/// True when the parser ran out of input rather than meeting a wrong character, i.e. the text is
/// a valid beginning of an object. This is what separates a cut-off reply from a stray `{` in
/// prose, which fails on the next character instead.
pub(super) fn is_truncation(err: &json5::Error, text: &str) -> bool {
    use json5::ErrorCode as C;
    match err.code() {
        Some(
            C::EofParsingArray
            | C::EofParsingBool
            | C::EofParsingComment
            | C::EofParsingEscapeSequence
            | C::EofParsingIdentifier
            | C::EofParsingNull
            | C::EofParsingNumber
            | C::EofParsingObject
            | C::EofParsingString
            | C::EofParsingValue,
        ) => true,
        // A number cut mid-exponent (`1e`) is reported as a bad literal at its start; when that
        // literal is the last thing in the text it is a cut, not a mistake.
        _ => err.position().is_some_and(|position| {
            let offset = offset_of(text, position);
            text.get(offset..).is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            })
        }),
    }
}

/// Byte offset of a json5 line/column position, so the error can quote the text around it.
fn offset_of(text: &str, position: json5::Position) -> usize {
    let mut line = 0;
    let mut column = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if line == position.line && column == position.column {
            return at;
        }
        match c {
            '\r' if chars.peek().is_some_and(|&(_, next)| next == '\n') => {
                chars.next();
                line += 1;
                column = 0;
            }
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => {
                line += 1;
                column = 0;
            }
            _ => column += 1,
        }
    }
    text.len()
}

/// The parser's message plus the text around the problem: line and column alone are hard for a
/// model to map back onto its own output, a quoted excerpt is not.
pub(super) fn describe_json5_error(err: &json5::Error, text: &str, origin: &str) -> String {
    let Some(position) = err.position() else {
        return err.to_string();
    };
    let offset = offset_of(text, position);
    let before: String = {
        let head = text.get(..offset).unwrap_or_default();
        let mut tail: Vec<char> = head.chars().rev().take(30).collect();
        tail.reverse();
        tail.into_iter().collect()
    };
    let after: String = text.get(offset..).unwrap_or_default().chars().take(30).collect();
    let excerpt = format!("{before}{after}").replace('\r', "").replace('\n', "\\n");
    format!("{err} (counting from {origin}), near `{excerpt}`")
}

/// Contents of markdown code fences (with or without a language tag). A fence left open, as in
/// a reply cut off by the length limit, runs to the end of the text so truncation is still seen.
pub(super) fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let this_line = line_start;
        line_start += line.len();
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        match open {
            None => {
                let Some(rest) = trimmed.strip_prefix("```") else {
                    continue;
                };
                // Some models put the object on the fence line itself: ```json {...}```
                match rest.find('{') {
                    Some(brace) => {
                        let start = this_line + indent + 3 + brace;
                        let body = rest.get(brace..).unwrap_or_default();
                        match body.trim_end().strip_suffix("```") {
                            Some(inner) => {
                                if let Some(block) = text.get(start..start + inner.len()) {
                                    blocks.push(block);
                                }
                            }
                            None => open = Some(start),
                        }
                    }
                    None => open = Some(line_start),
                }
            }
            Some(start) => {
                let close = if trimmed.starts_with("```") {
                    Some(this_line + indent)
                } else if trimmed.ends_with("```") {
                    line.rfind("```").map(|at| this_line + at)
                } else {
                    None
                };
                if let Some(end) = close {
                    if let Some(block) = text.get(start..end) {
                        blocks.push(block);
                    }
                    open = None;
                }
            }
        }
    }
    if let Some(block) = open.and_then(|start| text.get(start..)) {
        blocks.push(block);
    }
    blocks
}
