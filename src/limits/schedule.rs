//! `schedule` and `timezone`: the time windows in which upkeep may work (DESIGN section 13).
//!
//! Outside every window a run does nothing (no model call, nothing pushed), says so and exits 0,
//! and continuous mode stops at the next cycle. `schedule` is a list of entries; the time is
//! inside the schedule when any entry matches (Renovate's reading of `["after 22:00", "before
//! 06:00"]`: the night). One entry combines, in any order:
//! - `after HH:MM` (from that minute on), `before HH:MM` (until that minute), or `HH:MM-HH:MM`;
//!   when the start is not before the end the window wraps past midnight (`after 22:00 before
//!   06:00`, `22:00-06:00`);
//! - `on DAYS`: `mon`..`sun` (or full names), ranges (`mon-fri`, `fri-mon`), lists (`sat,sun`),
//!   `weekdays` or `weekends`. The day is the local day at the moment checked, so `22:00-06:00
//!   on fri` does not reach into Saturday morning.
//!
//! Times are 24-hour, local to `timezone` (an IANA name such as `Europe/Berlin`, read from the
//! system's time zone database; default UTC). A repository's schedule without a `timezone`
//! uses the operator's. Every mistake is a configuration error naming the entry.

use jiff::Timestamp;
use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;

/// Every day of the week, as a bit set (bit 0 = Monday).
const EVERY_DAY: u8 = 0b111_1111;
/// How far ahead [`Schedule::next_opening`] looks: a week and a day covers every window.
const LOOKAHEAD_MINUTES: i64 = 8 * 24 * 60;

/// One entry of `schedule`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    after: Option<Time>,
    before: Option<Time>,
    days: u8,
}

impl Window {
    fn matches(&self, weekday: Weekday, time: Time) -> bool {
        let day_bit = 1u8 << (weekday.to_monday_zero_offset() as u8);
        if self.days & day_bit == 0 {
            return false;
        }
        match (self.after, self.before) {
            (None, None) => true,
            (Some(after), None) => time >= after,
            (None, Some(before)) => time < before,
            (Some(after), Some(before)) if after < before => time >= after && time < before,
            (Some(after), Some(before)) => time >= after || time < before,
        }
    }
}

/// What one config file says: its windows (when it sets `schedule`) and its zone (when it
/// sets `timezone`), checked.
#[derive(Debug, Clone, Default)]
pub struct ScheduleKeys {
    entries: Vec<String>,
    windows: Option<Vec<Window>>,
    zone: Option<(String, TimeZone)>,
}

impl ScheduleKeys {
    /// Checks the `schedule` and `timezone` keys of one file.
    pub fn parse(schedule: Option<&[String]>, timezone: Option<&str>) -> Result<Self, String> {
        let zone = match timezone.map(str::trim) {
            None => None,
            Some(name) => Some((
                name.to_owned(),
                TimeZone::get(name).map_err(|error| {
                    format!("invalid `timezone` {name:?}: {error} (an IANA name such as \"Europe/Berlin\" or \"UTC\")")
                })?,
            )),
        };
        let windows = match schedule {
            None => None,
            Some([]) => {
                return Err("invalid `schedule`: the list is empty (leave the key out to allow every hour)".to_owned());
            }
            Some(entries) => Some(
                entries
                    .iter()
                    .map(|entry| {
                        parse_entry(entry).map_err(|error| format!("invalid `schedule` entry {entry:?}: {error}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Self {
            entries: schedule.map(<[String]>::to_vec).unwrap_or_default(),
            windows,
            zone,
        })
    }

    /// The schedule these keys set, in their own zone, else `fallback_zone`'s, else UTC.
    pub fn schedule(&self, fallback_zone: Option<&ScheduleKeys>) -> Option<Schedule> {
        let windows = self.windows.clone()?;
        let (zone_name, zone) = self
            .zone
            .clone()
            .or_else(|| fallback_zone.and_then(|keys| keys.zone.clone()))
            .unwrap_or_else(|| ("UTC".to_owned(), TimeZone::UTC));
        Some(Schedule {
            entries: self.entries.clone(),
            windows,
            zone_name,
            zone,
        })
    }
}

/// A schedule with its time zone: when upkeep may work.
#[derive(Debug, Clone)]
pub struct Schedule {
    entries: Vec<String>,
    windows: Vec<Window>,
    zone_name: String,
    zone: TimeZone,
}

impl Schedule {
    /// Whether upkeep may work at `now`.
    pub fn allows(&self, now: Timestamp) -> bool {
        let local = now.to_zoned(self.zone.clone());
        let (weekday, time) = (local.weekday(), local.time());
        self.windows.iter().any(|window| window.matches(weekday, time))
    }

    /// The first minute from `now` on at which the schedule allows work (within a week and a
    /// day; every valid schedule opens within that).
    pub fn next_opening(&self, now: Timestamp) -> Option<Timestamp> {
        let start = now.as_second() - now.as_second().rem_euclid(60);
        (0..=LOOKAHEAD_MINUTES)
            .filter_map(|minute| Timestamp::from_second(start + minute * 60).ok())
            .find(|&moment| moment >= now && self.allows(moment))
    }

    /// `["after 22:00", "before 06:00"] (Europe/Berlin)`, for messages.
    pub fn describe(&self) -> String {
        format!("{:?} ({})", self.entries, self.zone_name)
    }

    /// The local time at `now` in the schedule's zone, for messages: `Tue 14:03`.
    pub fn local_time(&self, now: Timestamp) -> String {
        now.to_zoned(self.zone.clone()).strftime("%a %H:%M").to_string()
    }

    /// When the next window opens, in the schedule's zone: `Tue 22:00 (Europe/Berlin)`.
    pub fn describe_opening(&self, moment: Timestamp) -> String {
        format!("{} ({})", self.local_time(moment), self.zone_name)
    }
}

fn parse_entry(entry: &str) -> Result<Window, String> {
    // `sat, sun` is one day list.
    let normalised = entry.replace(", ", ",").replace(" ,", ",");
    let mut tokens = normalised.split_whitespace();
    let mut window = Window {
        after: None,
        before: None,
        days: 0,
    };
    let mut saw_anything = false;
    while let Some(token) = tokens.next() {
        saw_anything = true;
        match token.to_ascii_lowercase().as_str() {
            "after" => set_once(&mut window.after, parse_time(tokens.next())?, "after")?,
            "before" => set_once(&mut window.before, parse_time(tokens.next())?, "before")?,
            "on" => {
                let days = tokens.next().ok_or("`on` needs days, e.g. `on mon-fri`")?;
                if window.days != 0 {
                    return Err("days are given twice".into());
                }
                window.days = parse_days(days)?;
            }
            range if range.contains('-') && range.contains(':') => {
                let (from, to) = range.split_once('-').ok_or("expected HH:MM-HH:MM")?;
                set_once(&mut window.after, parse_time(Some(from))?, "after")?;
                set_once(&mut window.before, parse_time(Some(to))?, "before")?;
            }
            other => {
                return Err(format!(
                    "unexpected {other:?}; an entry is `after HH:MM`, `before HH:MM` or `HH:MM-HH:MM`, optionally with `on DAYS` (e.g. `on mon-fri`)"
                ));
            }
        }
    }
    if !saw_anything {
        return Err("the entry is empty".into());
    }
    if window.days == 0 {
        window.days = EVERY_DAY;
    }
    if window.after.is_some() && window.after == window.before {
        return Err("the window starts and ends at the same minute, so it is empty".into());
    }
    Ok(window)
}

fn set_once(slot: &mut Option<Time>, value: Time, what: &str) -> Result<(), String> {
    if slot.replace(value).is_some() {
        return Err(format!("`{what}` is given twice"));
    }
    Ok(())
}

fn parse_time(token: Option<&str>) -> Result<Time, String> {
    let token = token.ok_or("expected a time, HH:MM")?;
    let (hours, minutes) = token
        .split_once(':')
        .ok_or_else(|| format!("{token:?} is not a time (HH:MM, 24-hour)"))?;
    let number = |text: &str, max: i8| {
        text.parse::<i8>()
            .ok()
            .filter(|value| (0..=max).contains(value) && (1..=2).contains(&text.len()))
            .ok_or_else(|| format!("{token:?} is not a time (HH:MM, 24-hour)"))
    };
    let (hours, minutes) = (number(hours, 23)?, number(minutes, 59)?);
    Time::new(hours, minutes, 0, 0).map_err(|error| format!("{token:?}: {error}"))
}

fn parse_days(spec: &str) -> Result<u8, String> {
    match spec.to_ascii_lowercase().as_str() {
        "weekdays" => return Ok(0b001_1111),
        "weekends" => return Ok(0b110_0000),
        _ => {}
    }
    let mut days = 0u8;
    for part in spec.split(',').filter(|part| !part.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (weekday(first)?, weekday(last)?),
            None => (weekday(part)?, weekday(part)?),
        };
        // A range wraps past Sunday: `fri-mon` is Friday to Monday.
        let mut day = first;
        loop {
            days |= 1 << day;
            if day == last {
                break;
            }
            day = (day + 1) % 7;
        }
    }
    if days == 0 {
        return Err(format!("no days in {spec:?}"));
    }
    Ok(days)
}

/// Monday = 0 .. Sunday = 6.
fn weekday(name: &str) -> Result<u8, String> {
    const NAMES: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let name = name.to_ascii_lowercase();
    NAMES
        .iter()
        .position(|full| name.len() >= 3 && full.starts_with(&name))
        .map(|index| index as u8)
        .ok_or_else(|| format!("{name:?} is not a day (mon, tue, wed, thu, fri, sat, sun, weekdays, weekends)"))
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
