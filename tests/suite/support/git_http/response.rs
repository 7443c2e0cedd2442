//! The response sent back: status, headers (hop-by-hop and malformed ones dropped) and body.

use std::io::{self, Write};

use super::request::is_token;

pub(super) struct Response {
    pub(super) status: u16,
    pub(super) reason: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
    pub(super) stderr: String,
}

impl Response {
    pub(super) fn text(status: u16, message: &str) -> Response {
        Response {
            status,
            reason: reason_phrase(status).to_owned(),
            headers: vec![("Content-Type".to_owned(), "text/plain; charset=utf-8".to_owned())],
            body: format!("{message}\n").into_bytes(),
            stderr: String::new(),
        }
    }
}

pub(super) fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "Unknown",
    }
}

pub(super) fn write_response(
    writer: &mut impl Write,
    response: &Response,
    head_only: bool,
    keep_alive: bool,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(response.body.len() + 256);
    let reason: String = response.reason.chars().filter(|c| !c.is_control()).collect();
    write!(out, "HTTP/1.1 {} {}\r\n", response.status, reason)?;
    for (name, value) in &response.headers {
        let hop_by_hop = ["content-length", "transfer-encoding", "connection", "keep-alive"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h));
        if hop_by_hop || !is_token(name) || value.chars().any(|c| c == '\r' || c == '\n') {
            continue;
        }
        write!(out, "{name}: {value}\r\n")?;
    }
    write!(out, "Content-Length: {}\r\n", response.body.len())?;
    let connection = if keep_alive { "keep-alive" } else { "close" };
    write!(out, "Connection: {connection}\r\n\r\n")?;
    if !head_only {
        out.extend_from_slice(&response.body);
    }
    writer.write_all(&out)?;
    writer.flush()
}
