use super::*;
use crate::forge::checks::{Annotation, CheckKind, UntrustedText};

fn failing_with(output: &str, annotation_paths: &[&str]) -> FailingCheck {
    FailingCheck {
        output: Some(UntrustedText::new(output.to_owned())),
        annotations: annotation_paths
            .iter()
            .map(|path| Annotation {
                path: (*path).to_owned(),
                line: Some(1),
                level: "failure".into(),
                message: UntrustedText::new("bad".into()),
            })
            .collect(),
        ..FailingCheck::new("test", CheckKind::CheckRun, "failure")
    }
}

fn protected() -> Vec<String> {
    vec![".github/workflows/**".to_owned()]
}

#[test]
fn a_lost_runner_and_protected_paths_are_outside_reach_and_a_test_failure_is_not() {
    let lost = failing_with(
        "The hosted runner: GitHub Actions 3 lost communication with the server.",
        &[],
    );
    let reason = outside_reach(std::slice::from_ref(&lost), &protected()).expect("outside");
    assert!(reason.contains("infrastructure"), "{reason}");
    let workflow = failing_with("Invalid workflow file", &[".github/workflows/ci.yml"]);
    let reason = outside_reach(std::slice::from_ref(&workflow), &protected()).expect("outside");
    assert!(reason.contains("protected paths"), "{reason}");
    let test = failing_with("assertion failed", &["src/lib.rs"]);
    assert_eq!(outside_reach(std::slice::from_ref(&test), &protected()), None);
    // One failure the bot can fix is enough to try.
    assert_eq!(outside_reach(&[lost, test], &protected()), None);
}

#[test]
fn the_note_starts_with_its_marker_and_names_what_failed_and_what_was_tried() {
    let sha = "a".repeat(40);
    let attempts = FixAttempts {
        made: 3,
        last: Some(FixAttempt {
            attempt: 3,
            sha: "b".repeat(40),
            signature: "1".repeat(16),
        }),
        gave_up_on: Vec::new(),
        no_checks_on: Vec::new(),
    };
    let check = FailingCheck {
        name: "test @someone".into(),
        ..failing_with("x", &[])
    };
    let text = note(&sha, "3 fix attempts were made", &[check], &attempts);
    assert_eq!(text.lines().next(), Some(gave_up_marker(&sha).as_str()));
    assert!(text.contains("3 fix attempts were made"), "{text}");
    assert!(!text.contains(" @someone"), "a check name mentions nobody: {text}");
    assert!(
        text.contains("made 3 fix attempts") && text.contains(&"b".repeat(12)),
        "{text}"
    );
}
