//! CronJob schedules as upstream reads them (robfig/cron's standard parser): five fields
//! (minute hour day-of-month month day-of-week) or a descriptor (@yearly, @annually, @monthly,
//! @weekly, @daily, @midnight, @hourly), evaluated in an IANA time zone. The API server
//! validates with it and the CronJob controller schedules with it, so both agree.

use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CronError {
    /// What is wrong with `spec.schedule`.
    #[error("{0}")]
    Schedule(String),
    /// What is wrong with `spec.timeZone`.
    #[error("{0}")]
    TimeZone(String),
}

const DESCRIPTORS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: croner::Cron,
    tz: TimeZone,
}

/// The zone `spec.timeZone` names; None is the controller's own (upstream: time.Local).
pub fn time_zone(name: Option<&str>) -> Result<TimeZone, CronError> {
    let Some(name) = name else {
        return Ok(TimeZone::system());
    };
    if name.is_empty() {
        return Err(CronError::TimeZone(
            "timeZone must be nil or non-empty string".into(),
        ));
    }
    if name.eq_ignore_ascii_case("local") {
        return Err(CronError::TimeZone(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        ));
    }
    if name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| CronError::TimeZone(format!("unknown time zone {name}")))
}

/// Checks the schedule's syntax only, with upstream's messages.
fn parse_schedule(schedule: &str) -> Result<croner::Cron, CronError> {
    let trimmed = schedule.trim();
    if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") || trimmed.contains(" TZ=") {
        return Err(CronError::Schedule(
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into(),
        ));
    }
    let fields: Vec<&str> = trimmed.split_whitespace().collect();
    let descriptor = trimmed.starts_with('@');
    if descriptor && !DESCRIPTORS.contains(&trimmed) {
        return Err(CronError::Schedule(format!(
            "unrecognized descriptor: {trimmed}"
        )));
    }
    if !descriptor && fields.len() != 5 {
        return Err(CronError::Schedule(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(trimmed)
        .map_err(|e| CronError::Schedule(e.to_string()))
}

impl Schedule {
    pub fn parse(schedule: &str, time_zone_name: Option<&str>) -> Result<Schedule, CronError> {
        let cron = parse_schedule(schedule)?;
        let tz = time_zone(time_zone_name)?;
        Ok(Schedule { cron, tz })
    }

    /// The first scheduled time strictly after `t`.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let z = t.to_zoned(self.tz.clone());
        self.cron
            .find_next_occurrence(&z, false)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The last scheduled time at or before `t`.
    pub fn last_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let z = t.to_zoned(self.tz.clone());
        self.cron
            .find_previous_occurrence(&z, true)
            .ok()
            .map(|z| z.timestamp())
    }

    /// `t` written in the schedule's zone, RFC 3339 (the cronjob-scheduled-timestamp annotation).
    pub fn rfc3339_in_zone(&self, t: Timestamp) -> String {
        let z = t.to_zoned(self.tz.clone());
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn five_fields_and_descriptors() {
        let s = Schedule::parse("*/15 * * * *", Some("UTC")).unwrap();
        assert_eq!(
            s.next_after(ts("2026-01-01T10:07:30Z")),
            Some(ts("2026-01-01T10:15:00Z"))
        );
        assert_eq!(
            s.last_at_or_before(ts("2026-01-01T10:15:00Z")),
            Some(ts("2026-01-01T10:15:00Z"))
        );
        let h = Schedule::parse("@hourly", Some("UTC")).unwrap();
        assert_eq!(
            h.next_after(ts("2026-01-01T10:00:00Z")),
            Some(ts("2026-01-01T11:00:00Z"))
        );
        let weekdays = Schedule::parse("30 9 * * MON-FRI", Some("UTC")).unwrap();
        // 2026-01-03 is a Saturday: the next run is Monday the 5th.
        assert_eq!(
            weekdays.next_after(ts("2026-01-02T10:00:00Z")),
            Some(ts("2026-01-05T09:30:00Z"))
        );
    }

    #[test]
    fn time_zones_move_the_wall_clock() {
        let s = Schedule::parse("0 9 * * *", Some("Europe/Berlin")).unwrap();
        // 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
        assert_eq!(
            s.next_after(ts("2026-01-10T00:00:00Z")),
            Some(ts("2026-01-10T08:00:00Z"))
        );
        assert_eq!(
            s.next_after(ts("2026-07-10T00:00:00Z")),
            Some(ts("2026-07-10T07:00:00Z"))
        );
        assert_eq!(
            s.rfc3339_in_zone(ts("2026-07-10T07:00:00Z")),
            "2026-07-10T09:00:00+02:00"
        );
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        let e = Schedule::parse("* * * *", None).unwrap_err();
        assert_eq!(
            e,
            CronError::Schedule("expected exactly 5 fields, found 4: [* * * *]".into())
        );
        assert!(Schedule::parse("0 * * * * *", None).is_err());
        assert!(Schedule::parse("61 * * * *", None).is_err());
        assert!(Schedule::parse("@fortnightly", None).is_err());
        assert!(matches!(
            Schedule::parse("CRON_TZ=UTC * * * * *", None),
            Err(CronError::Schedule(m)) if m.contains("use timeZone field")
        ));
        assert_eq!(
            Schedule::parse("* * * * *", Some("Mars/Olympus")).unwrap_err(),
            CronError::TimeZone("unknown time zone Mars/Olympus".into())
        );
        assert!(Schedule::parse("* * * * *", Some("Local")).is_err());
    }
}
