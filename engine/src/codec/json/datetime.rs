//! DATETIME as an RFC 3339 string (`ENCODE f AS RFC3339`): parsed into UTC nanoseconds since
//! the epoch, and written back in the canonical `YYYY-MM-DDTHH:MM:SS[.fraction]Z` form.
//!
//! Parsing is chrono's `DateTime::parse_from_rfc3339` (offsets are applied, so every instant
//! lands in UTC); instants outside the `i64` nanosecond range (years 1677–2262) are refused
//! rather than wrapped. Writing prints the fraction as 3, 6 or 9 digits (as few as keep the
//! value exact), so parse(write(t)) == t for every representable `t`.

use std::io::Write;

use chrono::{DateTime, Datelike, Timelike};

/// UTC nanoseconds of an RFC 3339 timestamp, or why it is not one.
pub(crate) fn parse_rfc3339(text: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
    let parsed = DateTime::parse_from_rfc3339(text).map_err(|e| format!("'{text}': {e}"))?;
    parsed
        .timestamp_nanos_opt()
        .ok_or_else(|| format!("'{text}' is outside the DATETIME range (years 1677 to 2262)"))
}

/// Appends `nanos` (UTC nanoseconds since the epoch) as RFC 3339, without quotes.
pub(crate) fn write_rfc3339(nanos: i64, out: &mut Vec<u8>) {
    let t = DateTime::from_timestamp_nanos(nanos);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let fraction = t.nanosecond();
    let _ = if fraction == 0 {
        Ok(())
    } else if fraction.is_multiple_of(1_000_000) {
        write!(out, ".{:03}", fraction / 1_000_000)
    } else if fraction.is_multiple_of(1_000) {
        write!(out, ".{:06}", fraction / 1_000)
    } else {
        write!(out, ".{fraction:09}")
    };
    out.push(b'Z');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for nanos in [
            0,
            1,
            -1,
            1_700_000_000_123_000_000,
            1_700_000_000_123_456_000,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_rfc3339(nanos, &mut out);
            assert_eq!(
                parse_rfc3339(&out),
                Ok(nanos),
                "{}",
                String::from_utf8_lossy(&out)
            );
        }
        assert_eq!(
            parse_rfc3339(b"2024-01-01T01:00:00+01:00"),
            parse_rfc3339(b"2024-01-01T00:00:00Z")
        );
        assert!(parse_rfc3339(b"2024-01-01").is_err());
        assert!(parse_rfc3339(b"3024-01-01T00:00:00Z").is_err());
    }
}
