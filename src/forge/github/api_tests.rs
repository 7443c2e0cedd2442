//! Error mapping, pagination and encoding of the GitHub API client.

use super::*;

fn meta() -> ResponseMeta {
    ResponseMeta::default()
}

#[test]
fn a_refused_token_is_an_auth_error_with_githubs_message() {
    let error = status_error("o/r", "listing", 401, &meta(), r#"{"message":"Bad credentials"}"#);
    assert!(matches!(error, ForgeError::Auth(_)));
    assert!(error.is_fatal());
    let text = error.to_string();
    assert!(
        text.contains("GitHub rejected the token (401): check GITHUB_TOKEN/GH_TOKEN"),
        "{text}"
    );
    assert!(text.contains("Bad credentials"), "{text}");
}

#[test]
fn an_exhausted_rate_limit_names_the_reset_time_and_is_fatal() {
    let headers = ResponseMeta {
        ratelimit_remaining: Some("0".into()),
        ratelimit_reset: Some("1700000000".into()),
        ..meta()
    };
    let error = status_error(
        "o/r",
        "listing",
        403,
        &headers,
        r#"{"message":"API rate limit exceeded for x"}"#,
    );
    assert!(error.is_fatal());
    let text = error.to_string();
    assert!(text.contains("2023-11-14T22:13:20Z"), "{text}");
    assert!(text.contains("API rate limit exceeded for x"), "{text}");
    let secondary = status_error(
        "o/r",
        "posting",
        403,
        &ResponseMeta {
            retry_after: Some("60".into()),
            ..meta()
        },
        r#"{"message":"You have exceeded a secondary rate limit"}"#,
    );
    assert!(secondary.is_fatal());
    assert!(secondary.to_string().contains("retry after 60 seconds"), "{secondary}");
}

#[test]
fn other_refusals_name_the_permissions_or_the_repository() {
    let error = status_error(
        "o/r",
        "opening",
        403,
        &meta(),
        r#"{"message":"Resource not accessible by integration"}"#,
    );
    assert!(error.is_fatal());
    let text = error.to_string();
    assert!(
        text.contains("pull-requests: write") && text.contains("Resource not accessible"),
        "{text}"
    );
    let error = status_error("o/r", "listing", 404, &meta(), r#"{"message":"Not Found"}"#);
    assert!(error.is_fatal());
    assert!(
        error
            .to_string()
            .contains("repository o/r not found, or the token cannot see it")
    );
}

#[test]
fn validation_and_server_errors_go_back_to_the_model() {
    let body = r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:upkeep/x."},{"resource":"Issue","field":"title","code":"missing_field"}]}"#;
    let error = status_error("o/r", "opening", 422, &meta(), body);
    assert!(!error.is_fatal());
    let text = error.to_string();
    assert!(
        text.contains("Validation Failed: A pull request already exists for o:upkeep/x.; Issue.title missing_field"),
        "{text}"
    );
    let error = status_error("o/r", "opening", 502, &meta(), "<html>Bad gateway</html>");
    assert!(!error.is_fatal());
    assert!(
        error.to_string().contains("HTTP 502: <html>Bad gateway</html>"),
        "{error}"
    );
}

#[test]
fn next_links_are_read_and_followed_only_on_the_apis_origin() {
    let link = r#"<https://ghe.example.com/api/v3/repositories/1/issues?page=2>; rel="next", <https://ghe.example.com/api/v3/repositories/1/issues?page=5>; rel="last""#;
    assert_eq!(
        next_page(link).as_deref(),
        Some("https://ghe.example.com/api/v3/repositories/1/issues?page=2")
    );
    assert_eq!(next_page(r#"<https://x/y?page=1>; rel="prev""#), None);
    let settings = crate::settings::GitHubSettings {
        server_url: "https://ghe.example.com".into(),
        api_url: "https://ghe.example.com/api/v3".into(),
        token: Some(secrecy::SecretString::from("ghp_sometokenvalue")),
        bot_login: None,
    };
    let api = Api::new(&settings, "o/r").expect("client");
    assert!(api.url("listing", "/repos/o/r/issues").is_ok());
    assert!(
        api.url("listing", "https://ghe.example.com/api/v3/repositories/1/issues?page=2")
            .is_ok()
    );
    let elsewhere = api.url("listing", "https://evil.example/api/v3/issues?page=2");
    assert!(elsewhere.is_err(), "the token would go to another host");
}

#[test]
fn query_values_are_percent_encoded() {
    assert_eq!(encode("owner:upkeep/7-fix"), "owner%3Aupkeep%2F7-fix");
    assert_eq!(encode("good first issue"), "good%20first%20issue");
}
