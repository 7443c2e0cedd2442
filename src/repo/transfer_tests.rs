//! Unit tests of the transfer context: where the token goes and how long it is offered.

use secrecy::ExposeSecret;

use super::*;
use crate::repo::stop::DEFAULT_STALL_TIMEOUT;

/// The token the transport would find on this thread now.
fn current_token() -> Option<String> {
    current().and_then(|transfer| transfer.token.as_ref().map(|token| token.expose_secret().to_owned()))
}

fn transfer(url: &str, token: &str) -> Arc<Transfer> {
    Transfer::new(
        url,
        Some(SecretString::from(token.to_owned())),
        Stop::never(),
        DEFAULT_STALL_TIMEOUT,
    )
}

#[test]
fn a_token_is_offered_only_during_its_operation_and_only_on_its_thread() {
    let pinned = transfer("https://example.com/o/r.git", "tok-scoped");
    let seen = scoped(&pinned, || {
        let elsewhere = std::thread::spawn(current_token).join().ok().flatten();
        (current_token(), elsewhere)
    });
    assert_eq!(seen, (Some("tok-scoped".to_owned()), None));
    assert_eq!(current_token(), None, "forgotten afterwards");
}

#[test]
fn a_token_is_forgotten_after_a_panicking_operation_and_the_outer_one_restored() {
    let outer = transfer("https://example.com/o/r.git", "tok-outer");
    scoped(&outer, || {
        let inner = transfer("https://example.com/o/r.git", "tok-inner");
        let panicked = std::panic::catch_unwind(|| scoped(&inner, || panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(current_token(), Some("tok-outer".to_owned()));
    });
    assert_eq!(current_token(), None);
}

#[test]
fn the_token_goes_only_to_the_operators_origin() {
    let pinned = transfer("https://git.example.com/o/r.git", "tok");
    let sent = |target: &str| pinned.token_for(target).is_some();
    assert!(sent(
        "https://git.example.com/o/r.git/info/refs?service=git-upload-pack"
    ));
    assert!(sent("https://git.example.com:443/other/path"));
    assert!(
        !sent("http://git.example.com/o/r.git/git-upload-pack"),
        "another scheme"
    );
    assert!(
        !sent("https://git.example.com:8443/o/r.git/git-upload-pack"),
        "another port"
    );
    assert!(
        !sent("https://evil.example.com/o/r.git/git-upload-pack"),
        "another host"
    );
    assert!(!sent("not a url"));
    let local = transfer("/srv/repo.git", "tok");
    assert!(
        local.token_for("https://git.example.com/o/r.git").is_none(),
        "no origin, no token"
    );
}
