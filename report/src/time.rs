//! Unix-seconds ↔ ISO 8601 conversion for the timestamps a Hermes home stores.
//!
//! Hermes writes aware ISO strings (`2026-09-27T03:00:00.123456+02:00`) in its own timezone
//! and epoch floats in `state.db`; the report compares both on one axis (Unix seconds) and
//! prints UTC with a `Z`. The civil-date arithmetic is the days-from-civil algorithm, so no
//! calendar dependency is needed for these few conversions.

/// Seconds since the epoch at `at`, with the fraction; a time before the epoch reads as 0.
pub fn unix_secs_f64(at: std::time::SystemTime) -> f64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Seconds in one day.
pub const DAY_SECONDS: f64 = 86_400.0;

/// Parse an ISO 8601 timestamp into Unix seconds.
///
/// Accepts `YYYY-MM-DD`, optionally followed by `T` or a space, `HH:MM[:SS[.fraction]]` and a
/// `Z`, `±HH:MM` or `±HHMM` offset. A timestamp without an offset is read as UTC (Hermes
/// always writes aware timestamps; naive ones only come from hand edits).
pub fn parse_iso(text: &str) -> Option<f64> {
    // Stored timestamps carry no padding: trim only when an end is not plain ASCII.
    let plain = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii() && !b.is_ascii_whitespace());
    let text = match plain(text.as_bytes().first()) && plain(text.as_bytes().last()) {
        true => text,
        false => text.trim(),
    };
    let (date, rest) = text.split_at_checked(10)?;
    let day = parse_date(date)?;
    let rest = rest.strip_prefix(['T', 't', ' ']).unwrap_or(rest);
    if rest.is_empty() {
        return Some(day as f64 * DAY_SECONDS);
    }
    let (clock, offset) = split_offset(rest)?;
    let seconds = parse_clock(clock)?;
    Some(day as f64 * DAY_SECONDS + seconds - offset)
}

/// Format Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds, rounded down).
pub fn format_iso_z(unix: f64) -> String {
    let total = unix.floor() as i64;
    let days = total.div_euclid(86_400);
    let secs = total.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

/// The `YYYY-MM-DD` (UTC) of Unix seconds.
pub fn format_date(unix: f64) -> String {
    let (y, m, d) = civil_from_days((unix.floor() as i64).div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// How a stored timestamp is written apart from its instant: the date/time separator and
/// the offset text after the seconds (`+02:00`, `Z`, or empty). Timestamps of one shape sort
/// as text in the order of their instants, which lets a range of them be read through an
/// index on the text; `None` for a text that is not a full `date time:minutes:seconds`.
pub fn stamp_shape(text: &str) -> Option<(u8, &str)> {
    let bytes = text.as_bytes();
    if bytes.len() < 19 || bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let sep = bytes[10];
    if !matches!(sep, b'T' | b't' | b' ') || parse_iso(text).is_none() {
        return None;
    }
    let rest = &text[19..];
    let rest = match rest.strip_prefix('.') {
        Some(fraction) => fraction.trim_start_matches(|c: char| c.is_ascii_digit()),
        None => rest,
    };
    Some((sep, rest))
}

/// Seconds east of UTC of an offset text from [`stamp_shape`].
pub fn offset_seconds(offset: &str) -> Option<i64> {
    if offset.is_empty() || offset.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let (_, seconds) = split_offset(&format!("00:00{offset}"))?;
    Some(seconds as i64)
}

/// `YYYY-MM-DD<sep>HH:MM:SS` of whole Unix seconds shifted by `offset` seconds: the text
/// bound below which every timestamp of that shape is an earlier instant.
pub fn format_local(unix: i64, offset: i64, sep: u8) -> String {
    let total = unix + offset;
    let (y, m, d) = civil_from_days(total.div_euclid(86_400));
    let secs = total.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}{}{:02}:{:02}:{:02}",
        char::from(sep),
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

fn parse_date(date: &str) -> Option<i64> {
    let bytes = date.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let year: i64 = digits(&date[0..4])?;
    let month: i64 = digits(&date[5..7])?;
    let day: i64 = digits(&date[8..10])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

fn split_offset(rest: &str) -> Option<(&str, f64)> {
    if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        return Some((clock, 0.0));
    }
    let Some(pos) = rest.rfind(['+', '-']) else {
        return Some((rest, 0.0));
    };
    let (clock, offset) = rest.split_at(pos);
    let sign = if offset.starts_with('-') { -1.0 } else { 1.0 };
    let body = offset[1..].replace(':', "");
    if body.len() != 4 {
        return None;
    }
    let hours: i64 = digits(&body[0..2])?;
    let minutes: i64 = digits(&body[2..4])?;
    Some((clock, sign * (hours * 3600 + minutes * 60) as f64))
}

fn parse_clock(clock: &str) -> Option<f64> {
    let mut parts = clock.splitn(3, ':');
    let hours: i64 = digits(parts.next()?)?;
    let minutes: i64 = digits(parts.next()?)?;
    let seconds = match parts.next() {
        Some(s) => {
            let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
            let whole: i64 = digits(whole)?;
            let frac = if frac.is_empty() {
                0.0
            } else {
                digits::<i64>(frac)? as f64 / 10f64.powi(i32::try_from(frac.len()).ok()?)
            };
            whole as f64 + frac
        }
        None => 0.0,
    };
    if hours > 24 || minutes > 59 || seconds >= 61.0 {
        return None;
    }
    Some((hours * 3600 + minutes * 60) as f64 + seconds)
}

fn digits<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`]: days since 1970-01-01 to the proleptic Gregorian
/// (year, month, day). Also used for the log lines' timestamps.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_parse_to_the_same_instant_whatever_the_offset() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0.0),
            ("1970-01-01T00:00:00", 0.0),
            ("1970-01-02", 86_400.0),
            ("2026-09-27T12:00:00Z", 1_790_510_400.0),
            ("2026-09-27T14:00:00+02:00", 1_790_510_400.0),
            ("2026-09-27T14:00:00+0200", 1_790_510_400.0),
            ("2026-09-27T07:30:00-04:30", 1_790_510_400.0),
            ("2026-09-27 12:00:00.250000+00:00", 1_790_510_400.25),
            ("2000-02-29T00:00:00Z", 951_782_400.0),
        ];
        for (text, want) in cases {
            let got = parse_iso(text).expect("a valid timestamp must parse");
            assert!(
                (got - want).abs() < 1e-6,
                "{text} must be {want}, got {got}"
            );
        }
    }

    #[test]
    fn malformed_timestamps_are_rejected() {
        for text in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-09-27T25:00",
            "2026-09-27Tx",
        ] {
            assert!(parse_iso(text).is_none(), "{text:?} must not parse");
        }
    }

    #[test]
    fn formatting_round_trips_through_parsing() {
        for unix in [0.0, 951_782_400.0, 1_790_510_400.0, 4_102_444_799.0] {
            let text = format_iso_z(unix);
            assert_eq!(parse_iso(&text), Some(unix), "{text} must round-trip");
        }
        assert_eq!(format_iso_z(1_790_510_400.9), "2026-09-27T12:00:00Z");
        assert_eq!(format_date(1_790_510_400.0), "2026-09-27");
    }

    #[test]
    fn stamps_of_one_shape_sort_as_text_like_their_instants_and_bounds_cut_between_seconds() {
        assert_eq!(
            stamp_shape("2026-09-27T14:00:00.123456+02:00"),
            Some((b'T', "+02:00"))
        );
        assert_eq!(stamp_shape("2026-09-27 14:00:00Z"), Some((b' ', "Z")));
        assert_eq!(stamp_shape("2026-09-27T14:00:00"), Some((b'T', "")));
        assert_eq!(stamp_shape("2026-09-27"), None);
        assert_eq!(offset_seconds("+02:00"), Some(7200));
        assert_eq!(offset_seconds("-0430"), Some(-16_200));
        assert_eq!(offset_seconds("Z"), Some(0));
        // 12:00:00Z is 14:00:00 at +02:00: the bound sits below every stamp of that second
        // (with or without a fraction) and above every stamp of the second before.
        let bound = format_local(1_790_510_400, 7200, b'T');
        assert_eq!(bound, "2026-09-27T14:00:00");
        for later in [
            "2026-09-27T14:00:00+02:00",
            "2026-09-27T14:00:00.000001+02:00",
        ] {
            assert!(later > bound.as_str(), "{later} must sort after {bound}");
        }
        assert!("2026-09-27T13:59:59.999999+02:00" < bound.as_str());
    }
}
