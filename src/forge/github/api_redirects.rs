//! Answers of the GitHub API that point elsewhere: a `302` whose `Location` is a short-lived
//! download address on another host (a GitHub Actions job's log), and the download itself.
//!
//! Why apart from [`super::Api::send`]: the download goes to a host that is not GitHub's API,
//! so it is made with a client that carries no `Authorization` header at all (the token never
//! leaves for that host), follows no further redirect, and keeps only the tail of what it
//! reads, bounded in bytes, since a log can be any size.

use super::{Api, ForgeError, MAX_ERROR_BODY_BYTES, ResponseMeta, StatusError, error_chain, status_error};

impl Api {
    /// The address a `302` answer to `route` points to (`GET .../actions/jobs/{id}/logs`),
    /// not followed: the caller downloads it with [`Api::download_tail`], which sends no token.
    pub(crate) async fn redirect_target(&self, operation: &str, route: &str) -> Result<reqwest::Url, StatusError> {
        let failed = |error| StatusError { status: None, error };
        let url = self.url(operation, route).map_err(failed)?;
        let response = self.http.get(url.clone()).send().await.map_err(|error| {
            failed(ForgeError::Other(format!(
                "{operation}: could not reach the GitHub API at {}: {}",
                self.base,
                error_chain(&error.without_url())
            )))
        })?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .filter(|target| matches!(target.scheme(), "http" | "https"));
            return location.ok_or_else(|| {
                failed(ForgeError::Other(format!(
                    "{operation}: GitHub answered {status} without a usable Location"
                )))
            });
        }
        let meta = ResponseMeta::of(&response);
        let text = read_capped(response, MAX_ERROR_BODY_BYTES * 8)
            .await
            .unwrap_or_default();
        let error = if (200..300).contains(&status) {
            ForgeError::Other(format!(
                "{operation}: GitHub answered {status} where a redirect was expected"
            ))
        } else {
            status_error(&self.repo, operation, status, &meta, &String::from_utf8_lossy(&text))
        };
        Err(StatusError {
            status: Some(status),
            error,
        })
    }

    /// Downloads `url` without any credentials and keeps only its last `window` bytes, reading
    /// at most `max_bytes` in all; returns the bytes kept and whether the download was cut
    /// short at `max_bytes`.
    pub(crate) async fn download_tail(
        &self,
        operation: &str,
        url: reqwest::Url,
        window: usize,
        max_bytes: u64,
    ) -> Result<(Vec<u8>, bool), ForgeError> {
        use futures_util::StreamExt as _;
        let origin = url.origin().ascii_serialization();
        let failed = |error: reqwest::Error| {
            ForgeError::Other(format!(
                "{operation}: downloading from {origin} failed: {}",
                error_chain(&error.without_url())
            ))
        };
        let response = self.plain.get(url.clone()).send().await.map_err(failed)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(ForgeError::Api {
                operation: operation.to_owned(),
                status,
                message: format!("{origin} refused the download (it may have expired)"),
            });
        }
        let mut kept: Vec<u8> = Vec::new();
        let mut read: u64 = 0;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(failed)?;
            read = read.saturating_add(chunk.len() as u64);
            kept.extend_from_slice(&chunk);
            if kept.len() > window.saturating_mul(2) {
                kept.drain(..kept.len() - window);
            }
            if read >= max_bytes {
                let cut = kept.len().saturating_sub(window);
                kept.drain(..cut);
                return Ok((kept, true));
            }
        }
        let cut = kept.len().saturating_sub(window);
        kept.drain(..cut);
        Ok((kept, false))
    }
}

/// At most `max` bytes of a response's body.
async fn read_capped(response: reqwest::Response, max: usize) -> Result<Vec<u8>, reqwest::Error> {
    use futures_util::StreamExt as _;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() >= max {
            body.truncate(max);
            break;
        }
    }
    Ok(body)
}
