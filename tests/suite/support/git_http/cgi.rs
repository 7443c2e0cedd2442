//! `git http-backend` run as a CGI program with a clean environment, and its output turned into
//! a response.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::thread;

use super::hooks::REJECT_ENV;
use super::request::Head;
use super::response::{Response, reason_phrase};
use super::shared::{Shared, lock};

pub(super) fn run_backend(
    shared: &Shared,
    head: &Head,
    path_info: &str,
    query: &str,
    body: Vec<u8>,
    remote_user: Option<&str>,
    peer: SocketAddr,
) -> Response {
    let mut cmd = Command::new(&shared.backend);
    cmd.env_clear();
    for key in ["PATH", "TMPDIR", "SYSTEMROOT"] {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "upkeep-test-git-http")
        .env("SERVER_NAME", "127.0.0.1")
        .env("SCRIPT_NAME", "")
        .env("REQUEST_METHOD", &head.method)
        .env("REQUEST_URI", &head.target)
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", peer.ip().to_string())
        .env("REMOTE_PORT", peer.port().to_string());

    let mut config: Vec<(&str, String)> = vec![("http.receivepack", "true".to_owned())];
    let rejected = lock(&shared.rejected_refs).clone();
    if !rejected.is_empty() {
        config.push(("core.hooksPath", shared.hooks_dir.to_string_lossy().into_owned()));
        cmd.env(REJECT_ENV, rejected.join("\n"));
    }
    cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
    for (i, (key, value)) in config.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }

    if let Some(user) = remote_user {
        cmd.env("REMOTE_USER", user).env("AUTH_TYPE", "Basic");
    }
    if let Some(content_type) = head.header("content-type") {
        cmd.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = head.header("git-protocol") {
        cmd.env("HTTP_GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = head.header("content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", encoding);
    }
    if let Some(accept) = head.header("accept") {
        cmd.env("HTTP_ACCEPT", accept);
    }
    let has_body = !body.is_empty() || head.method == "POST" || head.method == "PUT";
    if has_body {
        cmd.env("CONTENT_LENGTH", body.len().to_string());
        cmd.stdin(Stdio::piped());
    } else {
        cmd.stdin(Stdio::null());
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());

    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => {
            let message = format!("cannot run {}: {err}", shared.backend.display());
            let mut response = Response::text(500, &message);
            response.stderr = message;
            return response;
        }
    };
    // Feed the body from another thread so a large request and a large response
    // cannot deadlock on full pipes.
    let feeder = child.stdin.take().and_then(|mut stdin| {
        thread::Builder::new()
            .name("git-http-cgi-stdin".to_owned())
            .spawn(move || {
                let _ = stdin.write_all(&body);
            })
            .ok()
    });
    let output = child.wait_with_output();
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    let output = match output {
        Ok(output) => output,
        Err(err) => {
            let message = format!("waiting for git http-backend failed: {err}");
            let mut response = Response::text(500, &message);
            response.stderr = message;
            return response;
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut response = match parse_cgi_output(&output.stdout) {
        Some(response) => response,
        None if output.stdout.is_empty() => {
            Response::text(500, &format!("git http-backend produced no output ({})", output.status))
        }
        None => Response::text(502, "malformed CGI response from git http-backend"),
    };
    response.stderr = stderr;
    response
}

/// Splits CGI output into status, headers and body. `None` if the header
/// section is not terminated or not well-formed.
fn parse_cgi_output(out: &[u8]) -> Option<Response> {
    let mut status: u16 = 200;
    let mut reason: Option<String> = None;
    let mut headers = Vec::new();
    let mut has_location = false;
    let mut has_status = false;
    let mut pos = 0;
    loop {
        let rest = out.get(pos..)?;
        let newline = rest.iter().position(|&b| b == b'\n')?;
        let mut line = rest.get(..newline)?;
        pos += newline + 1;
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        if line.is_empty() {
            break;
        }
        let line = std::str::from_utf8(line).ok()?;
        let (name, value) = line.split_once(':')?;
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("status") {
            let (code, text) = value.split_once(' ').unwrap_or((value, ""));
            status = code.parse().ok().filter(|c| (100..1000).contains(c))?;
            let text = text.trim();
            if !text.is_empty() {
                reason = Some(text.to_owned());
            }
            has_status = true;
        } else {
            if name.eq_ignore_ascii_case("location") {
                has_location = true;
            }
            headers.push((name.to_owned(), value.to_owned()));
        }
    }
    if has_location && !has_status {
        status = 302;
    }
    Some(Response {
        status,
        reason: reason.unwrap_or_else(|| reason_phrase(status).to_owned()),
        headers,
        body: out.get(pos..)?.to_vec(),
        stderr: String::new(),
    })
}
