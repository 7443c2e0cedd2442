//! Reading one HTTP/1.1 request from a connection, with limits on every line, header count and
//! body, chunked bodies decoded, and the target's percent-encoding and Basic credentials parsed.

use std::io::{BufRead, Read};

/// Longest accepted request line, header line or chunk-size line.
const MAX_LINE: usize = 16 * 1024;
/// Most header lines accepted in one request.
const MAX_HEADERS: usize = 128;
/// Largest accepted request body (after chunked decoding).
const MAX_BODY: usize = 512 * 1024 * 1024;

#[derive(Default)]
pub(super) struct Head {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) http11: bool,
    pub(super) headers: Vec<(String, String)>,
}

impl Head {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn connection_has(&self, token: &str) -> bool {
        self.header_values("connection")
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub(super) fn wants_keep_alive(&self) -> bool {
        if self.http11 {
            !self.connection_has("close")
        } else {
            self.connection_has("keep-alive")
        }
    }

    pub(super) fn expects_continue(&self) -> bool {
        self.http11
            && self
                .header("expect")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
    }
}

pub(super) fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

pub(super) enum ReadError {
    /// The connection was closed before a request started.
    Eof,
    /// I/O error (including a timeout or EOF in the middle of a request).
    Io,
    /// The client sent something that is not valid HTTP/1.x.
    Malformed(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    Length(usize),
    Chunked,
}

impl Framing {
    pub(super) fn has_body(self) -> bool {
        self != Framing::Length(0)
    }
}

/// Reads one line (terminated by LF, optional CR stripped). `Ok(None)` on EOF
/// before any byte.
fn read_line(reader: &mut impl BufRead, limit: usize) -> Result<Option<Vec<u8>>, ReadError> {
    let mut buf = Vec::new();
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let n = reader
        .by_ref()
        .take(limit_u64)
        .read_until(b'\n', &mut buf)
        .map_err(|_| ReadError::Io)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if buf.len() > limit {
            ReadError::Malformed("line too long".into())
        } else {
            ReadError::Io
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(buf))
}

pub(super) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn read_head(reader: &mut impl BufRead, head: &mut Head) -> Result<(), ReadError> {
    // Tolerate a few empty lines before the request line (RFC 9112 2.2).
    let mut request_line = Vec::new();
    for _ in 0..4 {
        match read_line(reader, MAX_LINE)? {
            None => return Err(ReadError::Eof),
            Some(line) if line.is_empty() => continue,
            Some(line) => {
                request_line = line;
                break;
            }
        }
    }
    let request_line =
        String::from_utf8(request_line).map_err(|_| ReadError::Malformed("request line is not UTF-8".into()))?;
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(ReadError::Malformed("malformed request line".into()));
    };
    if is_token(method) {
        head.method = (*method).to_owned();
    } else {
        return Err(ReadError::Malformed("invalid method".into()));
    }
    head.target = (*target).to_owned();
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(ReadError::Malformed("invalid request target".into()));
    }
    head.http11 = match *version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(ReadError::Malformed("unsupported HTTP version".into())),
    };
    for _ in 0..=MAX_HEADERS {
        let line = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
        if line.is_empty() {
            return Ok(());
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err(ReadError::Malformed("obsolete header folding".into()));
        }
        let line = String::from_utf8(line).map_err(|_| ReadError::Malformed("header is not UTF-8".into()))?;
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Malformed("header without colon".into()));
        };
        if !is_token(name) {
            return Err(ReadError::Malformed("invalid header name".into()));
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(ReadError::Malformed("control character in header".into()));
        }
        head.headers.push((name.to_owned(), value.to_owned()));
    }
    Err(ReadError::Malformed("too many headers".into()))
}

pub(super) fn framing(head: &Head) -> Result<Framing, String> {
    let codings: Vec<String> = head
        .header_values("transfer-encoding")
        .flat_map(|v| v.split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    if head.header("transfer-encoding").is_some() {
        // Transfer-Encoding wins over Content-Length (RFC 9112 6.3).
        return if codings == ["chunked"] {
            Ok(Framing::Chunked)
        } else {
            Err("unsupported transfer-encoding".into())
        };
    }
    let mut length: Option<usize> = None;
    for value in head.header_values("content-length").flat_map(|v| v.split(',')) {
        let value = value.trim();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid content-length".into());
        }
        let n: usize = value.parse().map_err(|_| "invalid content-length".to_owned())?;
        if length.is_some_and(|l| l != n) {
            return Err("conflicting content-length".into());
        }
        length = Some(n);
    }
    let length = length.unwrap_or(0);
    if length > MAX_BODY {
        return Err("body too large".into());
    }
    Ok(Framing::Length(length))
}

pub(super) fn read_body(reader: &mut impl BufRead, framing: Framing) -> Result<Vec<u8>, ReadError> {
    match framing {
        Framing::Length(length) => read_exactly(reader, length, Vec::new()),
        Framing::Chunked => {
            let mut body = Vec::new();
            loop {
                let line = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                let line =
                    String::from_utf8(line).map_err(|_| ReadError::Malformed("invalid chunk size line".into()))?;
                let size = line.split(';').next().unwrap_or_default().trim();
                if size.is_empty() || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ReadError::Malformed("invalid chunk size".into()));
                }
                let size =
                    usize::from_str_radix(size, 16).map_err(|_| ReadError::Malformed("invalid chunk size".into()))?;
                if size == 0 {
                    // Trailer section, ended by an empty line.
                    for _ in 0..=MAX_HEADERS {
                        let trailer = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                        if trailer.is_empty() {
                            return Ok(body);
                        }
                    }
                    return Err(ReadError::Malformed("too many trailers".into()));
                }
                if body.len().checked_add(size).is_none_or(|n| n > MAX_BODY) {
                    return Err(ReadError::Malformed("body too large".into()));
                }
                body = read_exactly(reader, size, body)?;
                let end = read_line(reader, MAX_LINE)?.ok_or(ReadError::Io)?;
                if !end.is_empty() {
                    return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
                }
            }
        }
    }
}

/// Appends exactly `n` bytes from `reader` to `buf`.
fn read_exactly(reader: &mut impl BufRead, n: usize, mut buf: Vec<u8>) -> Result<Vec<u8>, ReadError> {
    let before = buf.len();
    let n_u64 = u64::try_from(n).map_err(|_| ReadError::Malformed("body too large".into()))?;
    reader
        .by_ref()
        .take(n_u64)
        .read_to_end(&mut buf)
        .map_err(|_| ReadError::Io)?;
    if buf.len() - before == n {
        Ok(buf)
    } else {
        Err(ReadError::Io)
    }
}

pub(super) fn percent_decode(s: &str) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push(hi * 16 + lo);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    String::from_utf8(out).ok()
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits: u32 = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `(username, password)` from an `Authorization: Basic ...` value.
pub(super) fn parse_basic(value: &str) -> Option<(String, String)> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(credentials.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}
