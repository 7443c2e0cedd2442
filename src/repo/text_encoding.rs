//! The one place where a repository file's bytes become text for the model and text becomes
//! bytes again: every file tool decodes and encodes through here, right beside the gate.
//!
//! Why: repositories hold latin-1 sources, UTF-16 resource files, Shift_JIS documents. A lossy
//! decode turns every byte it does not understand into U+FFFD, and writing that text back
//! commits the damage. So a file is decoded exactly (never with replacement), its encoding is
//! remembered, and the text the model writes goes back in that encoding or not at all.
//!
//! How a file is read, in order:
//! 1. A byte-order mark (UTF-8, UTF-16LE, UTF-16BE) decides the encoding; content that is not
//!    valid in it is refused, never guessed around. The mark is kept on write.
//! 2. Otherwise a NUL byte anywhere makes the file binary, as git decides (text in any
//!    ASCII-compatible encoding has none; UTF-16 without a byte-order mark is binary here).
//! 3. Valid UTF-8 is UTF-8.
//! 4. Anything else is a legacy encoding guessed by `chardetng` (windows-1252, Shift_JIS,
//!    GBK, EUC-KR, ...), decoded strictly; should the guess not decode, windows-1252 does, as
//!    it maps every byte. Encodings are named as `encoding_rs` names them (the WHATWG names: a
//!    file labelled ISO-8859-1 is windows-1252, which holds `€`).
//!
//! Guarantees: decoding never yields U+FFFD for a byte (only a U+FFFD the file really holds);
//! encoding never substitutes a character, it names the first one the encoding cannot hold;
//! `DecodedText::round_trips` says whether writing the decoded text back gives the very same
//! bytes (some legacy encodings have two byte sequences for one character).

use encoding_rs::{DecoderResult, EncoderResult, Encoding, GB18030, UTF_8, UTF_16BE, UTF_16LE, WINDOWS_1252};

/// Most bytes the detector looks at. Guessing costs time in proportion to the bytes seen (a
/// 16 MiB read took seconds), and the beginning decides as well as the whole; it is also the
/// most `write_file`/`edit_file` read, so every tool guesses the same for one file.
const MAX_DETECT_BYTES: usize = 1024 * 1024;

/// How a file's text is stored as bytes: an encoding and whether a byte-order mark leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextEncoding {
    encoding: &'static Encoding,
    bom: bool,
    /// Guessed from the bytes (the file does not say).
    guessed: bool,
}

impl TextEncoding {
    /// UTF-8 without a byte-order mark: what new files are written in.
    pub(crate) const UTF8: Self = Self {
        encoding: UTF_8,
        bom: false,
        guessed: false,
    };

    /// The encoding's name as `encoding_rs` gives it (`windows-1252`, `Shift_JIS`, `UTF-16LE`).
    pub(crate) fn name(&self) -> &'static str {
        self.encoding.name()
    }

    pub(crate) fn has_bom(&self) -> bool {
        self.bom
    }

    pub(crate) fn is_plain_utf8(&self) -> bool {
        *self == Self::UTF8
    }

    /// Unicode encodings (and GB18030) hold every character: nothing is ever refused.
    pub(crate) fn holds_every_character(&self) -> bool {
        [UTF_8, UTF_16LE, UTF_16BE, GB18030].contains(&self.encoding)
    }

    /// For people and the model: `UTF-16LE with a byte-order mark`, `windows-1252 (detected)`.
    pub(crate) fn describe(&self) -> String {
        let name = self.name();
        match (self.bom, self.guessed) {
            (true, _) => format!("{name} with a byte-order mark"),
            (false, true) => format!("{name} (detected)"),
            (false, false) => name.to_owned(),
        }
    }

    /// `text` as bytes in this encoding, the byte-order mark first when the file had one (a
    /// mark the text itself starts with is that one, not a second).
    pub(crate) fn encode(&self, text: &str) -> Result<Vec<u8>, Unencodable> {
        let text = if self.bom {
            text.strip_prefix('\u{FEFF}').unwrap_or(text)
        } else {
            text
        };
        if self.encoding == UTF_16LE || self.encoding == UTF_16BE {
            // encoding_rs only decodes UTF-16 (on the web it is never an output encoding).
            let little = self.encoding == UTF_16LE;
            let mut bytes = Vec::with_capacity(2 + text.len() * 2);
            for unit in self.bom.then_some(0xFEFF).into_iter().chain(text.encode_utf16()) {
                bytes.extend(if little { unit.to_le_bytes() } else { unit.to_be_bytes() });
            }
            return Ok(bytes);
        }
        let mut bytes = Vec::new();
        if self.bom {
            bytes.extend_from_slice(b"\xEF\xBB\xBF");
        }
        if self.encoding == UTF_8 {
            bytes.extend_from_slice(text.as_bytes());
            return Ok(bytes);
        }
        if self.encoding.output_encoding() != self.encoding {
            // `replacement` and `x-user-defined`: never guessed, but never written either.
            return Err(Unencodable::Encoding(self.name()));
        }
        let mut encoder = self.encoding.new_encoder();
        let needed = encoder
            .max_buffer_length_from_utf8_without_replacement(text.len())
            .unwrap_or(text.len());
        bytes.reserve(needed);
        let mut rest = text;
        loop {
            let (result, read) = encoder.encode_from_utf8_to_vec_without_replacement(rest, &mut bytes, true);
            rest = rest.get(read..).unwrap_or("");
            match result {
                EncoderResult::InputEmpty => return Ok(bytes),
                EncoderResult::OutputFull => bytes.reserve(rest.len().saturating_mul(4).max(16)),
                EncoderResult::Unmappable(character) => {
                    return Err(Unencodable::Character {
                        character,
                        encoding: self.name(),
                    });
                }
            }
        }
    }
}

/// Text that cannot be written in a file's encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unencodable {
    #[error("{} (U+{:04X}) cannot be written in {encoding}", character.escape_debug(), u32::from(*character))]
    Character { character: char, encoding: &'static str },
    #[error("upkeep cannot write text in {0}")]
    Encoding(&'static str),
}

/// Whether the bytes are the whole file or only its beginning (a read cut at a size cap):
/// a prefix may end inside a character, which is then left out rather than refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    Whole,
    Prefix,
}

impl Input {
    pub(crate) fn cut(truncated: bool) -> Self {
        if truncated { Input::Prefix } else { Input::Whole }
    }

    fn is_last(self) -> bool {
        self == Input::Whole
    }
}

/// A file's bytes as text, and how to write text back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodedText {
    pub(crate) text: String,
    pub(crate) encoding: TextEncoding,
    /// For a file that is not UTF-8: the line (1-based) of its first byte that is not UTF-8,
    /// which shows where a file of mixed encodings goes wrong.
    pub(crate) first_non_utf8_line: Option<usize>,
}

impl DecodedText {
    /// Whether encoding the text again gives exactly the bytes it was decoded from, so an edit
    /// changes only what it replaces. `original` must be the bytes given to [`decode`].
    pub(crate) fn round_trips(&self, original: &[u8]) -> bool {
        self.encoding.encode(&self.text).is_ok_and(|bytes| bytes == original)
    }
}

/// Why bytes are not text upkeep will show or edit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotText {
    #[error("a binary file (it holds NUL bytes)")]
    Binary,
    /// Refused for reading and editing; a whole new content is still written in the encoding
    /// the mark names, with the mark.
    #[error("not valid {name} although it starts with a {name} byte-order mark", name = .0.name())]
    BadBom(TextEncoding),
}

/// Decodes a file's bytes exactly; see the module's rules.
pub(crate) fn decode(bytes: &[u8], input: Input) -> Result<DecodedText, NotText> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let body = bytes.get(bom_len..).unwrap_or_default();
        let marked = TextEncoding {
            encoding,
            bom: true,
            guessed: false,
        };
        let text = decode_strict(encoding, body, input).ok_or(NotText::BadBom(marked))?;
        if text.contains('\0') {
            return Err(NotText::Binary);
        }
        return Ok(DecodedText {
            text,
            encoding: marked,
            first_non_utf8_line: None,
        });
    }
    if bytes.contains(&0) {
        return Err(NotText::Binary);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // A prefix cut inside a character: the character is left out.
        Err(error) if error.error_len().is_none() && input == Input::Prefix => {
            std::str::from_utf8(bytes.get(..error.valid_up_to()).unwrap_or_default()).unwrap_or_default()
        }
        Err(error) => return Ok(decode_legacy(bytes, input, error.valid_up_to())),
    }
    .to_owned();
    Ok(DecodedText {
        text,
        encoding: TextEncoding::UTF8,
        first_non_utf8_line: None,
    })
}

/// Bytes that are not UTF-8 and have no NUL: a legacy encoding, guessed.
fn decode_legacy(bytes: &[u8], input: Input, valid_up_to: usize) -> DecodedText {
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    let sample = bytes.get(..MAX_DETECT_BYTES).unwrap_or(bytes);
    detector.feed(sample, input.is_last() && sample.len() == bytes.len());
    let guess = detector.guess(None, chardetng::Utf8Detection::Deny);
    let (encoding, text) = match decode_strict(guess, bytes, input) {
        Some(text) => (guess, text),
        None => (
            WINDOWS_1252,
            // windows-1252 maps every byte, so this decode never replaces anything.
            decode_strict(WINDOWS_1252, bytes, input)
                .unwrap_or_else(|| WINDOWS_1252.decode_without_bom_handling(bytes).0.into_owned()),
        ),
    };
    let first_line = bytes
        .get(..valid_up_to)
        .unwrap_or(bytes)
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1;
    DecodedText {
        text,
        encoding: TextEncoding {
            encoding,
            bom: false,
            guessed: true,
        },
        first_non_utf8_line: Some(first_line),
    }
}

/// `bytes` decoded without replacement: `None` at the first malformed sequence. A prefix may
/// end inside a character, which is left out.
fn decode_strict(encoding: &'static Encoding, bytes: &[u8], input: Input) -> Option<String> {
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let capacity = decoder.max_utf8_buffer_length_without_replacement(bytes.len())?;
    let mut text = String::with_capacity(capacity);
    let (result, _read) = decoder.decode_to_string_without_replacement(bytes, &mut text, input.is_last());
    match result {
        DecoderResult::InputEmpty => Some(text),
        DecoderResult::Malformed(..) | DecoderResult::OutputFull => None,
    }
}

#[cfg(test)]
#[path = "text_encoding_tests.rs"]
mod tests;
