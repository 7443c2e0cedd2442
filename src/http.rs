//! One HTTP client configuration for everything upkeep sends: the model APIs, the GitHub API
//! and git's smart-HTTP transport.
//!
//! All of them honour the same environment: `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and
//! `NO_PROXY` (reqwest's system proxy), the system's certificate store plus `SSL_CERT_FILE`
//! (rustls with native roots) besides the bundled roots, and they name themselves with the same
//! `User-Agent`. Callers add only what is theirs: timeouts, default headers, redirect policy.

/// `upkeep/<version>`, as every API upkeep calls sees it.
pub(crate) const USER_AGENT: &str = concat!("upkeep/", env!("CARGO_PKG_VERSION"));

/// The shared starting point of every async client.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().user_agent(USER_AGENT).tcp_nodelay(true)
}
