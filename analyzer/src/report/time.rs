//! Timestamps as the reports write them: RFC 3339, UTC, nanoseconds.

/// Formats Unix nanoseconds as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
pub fn rfc3339_nanos(ns: u64) -> String {
    let mut s = String::with_capacity(30);
    write_rfc3339_nanos(&mut s, ns);
    s
}

/// Appends `ns` as [`rfc3339_nanos`] formats it, without a string of its own (a CSV row's
/// times).
pub fn write_rfc3339_nanos(out: &mut String, ns: u64) {
    use super::text::push_padded;
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Years from 1970 on: never negative for Unix nanoseconds in a u64.
    let (y, m, d) = civil_from_days(days);
    // "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{frac:09}Z" (report/text.rs).
    push_padded(out, y as u64, 4);
    for (sep, v) in
        [('-', u64::from(m)), ('-', u64::from(d)), ('T', sod / 3600), (':', (sod / 60) % 60), (':', sod % 60)]
    {
        out.push(sep);
        push_padded(out, v, 2);
    }
    out.push('.');
    push_padded(out, frac, 9);
    out.push('Z');
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_nanos(0), "1970-01-01T00:00:00.000000000Z");
        // date -u -d @951782400: 2000-02-29 (a leap day of a century leap year).
        assert_eq!(rfc3339_nanos(951_782_400_000_000_001), "2000-02-29T00:00:00.000000001Z");
        // date -u -d @1700000000: 2023-11-14T22:13:20Z.
        assert_eq!(rfc3339_nanos(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123456789Z");
        assert_eq!(rfc3339_nanos(4_102_444_799_999_999_999), "2099-12-31T23:59:59.999999999Z");
        // date -u -d @18446744073: the last instant of u64 nanoseconds.
        assert_eq!(rfc3339_nanos(u64::MAX), "2554-07-21T23:34:33.709551615Z");
        let mut row = String::from("a,");
        write_rfc3339_nanos(&mut row, 1_700_000_000_123_456_789);
        assert_eq!(row, "a,2023-11-14T22:13:20.123456789Z");
    }
}
