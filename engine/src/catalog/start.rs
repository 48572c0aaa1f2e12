//! What a START fixes of its domain's clock (DESIGN §5 "Domains and time"): the logical
//! instant a paced domain is anchored at and the rate its logical time runs, checked when the
//! START is planned so that a started domain's clock always exists.
//!
//! `START;` leaves the domain unpaced (it reads UTC). `START AT NOW [TIME RATE f]` anchors
//! logical time at the wall clock of the START; `START AT '<RFC 3339 instant>' [TIME RATE f]`
//! anchors it at that instant. The runtime turns the anchor into a running clock
//! (`runtime::clock::DomainPace`).

use nervix_nspl::ast::session::StartAt;

/// A paced START's anchor: logical time `logical_ns` at the START, running at `rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartAnchor {
    pub logical_ns: i64,
    pub rate: f64,
}

/// The anchor of a START that ran when the wall clock read `started_wall_ns`: `None` for an
/// unpaced START, a refusal (its message) for an instant that is not RFC 3339 or a rate that
/// is not a positive finite number.
pub fn start_anchor(at: &StartAt, started_wall_ns: i64) -> Result<Option<StartAnchor>, String> {
    let (logical_ns, rate) = match at {
        StartAt::Default => return Ok(None),
        StartAt::Now { time_rate } => (started_wall_ns, *time_rate),
        StartAt::Instant { instant, time_rate } => {
            let logical_ns = chrono::DateTime::parse_from_rfc3339(instant.trim())
                .ok()
                .and_then(|instant| instant.timestamp_nanos_opt())
                .ok_or_else(|| format!("START AT '{instant}' is not an RFC 3339 instant"))?;
            (logical_ns, *time_rate)
        }
    };
    let rate = rate.unwrap_or(1.0);
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!(
            "TIME RATE must be a positive finite number, not {rate}"
        ));
    }
    Ok(Some(StartAnchor { logical_ns, rate }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn starts_anchor_at_their_instant_or_at_the_start() {
        assert_eq!(start_anchor(&StartAt::Default, 7), Ok(None));
        assert_eq!(
            start_anchor(&StartAt::Now { time_rate: None }, 7),
            Ok(Some(StartAnchor {
                logical_ns: 7,
                rate: 1.0
            }))
        );
        let at = StartAt::Instant {
            instant: "2026-01-01T00:00:00Z".to_string(),
            time_rate: Some(10.0),
        };
        assert_eq!(
            start_anchor(&at, 7),
            Ok(Some(StartAnchor {
                logical_ns: 1_767_225_600 * SECOND,
                rate: 10.0
            }))
        );
    }

    #[test]
    fn bad_instants_and_rates_are_refused() {
        let bad = StartAt::Instant {
            instant: "yesterday".to_string(),
            time_rate: None,
        };
        assert_eq!(
            start_anchor(&bad, 7),
            Err("START AT 'yesterday' is not an RFC 3339 instant".to_string())
        );
        for rate in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let at = StartAt::Now {
                time_rate: Some(rate),
            };
            assert_eq!(
                start_anchor(&at, 0),
                Err(format!(
                    "TIME RATE must be a positive finite number, not {rate}"
                ))
            );
        }
    }
}
