//! Rewrites almost-JSON into JSON5 that means what the model wrote, naming each repair.
//!
//! Why this exists: small models write replies that a person reads without hesitation but JSON5
//! rejects: `# comments`, Python's `True`/`None`, “smart quotes” as delimiters, raw newlines
//! inside strings, a forgotten comma, `"a" + "b"`. Each of those has exactly one reading, so
//! re-asking would waste a turn. The rewrite works token by token, so text inside a string is
//! never touched: a `#`, a `True` or a smart quote inside a string stays content.
//!
//! What it guarantees: one flat pass over the text (no recursion, linear time apart from a
//! bounded look-ahead per missing comma), and it only ever adds a repair where the original
//! could not parse, so a reply that was already valid keeps its meaning. Anything that would
//! need a guess (two strings side by side, a value where a key should be) is left as it is for
//! the parser to reject.

use super::repairs::Repair;

/// The rewritten text and what was repaired in it.
pub(super) struct Rewritten {
    pub(super) text: String,
    pub(super) repairs: Vec<Repair>,
    /// Deepest nesting of `{` and `[`, so that callers can refuse over-deep text before the
    /// recursive parser sees it.
    pub(super) max_depth: usize,
    /// Only the outermost object is left open, and the last thing in it is a complete string,
    /// object or array: the one place its `}` can go is the end.
    pub(super) lacks_only_final_brace: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Container {
    Object,
    Array,
}

/// Where the rewrite stands in the grammar: what the next token may be.
#[derive(Clone, Copy, PartialEq)]
enum State {
    ExpectKey,
    AfterKey,
    ExpectValue,
    AfterValue,
}

/// The kind of the last complete token, which decides whether a comma may be missing after it.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    Nothing,
    Word,
    Quoted,
    Closed,
}

/// Rewrites `text`; see the module documentation.
pub(super) fn rewrite(text: &str) -> Rewritten {
    let chars: Vec<char> = text.chars().collect();
    let mut rewriter = Rewriter {
        chars: &chars,
        pos: 0,
        out: String::with_capacity(text.len() + 16),
        repairs: Vec::new(),
        stack: Vec::new(),
        state: State::ExpectValue,
        last: Last::Nothing,
        max_depth: 0,
        unterminated: false,
    };
    rewriter.run();
    let lacks_only_final_brace = !rewriter.unterminated
        && rewriter.stack == [Container::Object]
        && rewriter.state == State::AfterValue
        && matches!(rewriter.last, Last::Quoted | Last::Closed);
    let mut repairs = rewriter.repairs;
    repairs.sort_unstable();
    repairs.dedup();
    Rewritten {
        text: rewriter.out,
        repairs,
        max_depth: rewriter.max_depth,
        lacks_only_final_brace,
    }
}

struct Rewriter<'a> {
    chars: &'a [char],
    pos: usize,
    out: String,
    repairs: Vec<Repair>,
    stack: Vec<Container>,
    state: State,
    last: Last,
    max_depth: usize,
    /// The text ends inside a string or a comment.
    unterminated: bool,
}

fn is_quote(c: char) -> bool {
    matches!(c, '"' | '\'' | '“' | '”')
}

fn is_word_start(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '-' | '+' | '.')
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '.')
}

impl Rewriter<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, at: usize) -> Option<char> {
        self.chars.get(at).copied()
    }

    fn note(&mut self, repair: Repair) {
        if self.repairs.last() != Some(&repair) {
            self.repairs.push(repair);
        }
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '/' if self.peek_at(self.pos + 1) == Some('/') => self.copy_line_comment(),
                '/' if self.peek_at(self.pos + 1) == Some('*') => self.copy_block_comment(),
                // `#` has no meaning outside a string in JSON or JSON5, so dropping the rest of
                // the line cannot drop anything the model meant as data. Only `# ` counts, as
                // comments are written; a `#` glued to a word is left for the parser to reject.
                '#' if self.peek_at(self.pos + 1).is_none_or(char::is_whitespace) => {
                    self.note(Repair::HashComments);
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                c if is_quote(c) => {
                    self.comma_if_a_key_follows();
                    let body = self.read_concatenated_strings();
                    self.out.push('"');
                    self.out.push_str(&body);
                    self.out.push('"');
                    self.completed(Last::Quoted);
                }
                '{' | '[' => {
                    // Two calls side by side in an array, `} {`, cannot mean anything but two
                    // items; in an object a `{` after a value has no such reading.
                    if self.state == State::AfterValue
                        && self.stack.last() == Some(&Container::Array)
                        && self.last == Last::Closed
                    {
                        self.out.push(',');
                        self.note(Repair::MissingCommas);
                    }
                    let container = if c == '{' { Container::Object } else { Container::Array };
                    self.stack.push(container);
                    self.max_depth = self.max_depth.max(self.stack.len());
                    self.state = match container {
                        Container::Object => State::ExpectKey,
                        Container::Array => State::ExpectValue,
                    };
                    self.out.push(c);
                    self.pos += 1;
                }
                '}' | ']' => {
                    self.stack.pop();
                    self.out.push(c);
                    self.pos += 1;
                    self.state = State::AfterValue;
                    self.last = Last::Closed;
                }
                ':' => {
                    if self.state == State::AfterKey {
                        self.state = State::ExpectValue;
                    }
                    self.out.push(c);
                    self.pos += 1;
                }
                ',' => {
                    self.state = match self.stack.last() {
                        Some(Container::Object) => State::ExpectKey,
                        _ => State::ExpectValue,
                    };
                    self.last = Last::Nothing;
                    self.out.push(c);
                    self.pos += 1;
                }
                // A sign starts a number only where a value may start; after a value, `+` and
                // `-` are left for the parser to reject.
                c if is_word_char(c) || (is_word_start(c) && self.state != State::AfterValue) => {
                    self.comma_if_a_key_follows();
                    let start = self.pos;
                    self.pos += 1;
                    while let Some(c) = self.peek() {
                        let exponent_sign = matches!(c, '+' | '-')
                            && matches!(self.peek_at(self.pos - 1), Some('e' | 'E'))
                            && self
                                .peek_at(start)
                                .is_some_and(|s| s.is_ascii_digit() || matches!(s, '-' | '+' | '.'));
                        if is_word_char(c) || exponent_sign {
                            self.pos += 1;
                        } else {
                            break;
                        }
                    }
                    let word: String = self.chars.get(start..self.pos).unwrap_or_default().iter().collect();
                    let literal = match word.as_str() {
                        "True" => Some("true"),
                        "False" => Some("false"),
                        "None" => Some("null"),
                        _ => None,
                    };
                    match literal {
                        // As a key, `True` is a JSON5 identifier and stays one.
                        Some(literal) if self.state == State::ExpectValue => {
                            self.note(Repair::PythonLiterals);
                            self.out.push_str(literal);
                        }
                        _ => self.out.push_str(&word),
                    }
                    self.completed(Last::Word);
                }
                c => {
                    self.out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// A key or value has just been read.
    fn completed(&mut self, last: Last) {
        self.state = match self.state {
            State::ExpectKey => State::AfterKey,
            _ => State::AfterValue,
        };
        self.last = last;
    }

    /// In an object, a value followed by `key:` is a member whose comma was forgotten; nothing
    /// else can follow a value there. Anywhere else the token is left for the parser to reject.
    fn comma_if_a_key_follows(&mut self) {
        if self.state != State::AfterValue || self.stack.last() != Some(&Container::Object) {
            return;
        }
        let Some(c) = self.peek() else { return };
        let mut at = self.pos + 1;
        if is_quote(c) {
            let close = if matches!(c, '“' | '”') { '”' } else { c };
            loop {
                match self.peek_at(at) {
                    None => return,
                    Some('\\') => at += 2,
                    Some(x) if x == close => break,
                    Some(_) => at += 1,
                }
            }
            at += 1;
        } else {
            while self.peek_at(at).is_some_and(is_word_char) {
                at += 1;
            }
        }
        while self.peek_at(at).is_some_and(char::is_whitespace) {
            at += 1;
        }
        if self.peek_at(at) == Some(':') {
            self.out.push(',');
            self.note(Repair::MissingCommas);
            self.state = State::ExpectKey;
        }
    }

    /// One string, or several joined with `+`, as the body of a double-quoted JSON5 string.
    fn read_concatenated_strings(&mut self) -> String {
        let mut body = self.read_string();
        loop {
            let mut at = self.pos;
            while self.peek_at(at).is_some_and(char::is_whitespace) {
                at += 1;
            }
            if self.peek_at(at) != Some('+') {
                return body;
            }
            at += 1;
            while self.peek_at(at).is_some_and(char::is_whitespace) {
                at += 1;
            }
            if !self.peek_at(at).is_some_and(is_quote) {
                return body;
            }
            self.pos = at;
            self.note(Repair::StringConcatenation);
            body.push_str(&self.read_string());
        }
    }

    /// Reads the string at `pos` (any of the four delimiters) and returns its body written for
    /// double quotes. Escapes are kept as written, so what the model escaped means the same.
    fn read_string(&mut self) -> String {
        let open = self.peek().unwrap_or('"');
        let smart = matches!(open, '“' | '”');
        if smart {
            self.note(Repair::SmartQuotes);
        }
        let close = if smart { '”' } else { open };
        self.pos += 1;
        let mut body = String::new();
        loop {
            let Some(c) = self.peek() else {
                self.unterminated = true;
                return body;
            };
            self.pos += 1;
            match c {
                '\\' => {
                    body.push('\\');
                    if let Some(escaped) = self.peek() {
                        body.push(escaped);
                        self.pos += 1;
                    }
                }
                c if c == close => return body,
                '"' => body.push_str("\\\""),
                '\n' | '\r' | '\t' => {
                    self.note(Repair::RawControlCharacters);
                    body.push_str(match c {
                        '\n' => "\\n",
                        '\r' => "\\r",
                        _ => "\\t",
                    });
                }
                c if u32::from(c) < 0x20 => {
                    self.note(Repair::RawControlCharacters);
                    body.push_str(&format!("\\u{:04x}", u32::from(c)));
                }
                c => body.push(c),
            }
        }
    }

    fn copy_line_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                return;
            }
            self.out.push(c);
            self.pos += 1;
        }
    }

    fn copy_block_comment(&mut self) {
        self.out.push_str("/*");
        self.pos += 2;
        while let Some(c) = self.peek() {
            if c == '*' && self.peek_at(self.pos + 1) == Some('/') {
                self.out.push_str("*/");
                self.pos += 2;
                return;
            }
            self.out.push(c);
            self.pos += 1;
        }
        self.unterminated = true;
    }
}
