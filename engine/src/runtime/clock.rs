//! The clocks the data plane reads, and how a started domain turns them into its logical time
//! (DESIGN §5 "Domains and time").
//!
//! The node has two clocks: UTC wall time ([`wall_ns`]) and a process-monotonic physical
//! clock ([`physical_ns`]). An unpaced domain (`START;`) reads UTC as its logical time. A
//! paced domain (`START AT NOW | '<instant>' [TIME RATE f]`) runs a [`DomainClock`]: logical
//! time leaves an anchor at `rate` logical nanoseconds per physical nanosecond, measured on
//! the monotonic clock, so it never steps backwards when the wall clock is adjusted.
//!
//! Why the mapping is exact: a finite positive `f64` is exactly `m × 2^e` with an integer
//! `m < 2^53`, so scaling an elapsed time is an integer multiply and shift in `i128`
//! (`floor(elapsed × m × 2^e)`), and its inverse — the earliest physical instant at which a
//! logical deadline is reached — is an exact ceiling division. The forward map is monotonic
//! and `logical_at(physical_at(l)) >= l` holds for every `l` (unit tests below), so a timer
//! armed for a logical deadline never wakes before it.
//!
//! A node that restarts cannot reuse a monotonic anchor from another process: it re-anchors
//! from the wall time the START recorded ([`DomainPace::resume`]), so logical time continues
//! from `anchor + wall elapsed × rate` (docs/decisions.md).
//!
//! Only the shard driver and the control core read the node clocks; the graph and every
//! state machine below it take the instants as arguments, so tests drive them with any time
//! they like.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use nervix_nspl::ast::session::StartAt;

use crate::catalog::start::start_anchor;
use nervix_shards::flush::Now;

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the Unix epoch, UTC.
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Monotonic nanoseconds since the first call in this process.
pub fn physical_ns() -> u64 {
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A positive rate as the exact dyadic rational `mantissa × 2^exponent` (`mantissa` odd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dyadic {
    mantissa: i128,
    exponent: i32,
}

impl Dyadic {
    /// The exact value of `rate`; `None` unless it is finite and positive.
    fn of(rate: f64) -> Option<Dyadic> {
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let bits = rate.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mantissa, exponent) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1u64 << 52, biased - 1075)
        };
        let zeros = mantissa.trailing_zeros();
        Some(Dyadic {
            mantissa: i128::from(mantissa >> zeros),
            exponent: exponent + zeros as i32,
        })
    }

    /// `floor(elapsed × rate)`, saturating far beyond any `i64`.
    fn scale(self, elapsed: i128) -> i128 {
        // |elapsed| < 2^65 and mantissa < 2^53: the product fits.
        let product = elapsed * self.mantissa;
        if self.exponent >= 0 {
            // 2^127 does not fit an i128 (`checked_shl` checks the shift, not the value).
            let factor = if self.exponent < 127 {
                1i128 << self.exponent
            } else {
                0
            };
            match product.checked_mul(factor) {
                Some(value) if factor != 0 => value,
                _ if product == 0 => 0,
                _ if product > 0 => i128::MAX,
                _ => i128::MIN,
            }
        } else {
            // An arithmetic shift is a floor division by a power of two.
            product >> (-self.exponent).min(127)
        }
    }

    /// The least `x` with `floor(x × rate) >= target`.
    fn unscale_ceil(self, target: i128) -> i128 {
        if self.exponent >= 0 {
            // x × mantissa × 2^e >= target. A divisor past 2^120 exceeds every target.
            match self.mantissa.checked_shl(self.exponent as u32) {
                Some(divisor) if self.exponent < 68 => div_ceil(target, divisor),
                _ => i128::from(target > 0),
            }
        } else {
            // x × mantissa >= target × 2^s.
            let shift = (-self.exponent) as u32;
            match 1i128
                .checked_shl(shift)
                .filter(|_| shift < 127)
                .and_then(|factor| target.checked_mul(factor))
            {
                Some(scaled) => div_ceil(scaled, self.mantissa),
                None if target > 0 => i128::MAX,
                None if target < 0 => i128::MIN,
                None => 0,
            }
        }
    }
}

/// `ceil(a / b)` for `b > 0`.
fn div_ceil(a: i128, b: i128) -> i128 {
    let quotient = a / b;
    if a % b != 0 && a > 0 {
        quotient + 1
    } else {
        quotient
    }
}

fn clamp_i64(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

fn clamp_u64(value: i128) -> u64 {
    u64::try_from(value).unwrap_or(if value < 0 { 0 } else { u64::MAX })
}

/// A paced domain's clock: logical time `anchor_logical_ns` at physical `anchor_physical_ns`,
/// advancing `rate` logical nanoseconds per physical one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DomainClock {
    pub anchor_logical_ns: i64,
    pub anchor_physical_ns: u64,
    pub rate: f64,
    exact: Dyadic,
}

impl DomainClock {
    /// A clock through the given anchor; `None` when `rate` is not finite and positive.
    pub fn new(anchor_logical_ns: i64, anchor_physical_ns: u64, rate: f64) -> Option<DomainClock> {
        Some(DomainClock {
            anchor_logical_ns,
            anchor_physical_ns,
            rate,
            exact: Dyadic::of(rate)?,
        })
    }

    /// The logical time at physical instant `physical_ns`.
    pub fn logical_at(&self, physical_ns: u64) -> i64 {
        let elapsed = i128::from(physical_ns) - i128::from(self.anchor_physical_ns);
        clamp_i64(i128::from(self.anchor_logical_ns) + self.exact.scale(elapsed))
    }

    /// The physical time logical time takes to advance `span_ns` (rounded up).
    pub fn physical_span_ns(&self, span_ns: u64) -> u64 {
        clamp_u64(self.exact.unscale_ceil(i128::from(span_ns)))
    }

    /// The earliest physical instant at which logical time reaches `logical_ns`.
    pub fn physical_at(&self, logical_ns: i64) -> u64 {
        let target = i128::from(logical_ns) - i128::from(self.anchor_logical_ns);
        let elapsed = self.exact.unscale_ceil(target);
        clamp_u64(i128::from(self.anchor_physical_ns).saturating_add(elapsed))
    }
}

/// How a started domain's logical time relates to the node's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum DomainPace {
    /// `START;`: logical time is UTC.
    #[default]
    Unpaced,
    /// `START AT …`: logical time runs on its own clock.
    Paced(DomainClock),
}

impl DomainPace {
    /// The pace of a domain whose START (`at`, recorded at wall time `started_wall_ns`) is
    /// resumed when the clocks read `wall_now_ns` and `physical_now_ns`: logical time goes on
    /// from the anchor by the wall time elapsed since the START, scaled by the rate, and from
    /// here on follows the monotonic clock.
    pub fn resume(
        at: &StartAt,
        started_wall_ns: i64,
        wall_now_ns: i64,
        physical_now_ns: u64,
    ) -> Result<DomainPace, String> {
        let Some(anchor) = start_anchor(at, started_wall_ns)? else {
            return Ok(DomainPace::Unpaced);
        };
        // A wall clock set back before the START must not run logical time backwards.
        let elapsed_wall_ns = wall_now_ns.saturating_sub(started_wall_ns).max(0);
        let at_start = DomainClock::new(anchor.logical_ns, 0, anchor.rate)
            .ok_or_else(|| format!("TIME RATE {} cannot run", anchor.rate))?;
        let logical_now_ns = at_start.logical_at(elapsed_wall_ns as u64);
        DomainClock::new(logical_now_ns, physical_now_ns, anchor.rate)
            .map(DomainPace::Paced)
            .ok_or_else(|| format!("TIME RATE {} cannot run", anchor.rate))
    }

    /// The domain's logical time when the node clocks read `wall_ns` and `physical_ns`.
    pub fn logical_ns(&self, wall_ns: i64, physical_ns: u64) -> i64 {
        match self {
            DomainPace::Unpaced => wall_ns,
            DomainPace::Paced(clock) => clock.logical_at(physical_ns),
        }
    }

    /// The physical length of a domain-time span (a poll's EVERY): a paced clock is linear,
    /// so a logical cadence is a physical one scaled by the rate.
    pub fn physical_span_ns(&self, span_ns: u64) -> u64 {
        match self {
            DomainPace::Unpaced => span_ns,
            DomainPace::Paced(clock) => clock.physical_span_ns(span_ns),
        }
    }

    /// The physical instant a logical deadline comes, seen from `now` (this domain's time).
    pub fn physical_deadline_ns(&self, deadline_ns: i64, now: Now) -> u64 {
        match self {
            DomainPace::Unpaced => now.physical_ns.saturating_add(
                u64::try_from(deadline_ns.saturating_sub(now.logical_ns)).unwrap_or(0),
            ),
            DomainPace::Paced(clock) => clock.physical_at(deadline_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    /// A rate of 2^127 (or more) saturates time forward, never wraps it to the past.
    #[test]
    fn a_rate_past_an_i128_saturates() {
        for exponent in [126, 127, 200] {
            let rate = Dyadic {
                mantissa: 1,
                exponent,
            };
            assert_eq!(
                rate.scale(1),
                if exponent < 127 { 1 << 126 } else { i128::MAX }
            );
            assert_eq!(rate.scale(0), 0);
        }
        let rate = Dyadic {
            mantissa: 1,
            exponent: 127,
        };
        assert_eq!(rate.scale(-1), i128::MIN);
    }

    fn clock(rate: f64) -> DomainClock {
        DomainClock::new(1_700_000_000 * SECOND, 5_000, rate).expect("a valid rate")
    }

    #[test]
    fn rate_one_follows_physical_time_one_to_one() {
        let c = clock(1.0);
        assert_eq!(c.logical_at(5_000), 1_700_000_000 * SECOND);
        assert_eq!(c.logical_at(5_000 + 42), 1_700_000_000 * SECOND + 42);
        assert_eq!(c.physical_at(1_700_000_000 * SECOND + 42), 5_042);
    }

    #[test]
    fn rate_ten_runs_logical_time_ten_times_faster() {
        let c = clock(10.0);
        // 100 ms of physical time is one logical second.
        assert_eq!(c.logical_at(5_000 + 100_000_000), 1_700_000_001 * SECOND);
        assert_eq!(c.physical_at(1_700_000_001 * SECOND), 5_000 + 100_000_000);
        // A deadline between two representable instants rounds up, never early.
        assert_eq!(c.physical_at(1_700_000_000 * SECOND + 15), 5_002);
    }

    #[test]
    fn slow_rates_round_logical_time_down() {
        let c = clock(0.5);
        assert_eq!(c.logical_at(5_003), 1_700_000_000 * SECOND + 1);
        assert_eq!(c.physical_at(1_700_000_000 * SECOND + 1), 5_002);
        assert_eq!(
            c.physical_at(1_700_000_000 * SECOND + 2 * SECOND),
            5_000 + 4_000_000_000
        );
    }

    #[test]
    fn physical_at_is_the_least_instant_reaching_the_deadline() {
        for rate in [1.0, 10.0, 0.5, 0.3, 3.7, 1e-3, 1234.5] {
            let c = clock(rate);
            for offset in -50i64..400 {
                let deadline = 1_700_000_000 * SECOND + offset;
                let p = c.physical_at(deadline);
                assert!(c.logical_at(p) >= deadline, "rate {rate} offset {offset}");
                // The least such instant (0 is where a deadline before the origin clamps).
                if p > 0 {
                    assert!(
                        c.logical_at(p - 1) < deadline,
                        "rate {rate} offset {offset}"
                    );
                }
            }
            // Monotonic.
            let mut last = i64::MIN;
            for p in 4_900u64..6_000 {
                let l = c.logical_at(p);
                assert!(l >= last, "rate {rate} at {p}");
                last = l;
            }
        }
    }

    #[test]
    fn extreme_instants_saturate_instead_of_wrapping() {
        let c = clock(1e9);
        assert_eq!(c.logical_at(u64::MAX), i64::MAX);
        let slow = clock(1e-9);
        assert_eq!(slow.physical_at(i64::MAX), u64::MAX);
        assert_eq!(slow.physical_at(i64::MIN), 0);
    }

    #[test]
    fn invalid_rates_are_refused() {
        for rate in [0.0, -1.0, f64::INFINITY, f64::NAN, -0.0] {
            assert!(DomainClock::new(0, 0, rate).is_none(), "{rate}");
        }
    }

    #[test]
    fn resuming_continues_from_the_wall_time_elapsed_since_start() {
        let at = StartAt::Instant {
            instant: "2026-01-01T00:00:00Z".to_string(),
            time_rate: Some(10.0),
        };
        let started = 1_800_000_000 * SECOND;
        // Restarted 3 s after the START, on a monotonic clock reading 777.
        let pace = DomainPace::resume(&at, started, started + 3 * SECOND, 777).expect("paces");
        let DomainPace::Paced(c) = pace else {
            panic!("START AT paces the domain");
        };
        assert_eq!(c.anchor_logical_ns, 1_767_225_600 * SECOND + 30 * SECOND);
        assert_eq!(c.anchor_physical_ns, 777);
        assert_eq!(
            pace.logical_ns(0, 777 + SECOND as u64),
            c.anchor_logical_ns + 10 * SECOND
        );
        // A wall clock set back before the START resumes at the anchor, not before it.
        let back = DomainPace::resume(&at, started, started - SECOND, 0).expect("paces");
        assert_eq!(back.logical_ns(0, 0), 1_767_225_600 * SECOND);
        assert_eq!(
            DomainPace::resume(&StartAt::Default, started, started, 0),
            Ok(DomainPace::Unpaced)
        );
    }

    #[test]
    fn unpaced_domains_read_the_wall_clock() {
        let pace = DomainPace::Unpaced;
        assert_eq!(pace.logical_ns(123, 456), 123);
        let now = Now::new(1_000, 50);
        assert_eq!(pace.physical_deadline_ns(1_500, now), 550);
        assert_eq!(pace.physical_deadline_ns(900, now), 50);
        let paced = DomainPace::Paced(DomainClock::new(1_000, 50, 10.0).expect("valid"));
        assert_eq!(paced.physical_deadline_ns(1_500, Now::new(1_000, 50)), 100);
        // A 1 s EVERY of a 10× domain polls every 100 ms; unpaced, every second.
        assert_eq!(paced.physical_span_ns(1_000_000_000), 100_000_000);
        assert_eq!(pace.physical_span_ns(1_000_000_000), 1_000_000_000);
        let third = DomainPace::Paced(DomainClock::new(0, 0, 3.0).expect("valid"));
        assert_eq!(third.physical_span_ns(10), 4);
    }
}
