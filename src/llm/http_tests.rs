use super::*;

#[test]
fn retry_after_reads_seconds_dates_and_milliseconds() {
    let mut headers = HeaderMap::new();
    headers.insert(RETRY_AFTER, "7".parse().expect("header"));
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
    let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
    headers.insert(RETRY_AFTER, soon.parse().expect("header"));
    let delay = retry_after(&headers).expect("date parsed");
    assert!(
        delay <= Duration::from_secs(30) && delay >= Duration::from_secs(28),
        "{delay:?}"
    );
    headers.insert(RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"));
    assert_eq!(retry_after(&headers), Some(Duration::ZERO));
    headers.insert(RETRY_AFTER, "-5".parse().expect("header"));
    assert_eq!(retry_after(&headers), None);
    headers.insert("retry-after-ms", "1500".parse().expect("header"));
    assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
}

#[test]
fn error_messages_come_from_each_api_shape() {
    let openai = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    assert_eq!(
        error_message(openai).as_deref(),
        Some("You exceeded your current quota (insufficient_quota)")
    );
    let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(
        error_message(anthropic).as_deref(),
        Some("Overloaded (overloaded_error)")
    );
    let gemini = br#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#;
    assert_eq!(
        error_message(gemini).as_deref(),
        Some("API key not valid. (INVALID_ARGUMENT)")
    );
    assert_eq!(
        error_message(br#"{"error":"model not found"}"#).as_deref(),
        Some("model not found")
    );
    assert_eq!(error_message(b"  Bad Gateway \n").as_deref(), Some("Bad Gateway"));
    assert_eq!(error_message(b""), None);
}

#[test]
fn context_length_errors_are_recognised_in_each_apis_words() {
    let bodies: [&[u8]; 5] = [
        br#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
        br#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        br#"{"error":{"code":400,"message":"The input token count (1196733) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
        br#"{"error":"the input length exceeds the context length"}"#,
    ];
    for body in bodies {
        let message = error_message(body).expect("message");
        assert!(is_context_length(400, &message), "{message}");
        assert!(!is_context_length(429, &message), "only a refused request counts");
    }
    assert!(!is_context_length(
        400,
        "max_tokens is too large (invalid_request_error)"
    ));
}

#[test]
fn keys_echoed_by_the_server_are_redacted_and_urls_lose_credentials() {
    let endpoint = Endpoint::new(
        "openai",
        "https://user:sk-secret-123@api.example/v1/chat/completions?key=sk-secret-123".into(),
        Some(SecretString::from("sk-secret-123")),
        Duration::from_secs(5),
    )
    .expect("endpoint");
    let error = endpoint.http_error(401, "Incorrect API key provided: sk-secret-123".into(), None);
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("sk-secret-123"), "{shown}");
    assert!(shown.contains("https://api.example/v1/chat/completions"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}
