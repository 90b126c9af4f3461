//! A time of day in a time zone, and its occurrences as instants. A local
//! time that does not exist on a day (skipped by a DST change) falls to
//! the instant just after the gap; one that occurs twice (clocks put back)
//! counts once, at its first occurrence — jiff's "compatible" rule, the
//! one calendars use.

use jiff::{civil::Date, tz::TimeZone, Timestamp};
use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

/// HH:MM, 00:00 to 23:59.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DailyTime {
    pub hour: u8,
    pub minute: u8,
}

impl FromStr for DailyTime {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a time of day: write HH:MM, 00:00 to 23:59");
        let (h, m) = text.trim().split_once(':').ok_or_else(bad)?;
        if h.is_empty() || h.len() > 2 || m.len() != 2 || !(h.bytes().chain(m.bytes())).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (hour, minute): (u8, u8) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        if hour > 23 || minute > 59 {
            return Err(bad());
        }
        Ok(DailyTime { hour, minute })
    }
}

impl fmt::Display for DailyTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)
    }
}

/// The time zone named `name` (IANA, e.g. `Europe/Paris`, or `UTC`) from
/// the rules bundled in the binary, with its canonical name.
pub fn zone(name: &str) -> Result<(TimeZone, String), String> {
    let name = name.trim();
    // Only names: a POSIX rule string or a fixed offset is not a place.
    let plausible = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'));
    let tz = plausible.then(|| TimeZone::get(name).ok()).flatten().ok_or_else(|| {
        format!("'{name}' is not a time zone: use an IANA name such as Europe/Paris, America/New_York or UTC")
    })?;
    let canonical = tz.iana_name().unwrap_or(name).to_string();
    Ok((tz, canonical))
}

/// The instant `at` falls on the local date `date`.
fn on(date: Date, at: DailyTime, tz: &TimeZone) -> Option<i64> {
    let local = date.at(at.hour as i8, at.minute as i8, 0, 0);
    local.to_zoned(tz.clone()).ok().map(|z| z.timestamp().as_second())
}

fn local_date(instant: i64, tz: &TimeZone) -> Option<Date> {
    Timestamp::from_second(instant).ok().map(|t| t.to_zoned(tz.clone()).date())
}

/// The latest occurrence of `at` in (`after`, `upto`], if any. Across
/// days the occurrences are in order, so the first at or before `upto`
/// going back from its date is the latest.
pub fn last_occurrence(at: DailyTime, tz: &TimeZone, after: i64, upto: i64) -> Option<i64> {
    let mut date = local_date(upto, tz)?;
    // Two days back is enough: one day's occurrence may land after `upto`
    // only on `upto`'s own date.
    for _ in 0..3 {
        if let Some(instant) = on(date, at, tz) {
            if instant <= upto {
                return (instant > after).then_some(instant);
            }
        }
        date = date.yesterday().ok()?;
    }
    None
}

/// The first occurrence of `at` strictly after `after`.
pub fn next_occurrence(at: DailyTime, tz: &TimeZone, after: i64) -> i64 {
    let Some(mut date) = local_date(after, tz) else { return after };
    for _ in 0..3 {
        if let Some(instant) = on(date, at, tz) {
            if instant > after {
                return instant;
            }
        }
        match date.tomorrow() {
            Ok(d) => date = d,
            Err(_) => break,
        }
    }
    after
}

/// `instant` as a wall-clock time in `tz`, with the zone's abbreviation:
/// "2026-01-15 19:00 CET".
pub fn local_time(instant: i64, tz: &TimeZone) -> String {
    match Timestamp::from_second(instant) {
        Ok(t) => t.to_zoned(tz.clone()).strftime("%Y-%m-%d %H:%M %Z").to_string(),
        Err(_) => instant.to_string(),
    }
}
