//! One request from start to end: parsed, authenticated against the token, handed to
//! `git http-backend`, answered and recorded.

use std::io::{self, BufRead, Write};
use std::net::SocketAddr;

use super::cgi::run_backend;
use super::request::{Head, ReadError, framing, parse_basic, percent_decode, read_body, read_head};
use super::response::{Response, write_response};
use super::shared::{RecordedRequest, Shared, lock};

/// Handles one request on a connection. `Ok(true)` to keep the connection open.
pub(super) fn handle_request(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<bool> {
    let mut head = Head::default();
    match read_head(reader, &mut head) {
        Ok(()) => {}
        Err(ReadError::Eof) => return Ok(false),
        Err(ReadError::Io) => return Err(io::ErrorKind::UnexpectedEof.into()),
        Err(ReadError::Malformed(message)) => {
            return bad_request(writer, shared, &head, &message);
        }
    }

    let (raw_path, query) = match head.target.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (head.target.clone(), String::new()),
    };
    let Some(path_info) = percent_decode(&raw_path) else {
        return bad_request(writer, shared, &head, "invalid percent-encoding in path");
    };
    let framing = match framing(&head) {
        Ok(framing) => framing,
        Err(message) => return bad_request(writer, shared, &head, &message),
    };

    let authorization = head.header("authorization").map(str::to_owned);
    let credentials = authorization.as_deref().and_then(parse_basic);
    let auth_valid = match (&shared.token, &credentials) {
        (Some(token), Some((_, password))) => password == token,
        (Some(_), None) => false,
        (None, credentials) => credentials.is_some(),
    };
    let authorized = shared.token.is_none() || auth_valid;
    let mut keep_alive = head.wants_keep_alive();

    let response = if authorized {
        if head.expects_continue() && framing.has_body() {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            writer.flush()?;
        }
        let body = match read_body(reader, framing) {
            Ok(body) => body,
            Err(ReadError::Malformed(message)) => {
                return bad_request(writer, shared, &head, &message);
            }
            Err(_) => return Err(io::ErrorKind::UnexpectedEof.into()),
        };
        let remote_user = if auth_valid {
            credentials
                .as_ref()
                .map(|(user, _)| if user.is_empty() { "git" } else { user.as_str() })
        } else {
            None
        };
        run_backend(shared, &head, &path_info, &query, body, remote_user, peer)
    } else {
        if framing.has_body() {
            if head.expects_continue() {
                // The client waits for 100 Continue; it will not send the body.
                keep_alive = false;
            } else {
                match read_body(reader, framing) {
                    Ok(_) => {}
                    Err(ReadError::Malformed(message)) => {
                        return bad_request(writer, shared, &head, &message);
                    }
                    Err(_) => keep_alive = false,
                }
            }
        }
        let mut response = Response::text(401, "authentication required");
        response
            .headers
            .push(("WWW-Authenticate".to_owned(), "Basic realm=\"git\"".to_owned()));
        response
    };

    record(
        shared,
        &head,
        authorization,
        auth_valid,
        response.status,
        response.stderr.clone(),
    );
    write_response(writer, &response, head.method == "HEAD", keep_alive)?;
    Ok(keep_alive)
}

fn bad_request(writer: &mut impl Write, shared: &Shared, head: &Head, message: &str) -> io::Result<bool> {
    let authorization = head.header("authorization").map(str::to_owned);
    record(shared, head, authorization, false, 400, String::new());
    let response = Response::text(400, message);
    write_response(writer, &response, false, false)?;
    Ok(false)
}

fn record(
    shared: &Shared,
    head: &Head,
    authorization: Option<String>,
    auth_valid: bool,
    status: u16,
    backend_stderr: String,
) {
    let request = RecordedRequest {
        method: head.method.clone(),
        path: head.target.clone(),
        auth_present: authorization.is_some(),
        auth_valid,
        authorization,
        git_protocol: head.header("git-protocol").map(str::to_owned),
        headers: head.headers.clone(),
        status,
        backend_stderr,
    };
    lock(&shared.requests).push(request);
}
