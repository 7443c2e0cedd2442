use super::*;

fn schedule(entries: &[&str], zone: Option<&str>) -> Schedule {
    let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
    ScheduleKeys::parse(Some(&entries), zone)
        .expect("valid schedule")
        .schedule(None)
        .expect("a schedule")
}

/// A moment given as local civil time in `zone`.
fn at(text: &str, zone: &str) -> Timestamp {
    let civil: jiff::civil::DateTime = text.parse().expect("civil date-time");
    civil
        .to_zoned(TimeZone::get(zone).expect("zone"))
        .expect("exists")
        .timestamp()
}

#[test]
fn separate_after_and_before_entries_make_the_night() {
    let night = schedule(&["after 22:00", "before 06:00"], None);
    // 2024-01-02 is a Tuesday.
    assert!(night.allows(at("2024-01-02T23:30", "UTC")));
    assert!(night.allows(at("2024-01-02T05:59", "UTC")));
    assert!(night.allows(at("2024-01-02T22:00", "UTC")));
    assert!(!night.allows(at("2024-01-02T06:00", "UTC")));
    assert!(!night.allows(at("2024-01-02T14:00", "UTC")));
}

#[test]
fn a_window_that_wraps_midnight_and_days_of_the_week() {
    let weeknights = schedule(&["22:00-06:00 on mon-fri"], None);
    assert!(weeknights.allows(at("2024-01-05T23:00", "UTC")), "Friday night");
    assert!(
        !weeknights.allows(at("2024-01-06T01:00", "UTC")),
        "Saturday is not mon-fri"
    );
    assert!(weeknights.allows(at("2024-01-08T01:00", "UTC")), "Monday early");
    let weekends = schedule(&["on sat, sun"], None);
    assert!(weekends.allows(at("2024-01-06T12:00", "UTC")));
    assert!(!weekends.allows(at("2024-01-05T12:00", "UTC")));
    let wrapped = schedule(&["on fri-mon"], None);
    assert!(wrapped.allows(at("2024-01-07T12:00", "UTC")), "Sunday is in fri-mon");
    assert!(!wrapped.allows(at("2024-01-03T12:00", "UTC")), "Wednesday is not");
    let office = schedule(&["after 09:00 before 17:00 on weekdays"], None);
    assert!(office.allows(at("2024-01-03T09:00", "UTC")));
    assert!(!office.allows(at("2024-01-03T17:00", "UTC")));
}

#[test]
fn times_are_local_to_the_time_zone() {
    let berlin = schedule(&["after 22:00"], Some("Europe/Berlin"));
    // 21:30 UTC is 22:30 in Berlin in winter.
    assert!(berlin.allows(at("2024-01-02T21:30", "UTC")));
    assert!(!berlin.allows(at("2024-01-02T20:30", "UTC")));
    assert_eq!(berlin.local_time(at("2024-01-02T21:30", "UTC")), "Tue 22:30");
}

#[test]
fn a_repository_schedule_without_a_zone_takes_the_operators() {
    let operator = ScheduleKeys::parse(None, Some("Asia/Tokyo")).expect("zone only");
    let entries = vec!["after 09:00 before 10:00".to_owned()];
    let repo = ScheduleKeys::parse(Some(&entries), None).expect("valid");
    let schedule = repo.schedule(Some(&operator)).expect("a schedule");
    // 00:30 UTC is 09:30 in Tokyo.
    assert!(schedule.allows(at("2024-01-02T00:30", "UTC")));
    assert!(schedule.describe().contains("Asia/Tokyo"));
    assert!(operator.schedule(None).is_none(), "a zone alone restricts nothing");
}

#[test]
fn the_next_opening_is_found() {
    let night = schedule(&["after 22:00"], None);
    let now = at("2024-01-02T14:03", "UTC");
    assert_eq!(night.next_opening(now), Some(at("2024-01-02T22:00", "UTC")));
    assert_eq!(
        night.next_opening(at("2024-01-02T22:10", "UTC")),
        Some(at("2024-01-02T22:10", "UTC"))
    );
}

#[test]
fn mistakes_are_errors_naming_the_entry() {
    for (entry, expected) in [
        ("after 25:00", "not a time"),
        ("after 10pm", "not a time"),
        ("sometimes", "unexpected"),
        ("on funday", "not a day"),
        ("after 09:00 after 10:00", "twice"),
        ("22:00-22:00", "empty"),
        ("", "empty"),
        ("on", "needs days"),
    ] {
        let error = ScheduleKeys::parse(Some(&[entry.to_owned()]), None).expect_err(entry);
        assert!(
            error.contains(expected) && error.contains("schedule"),
            "{entry}: {error}"
        );
    }
    assert!(
        ScheduleKeys::parse(Some(&[]), None)
            .expect_err("empty list")
            .contains("empty")
    );
    let error = ScheduleKeys::parse(None, Some("Mars/Olympus")).expect_err("unknown zone");
    assert!(error.contains("timezone"), "{error}");
}
