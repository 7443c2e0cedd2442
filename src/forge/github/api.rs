//! The GitHub REST API client: requests, pagination and error mapping, over reqwest.
//!
//! Why it is built this way:
//! - One HTTP stack for everything upkeep sends (the model APIs, git, and this): reqwest,
//!   which honours `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` and the system's certificate store
//!   (and `SSL_CERT_FILE`) the same way everywhere.
//! - The token travels only as a sensitive `Authorization` header, and only to the API's own
//!   origin: a pagination link to any other host is not followed. It is never part of a URL, a
//!   log line or an error message.
//! - Every request carries what GitHub documents: `Accept: application/vnd.github+json`, an
//!   `X-GitHub-Api-Version` and a `User-Agent`.
//! - Status, rate-limit headers and GitHub's own `message` are all in hand when an error is
//!   mapped to [`ForgeError`], and a body is read as raw JSON, so a missing optional field never
//!   fails a run.
//! - Nothing is retried: a POST that timed out may have reached GitHub, and sending it again
//!   blindly could open a second pull request or post a question twice. Callers recover
//!   explicitly (`publish` looks for the branch's open pull request before creating one).
//! - Errors are split by what can fix them: a refused token, missing permissions, an unknown
//!   repository or an exhausted rate limit end the run ([`ForgeError::is_fatal`]); a validation
//!   error (422) or a server error (5xx) goes back to the model, which can adjust or ask.

use std::fmt::Write as _;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::forge::ForgeError;
use crate::settings::GitHubSettings;
use crate::text::error_chain;

/// The REST API version upkeep's requests and response shapes follow.
const API_VERSION: &str = "2022-11-28";
/// Pages followed when listing; bounds the requests of one listing.
const MAX_PAGES: usize = 10;
/// Bytes of a non-JSON error body kept in a message (a proxy's HTML page, for instance).
const MAX_ERROR_BODY_BYTES: usize = 500;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy)]
pub(crate) enum Method {
    Get,
    Post,
    Patch,
}

/// A successful answer: its body and, for lists, the URL of the next page.
pub(crate) struct Answer {
    pub text: String,
    next: Option<String>,
}

impl Answer {
    /// The `rel="next"` page of a list, for listings that page further than [`Api::list`].
    pub(crate) fn next_page(&self) -> Option<&str> {
        self.next.as_deref()
    }
}

/// A refused request with the HTTP status it was refused with, for callers that treat some
/// refusals as a note rather than an error (a log the token may not read).
#[derive(Debug)]
pub(crate) struct StatusError {
    pub status: Option<u16>,
    pub error: ForgeError,
}

/// The headers an error message may need.
#[derive(Debug, Default)]
struct ResponseMeta {
    ratelimit_remaining: Option<String>,
    ratelimit_reset: Option<String>,
    retry_after: Option<String>,
}

impl ResponseMeta {
    fn of(response: &reqwest::Response) -> Self {
        ResponseMeta {
            ratelimit_remaining: header_of(response, "x-ratelimit-remaining"),
            ratelimit_reset: header_of(response, "x-ratelimit-reset"),
            retry_after: header_of(response, "retry-after"),
        }
    }
}

/// A response header's value, when it is text.
fn header_of(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// An HTTP client sending `headers` with every request and following no redirect: one to
/// another host would carry the token along (the log download follows its one redirect itself,
/// with a client that holds no token).
fn client(headers: HeaderMap, what: &str) -> Result<reqwest::Client, ForgeError> {
    crate::http::client_builder()
        .default_headers(headers)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| ForgeError::Other(format!("cannot set up {what}: {}", error_chain(&error))))
}

/// A client for one repository's API calls.
pub(crate) struct Api {
    http: reqwest::Client,
    /// For downloads from the short-lived addresses the API redirects to (job logs): no
    /// `Authorization` header at all, since those hosts are not GitHub's API.
    plain: reqwest::Client,
    /// `https://api.github.com`, or GitHub Enterprise's `https://host/api/v3`; no trailing `/`.
    base: String,
    origin: reqwest::Url,
    /// `owner/name`, for messages.
    repo: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("repo", &self.repo)
            .finish()
    }
}

impl Api {
    /// A client on `settings.api_url`. Without a token only reads of public repositories work.
    pub(crate) fn new(settings: &GitHubSettings, repo: &str) -> Result<Self, ForgeError> {
        let base = settings.api_url.trim_end_matches('/').to_owned();
        let origin = reqwest::Url::parse(&base)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| ForgeError::Other(format!("GITHUB_API_URL {base:?} is not an http(s) URL")))?;
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/vnd.github+json"));
        headers.insert("x-github-api-version", HeaderValue::from_static(API_VERSION));
        if let Some(token) = &settings.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
                // Not the header error: it could describe the token's bytes.
                .map_err(|_| token_not_a_header())?;
            if !token.expose_secret().bytes().all(|b| b.is_ascii_graphic()) {
                return Err(token_not_a_header());
            }
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let http = client(headers, "the GitHub API client")?;
        let plain = client(HeaderMap::new(), "the download client")?;
        Ok(Self {
            http,
            plain,
            base,
            origin,
            repo: repo.to_owned(),
        })
    }

    /// Sends one request to `route` (`/repos/...`, joined to the API base) or to an absolute
    /// URL on the API's own origin (a pagination link), and returns the body of a 2xx answer;
    /// anything else becomes the matching [`ForgeError`].
    pub(crate) async fn send(
        &self,
        operation: &str,
        method: Method,
        route: &str,
        body: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let url = self.url(operation, route)?;
        let request = match method {
            Method::Get => self.http.get(url),
            Method::Post => self.http.post(url),
            Method::Patch => self.http.patch(url),
        };
        let request = match body {
            Some(body) => request.json(body),
            None => request,
        };
        let response = request.send().await.map_err(|error| {
            ForgeError::Other(format!(
                "{operation}: could not reach the GitHub API at {}: {}",
                self.base,
                error_chain(&error.without_url())
            ))
        })?;
        let status = response.status().as_u16();
        let meta = ResponseMeta::of(&response);
        let next = header_of(&response, "link").as_deref().and_then(next_page);
        let text = response.text().await.map_err(|error| {
            ForgeError::Other(format!(
                "{operation}: reading GitHub's answer failed: {}",
                error_chain(&error.without_url())
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err(status_error(&self.repo, operation, status, &meta, &text));
        }
        Ok(Answer { text, next })
    }

    /// The URL of a route, or an absolute URL checked to be on the API's origin (the token
    /// goes nowhere else).
    fn url(&self, operation: &str, route: &str) -> Result<reqwest::Url, ForgeError> {
        let url = if route.starts_with('/') {
            reqwest::Url::parse(&format!("{}{route}", self.base))
        } else {
            reqwest::Url::parse(route)
        }
        .map_err(|_| ForgeError::Other(format!("{operation}: not a URL: {route}")))?;
        let same_origin = url.scheme() == self.origin.scheme()
            && url.host() == self.origin.host()
            && url.port_or_known_default() == self.origin.port_or_known_default();
        if !same_origin {
            return Err(ForgeError::Other(format!(
                "{operation}: GitHub pointed to {}, outside the API at {}; not followed",
                url.origin().ascii_serialization(),
                self.base
            )));
        }
        Ok(url)
    }

    /// Every item of a paginated list (up to `MAX_PAGES` pages, stopping once `limit` items
    /// are in), as raw JSON values so that a single odd item cannot fail the whole listing.
    pub(crate) async fn list(&self, operation: &str, first: String, limit: usize) -> Result<Vec<Value>, ForgeError> {
        self.list_while(operation, first, |items| items.len() < limit).await
    }

    /// Every item of a paginated list, page after page while `more` says the items so far call
    /// for the next page (up to `MAX_PAGES` pages).
    pub(crate) async fn list_while(
        &self,
        operation: &str,
        first: String,
        more: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>, ForgeError> {
        self.pages(operation, first, |text| parse_list(operation, text), more)
            .await
    }

    /// Every item under `field` of a paginated object answer (`{"total_count": n, "check_runs":
    /// [...]}`), up to `MAX_PAGES` pages, stopping once `limit` items are in.
    pub(crate) async fn list_field(
        &self,
        operation: &str,
        first: String,
        field: &str,
        limit: usize,
    ) -> Result<Vec<Value>, ForgeError> {
        let page = |text: &str| match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut object)) => match object.remove(field) {
                Some(Value::Array(page)) => Ok(page),
                _ => Err(ForgeError::Other(format!(
                    "{operation}: GitHub's answer has no `{field}` list"
                ))),
            },
            _ => Err(ForgeError::Other(format!(
                "{operation}: GitHub answered with something other than an object"
            ))),
        };
        let mut items = self.pages(operation, first, page, |items| items.len() < limit).await?;
        items.truncate(limit);
        Ok(items)
    }

    /// The items of each page `page` reads from an answer, following `Link: next` while `more`
    /// says the items so far call for another page, up to `MAX_PAGES` pages.
    async fn pages(
        &self,
        operation: &str,
        first: String,
        page: impl Fn(&str) -> Result<Vec<Value>, ForgeError>,
        more: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>, ForgeError> {
        let mut items = Vec::new();
        let mut route = Some(first);
        let mut pages = 0;
        while let Some(current) = route.take() {
            let answer = self.send(operation, Method::Get, &current, None).await?;
            items.extend(page(&answer.text)?);
            pages += 1;
            if pages < MAX_PAGES && more(&items) {
                route = answer.next;
            }
        }
        Ok(items)
    }
}

fn token_not_a_header() -> ForgeError {
    ForgeError::Auth(
        "GITHUB_TOKEN (or GH_TOKEN) contains whitespace or non-ASCII characters; set it to the token alone".into(),
    )
}

pub(crate) fn parse_list(operation: &str, text: &str) -> Result<Vec<Value>, ForgeError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) => Err(ForgeError::Other(format!(
            "{operation}: GitHub answered with something other than a list"
        ))),
        Err(error) => Err(ForgeError::Other(format!(
            "{operation}: GitHub's answer is not JSON: {error}"
        ))),
    }
}

pub(crate) fn parse_object<T: serde::de::DeserializeOwned>(operation: &str, text: &str) -> Result<T, ForgeError> {
    serde_json::from_str(text)
        .map_err(|error| ForgeError::Other(format!("{operation}: unexpected answer from GitHub: {error}")))
}

/// Maps a non-2xx answer to the error that says what to do about it.
fn status_error(repo: &str, operation: &str, status: u16, meta: &ResponseMeta, body: &str) -> ForgeError {
    let message = api_message(body);
    let rate_limited = matches!(status, 403 | 429)
        && (meta.ratelimit_remaining.as_deref().map(str::trim) == Some("0")
            || message.to_ascii_lowercase().contains("rate limit"));
    match status {
        401 => ForgeError::Auth(format!(
            "GitHub rejected the token (401): check GITHUB_TOKEN/GH_TOKEN (while {operation}; GitHub says: {message})"
        )),
        _ if rate_limited => ForgeError::Refused(format!(
            "GitHub API rate limit exceeded while {operation} (HTTP {status}: {message}){}",
            rate_limit_wait(meta)
        )),
        403 => ForgeError::Refused(format!(
            "GitHub refused {operation} (403: {message}): the token needs contents: write, pull-requests: write and issues: write on {repo} (in GitHub Actions, grant them with a `permissions:` block in the workflow)"
        )),
        404 => ForgeError::Refused(format!(
            "repository {repo} not found, or the token cannot see it (404 while {operation}: {message})"
        )),
        _ => ForgeError::Api {
            operation: operation.to_owned(),
            status,
            message,
        },
    }
}

/// When the rate limit lets requests through again, from the headers GitHub sends.
fn rate_limit_wait(meta: &ResponseMeta) -> String {
    let reset = meta
        .ratelimit_reset
        .as_deref()
        .and_then(|value| value.trim().parse::<i64>().ok())
        .and_then(|seconds| jiff::Timestamp::from_second(seconds).ok());
    if let Some(reset) = reset {
        let wait = reset.as_second() - jiff::Timestamp::now().as_second();
        let wait = if wait > 0 {
            format!(" (in about {} min)", (wait + 59) / 60)
        } else {
            String::new()
        };
        return format!("; the limit resets at {reset}{wait}; run again after that");
    }
    match meta.retry_after.as_deref().map(str::trim) {
        Some(seconds) if !seconds.is_empty() => format!("; retry after {seconds} seconds"),
        _ => "; wait before running again".into(),
    }
}

/// GitHub's own `message`, with the details of a validation error (`errors`), or the start of
/// a body that is not GitHub's JSON.
fn api_message(body: &str) -> String {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(body) else {
        let text = body.trim();
        return if text.is_empty() {
            "(no message)".into()
        } else {
            crate::text::marked(crate::text::prefix_bytes(text, MAX_ERROR_BODY_BYTES), " […]")
        };
    };
    let mut message = object
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)")
        .trim()
        .to_owned();
    let details: Vec<String> = object
        .get("errors")
        .and_then(Value::as_array)
        .map(|errors| errors.iter().filter_map(describe_error_detail).collect())
        .unwrap_or_default();
    if !details.is_empty() {
        let _ = write!(message, ": {}", details.join("; "));
    }
    message
}

/// One entry of a validation error's `errors`: its `message`, or resource, field and code.
fn describe_error_detail(detail: &Value) -> Option<String> {
    if let Some(text) = detail.as_str() {
        return Some(text.to_owned());
    }
    if let Some(text) = detail.get("message").and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    let part = |key: &str| detail.get(key).and_then(Value::as_str).unwrap_or("");
    let (resource, field, code) = (part("resource"), part("field"), part("code"));
    if resource.is_empty() && field.is_empty() && code.is_empty() {
        return None;
    }
    Some(format!("{resource}.{field} {code}").trim().to_owned())
}

/// The URL of the `rel="next"` page in a `Link` header.
fn next_page(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|param| param.trim() == "rel=\"next\"")
            .then(|| target.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

/// Everything but RFC 3986's unreserved characters is escaped in a path segment or query value.
const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a path segment or query value.
pub(crate) fn encode(component: &str) -> String {
    percent_encoding::utf8_percent_encode(component, COMPONENT).to_string()
}

#[path = "api_redirects.rs"]
mod redirects;

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
