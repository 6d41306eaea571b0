//! Time as stores and operators write it: durations (`90d`, `12h`, `2w`, `30m`, `45s`, for
//! `--older-than` / `--idle`), timestamps (LangGraph's ISO 8601 `ts` with an offset,
//! DeerFlow's `YYYY-MM-DD HH:MM:SS.ffffff` UTC) as Unix seconds, Unix time back as
//! DeerFlow's text, and the time inside a checkpoint id (LangGraph's UUIDv6).

/// The forms a duration takes, for error messages.
const FORMS: &str = "a number and a unit: s, m, h, d or w (e.g. 45s, 30m, 12h, 90d, 2w)";

/// Seconds in a duration such as `30d`, `12h`, `2w`, `90m`, `45s`. The unit is required: a
/// bare number (`--older-than 90`) is an error, never read as seconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{s}': expected {FORMS}"))?;
    let mult = match unit {
        "" => return Err(format!("duration '{s}' has no unit: expected {FORMS}")),
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!("invalid duration unit in '{s}': expected {FORMS}"));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("duration '{s}' is too large"))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds of a timestamp like `2026-12-02T10:24:32.275424+00:00` (fraction and
/// offset optional; `Z` accepted). `None` when it does not parse.
pub fn unix_seconds(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> { ts.get(r)?.parse().ok() };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &ts[19..];
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        rest = &r[digits..];
    }
    let offset = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6).unwrap_or("0").parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (inverse of
/// [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Now, in Unix microseconds.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Unix microseconds as DeerFlow's SQLite stores a UTC time:
/// `2026-08-20 08:12:01.250000`.
pub fn deerflow_text(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{frac:06}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// 100-ns intervals from the Gregorian epoch of UUID time (1582-10-15) to 1970-01-01.
const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;

/// Unix microseconds of the time a version-6 UUID carries (LangGraph mints checkpoint ids
/// with `uuid6`, so an id's time is when the checkpoint was written); `None` for anything
/// that is not a UUIDv6 in its 36-character text form.
pub fn uuid6_micros(id: &str) -> Option<i64> {
    let b = id.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') || b[14] != b'6' {
        return None;
    }
    let hex = |r: std::ops::Range<usize>| i64::from_str_radix(id.get(r)?, 16).ok();
    let ticks = (hex(0..8)? << 28) | (hex(9..13)? << 12) | hex(15..18)?;
    Some((ticks - UUID_EPOCH_OFFSET).div_euclid(10))
}

/// Unix microseconds as RFC 3339 UTC to the second: `2026-08-20T08:12:01Z`.
pub fn utc_text(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90d"), Ok(90 * 86_400));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("45s"), Ok(45));
        assert!(parse_duration("45").unwrap_err().contains("no unit"));
        assert!(parse_duration("90").is_err());
        assert!(parse_duration("3y").is_err());
        assert!(parse_duration("d").is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00+00:00"), Some(0));
        assert_eq!(
            unix_seconds("2026-12-02T10:24:32.275424+00:00"),
            Some(1_796_207_072)
        );
        assert_eq!(
            unix_seconds("2026-12-02T18:24:32+08:00"),
            unix_seconds("2026-12-02T10:24:32Z")
        );
        assert_eq!(unix_seconds("yesterday"), None);
    }

    #[test]
    fn deerflow_text_round_trips() {
        let t = unix_seconds("2026-08-20T08:12:01Z").unwrap();
        assert_eq!(
            deerflow_text(t * 1_000_000 + 250_000),
            "2026-08-20 08:12:01.250000"
        );
        assert_eq!(unix_seconds("2026-08-20 08:12:01.250000"), Some(t));
        assert_eq!(deerflow_text(0), "1970-01-01 00:00:00.000000");
    }

    #[test]
    fn uuid6_times() {
        // uuid6 of 2025-12-03T18:57:01.123456Z, as LangGraph's `uuid6()` lays it out.
        let micros = unix_seconds("2025-12-03T18:57:01Z").unwrap() * 1_000_000 + 123_456;
        let ticks = micros * 10 + UUID_EPOCH_OFFSET;
        let id = format!(
            "{:08x}-{:04x}-6{:03x}-8000-000000000000",
            ticks >> 28,
            (ticks >> 12) & 0xffff,
            ticks & 0xfff
        );
        assert_eq!(uuid6_micros(&id), Some(micros));
        assert_eq!(utc_text(micros), "2025-12-03T18:57:01Z");
        assert_eq!(uuid6_micros("1f1ee3a9-04b7-464f-bfff-95663584daca"), None);
        assert_eq!(uuid6_micros("not an id"), None);
        assert_eq!(uuid6_micros("1f1ee3a9-04b7-664f-bfff-95663584dac"), None);
    }
}
