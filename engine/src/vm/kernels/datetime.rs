//! Datetime functions over `Timestamp(Nanosecond, "UTC")`.
//!
//! Correct because every instant is an `i64` of nanoseconds since the Unix epoch in UTC:
//! fixed-width truncations (microsecond … day) and `date_bin` are Euclidean floor divisions
//! (so instants before 1970 round down, not toward zero) done in `i128` and checked back into
//! `i64`; calendar truncations (week from Monday, month, quarter, year) and `extract` go through
//! chrono's proleptic Gregorian calendar. Format strings are chrono `strftime` patterns parsed
//! per row with errors reported, never the panicking `Display` path. No Arrow kernel truncates
//! to calendar units in UTC with these names, so these are row loops without allocation
//! (except the formatted text itself).

use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType};
use arrow_array::{Array, TimestampNanosecondArray};
use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};

use super::{build_prim, build_strings, finish, shape, Strs};
use crate::types::Function;
use crate::vm::compile::{Node, Prepared};
use crate::vm::eval::{Col, Out};

const NS_PER_US: i64 = 1_000;
const NS_PER_MS: i64 = 1_000_000;
const NS_PER_S: i64 = 1_000_000_000;
const NS_PER_DAY: i64 = 86_400 * NS_PER_S;

/// A timestamp argument read per row.
struct Times<'a> {
    array: Option<&'a TimestampNanosecondArray>,
    scalar: bool,
}

impl<'a> Times<'a> {
    fn new(c: &'a Col) -> Times<'a> {
        Times {
            array: c.array().as_primitive_opt::<TimestampNanosecondType>(),
            scalar: c.is_scalar(),
        }
    }

    fn get(&self, i: usize) -> Option<i64> {
        let a = self.array?;
        let j = if self.scalar { 0 } else { i };
        if j >= a.len() || a.is_null(j) {
            None
        } else {
            Some(a.value(j))
        }
    }
}

pub(crate) fn to_datetime(ns: i64) -> DateTime<Utc> {
    Utc.timestamp_nanos(ns)
}

fn from_naive(t: NaiveDateTime) -> Result<Option<i64>, String> {
    t.and_utc()
        .timestamp_nanos_opt()
        .map(Some)
        .ok_or_else(|| "datetime out of range".to_string())
}

fn floor_to(ns: i64, unit: i64) -> Result<Option<i64>, String> {
    let floored = i128::from(ns).div_euclid(i128::from(unit)) * i128::from(unit);
    i64::try_from(floored)
        .map(Some)
        .map_err(|_| "datetime out of range".to_string())
}

fn trunc(unit: &str, ns: i64) -> Result<Option<i64>, String> {
    let fixed = match unit {
        "microsecond" => Some(NS_PER_US),
        "millisecond" => Some(NS_PER_MS),
        "second" => Some(NS_PER_S),
        "minute" => Some(60 * NS_PER_S),
        "hour" => Some(3600 * NS_PER_S),
        "day" => Some(NS_PER_DAY),
        _ => None,
    };
    if let Some(u) = fixed {
        return floor_to(ns, u);
    }
    let d = to_datetime(ns).date_naive();
    let date = match unit {
        "week" => d
            .checked_sub_days(chrono::Days::new(u64::from(
                d.weekday().num_days_from_monday(),
            )))
            .ok_or_else(|| "datetime out of range".to_string())?,
        "month" => d.with_day(1).unwrap_or(d),
        "quarter" => NaiveDate::from_ymd_opt(d.year(), (d.month0() / 3) * 3 + 1, 1).unwrap_or(d),
        "year" => NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap_or(d),
        other => return Err(format!("unknown date_trunc unit '{other}'")),
    };
    from_naive(date.and_time(chrono::NaiveTime::MIN))
}

fn extract(field: &str, ns: i64) -> Result<Option<i64>, String> {
    // Only calendar fields need the civil date and time; the epoch and sub-second fields are
    // arithmetic on the nanoseconds.
    let t = || to_datetime(ns);
    let sub = ns.rem_euclid(NS_PER_S);
    Ok(Some(match field {
        "year" => i64::from(t().year()),
        "quarter" => i64::from(t().month0() / 3 + 1),
        "month" => i64::from(t().month()),
        "week" => i64::from(t().iso_week().week()),
        "day" => i64::from(t().day()),
        "dow" => i64::from(t().weekday().num_days_from_sunday()),
        "doy" => i64::from(t().ordinal()),
        "hour" => i64::from(t().hour()),
        "minute" => i64::from(t().minute()),
        "second" => i64::from(t().second()),
        "millisecond" => sub / NS_PER_MS,
        "microsecond" => sub / NS_PER_US,
        "nanosecond" => sub,
        "epoch" => ns.div_euclid(NS_PER_S),
        other => return Err(format!("unknown extract field '{other}'")),
    }))
}

/// The chrono items of a format string, or why it is invalid.
fn items(format: &str) -> Result<Vec<Item<'_>>, String> {
    let items: Vec<Item<'_>> = StrftimeItems::new(format).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        return Err(format!("invalid datetime format '{format}'"));
    }
    Ok(items)
}

/// `parse_datetime`: a zoned datetime, else a naive one taken as UTC, else a date at midnight.
fn parse(s: &str, format: &str) -> Result<Option<i64>, String> {
    items(format)?;
    if let Ok(t) = DateTime::parse_from_str(s, format) {
        return Ok(t.timestamp_nanos_opt());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
        return Ok(t.and_utc().timestamp_nanos_opt());
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, format) {
        return Ok(d
            .and_time(chrono::NaiveTime::MIN)
            .and_utc()
            .timestamp_nanos_opt());
    }
    Ok(None)
}

pub(crate) fn call(
    node: &Node,
    function: Function,
    cols: &[Col],
    prepared: &Prepared,
    n: usize,
) -> Out {
    use Function as F;
    let word = match prepared {
        Prepared::Word(w) => w.as_str(),
        _ => "",
    };
    match function {
        F::DateTrunc | F::Extract | F::DateBin => {
            let Some(tc) = cols.get(1) else {
                return Out::fail(node, "missing argument");
            };
            let origin_col = cols.get(2);
            let mut refs = vec![tc];
            refs.extend(origin_col);
            let (rows, scalar) = shape(&refs, n);
            let t = Times::new(tc);
            let origin = origin_col.map(Times::new);
            let stride = match prepared {
                Prepared::Stride(s) => *s,
                _ => 1,
            };
            let (array, errs) = if function == F::Extract {
                build_prim::<Int64Type>(rows, &node.arrow, |i| match t.get(i) {
                    None => Ok(None),
                    Some(ns) => extract(word, ns),
                })
            } else {
                build_prim::<TimestampNanosecondType>(rows, &node.arrow, |i| {
                    let Some(ns) = t.get(i) else { return Ok(None) };
                    if function == F::DateTrunc {
                        return trunc(word, ns);
                    }
                    let base = match &origin {
                        None => 0,
                        Some(o) => match o.get(i) {
                            None => return Ok(None),
                            Some(o) => o,
                        },
                    };
                    let delta = i128::from(ns) - i128::from(base);
                    let binned = i128::from(base)
                        + delta.div_euclid(i128::from(stride)) * i128::from(stride);
                    i64::try_from(binned)
                        .map(Some)
                        .map_err(|_| "date_bin result out of range".to_string())
                })
            };
            finish(array, scalar, errs)
        }
        F::ParseDatetime => {
            let (Some(sc), Some(fc)) = (cols.first(), cols.get(1)) else {
                return Out::fail(node, "missing argument");
            };
            let (rows, scalar) = shape(&[sc, fc], n);
            let (s, f) = (Strs::new(sc), Strs::new(fc));
            let (array, errs) =
                build_prim::<TimestampNanosecondType>(rows, &node.arrow, |i| {
                    match (s.get(i), f.get(i)) {
                        (Some(s), Some(f)) => parse(s, f),
                        _ => Ok(None),
                    }
                });
            finish(array, scalar, errs)
        }
        F::FormatDatetime => {
            let (Some(tc), Some(fc)) = (cols.first(), cols.get(1)) else {
                return Out::fail(node, "missing argument");
            };
            let (rows, scalar) = shape(&[tc, fc], n);
            let (t, f) = (Times::new(tc), Strs::new(fc));
            let (array, errs) = build_strings(rows, |i, buf| {
                let (Some(ns), Some(format)) = (t.get(i), f.get(i)) else {
                    return Ok(false);
                };
                let items = items(format)?;
                write!(
                    buf,
                    "{}",
                    to_datetime(ns).format_with_items(items.into_iter())
                )
                .map_err(|_| format!("cannot format datetime with '{format}'"))?;
                Ok(true)
            });
            finish(array, scalar, errs)
        }
        _ => Out::fail(
            node,
            format!("{} is not a datetime function", function.name()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_floors_before_epoch() {
        assert_eq!(trunc("second", -1), Ok(Some(-NS_PER_S)));
        assert_eq!(trunc("day", NS_PER_DAY + 5), Ok(Some(NS_PER_DAY)));
        // 1970-01-01 was a Thursday; its week starts Monday 1969-12-29.
        assert_eq!(trunc("week", 0), Ok(Some(-3 * NS_PER_DAY)));
    }

    #[test]
    fn extreme_instants_do_not_panic() {
        for ns in [i64::MIN, i64::MAX, 0, -1] {
            for unit in crate::types::functions::DATE_TRUNC_UNITS {
                let _ = trunc(unit, ns);
            }
            for field in crate::types::functions::EXTRACT_FIELDS {
                let _ = extract(field, ns);
            }
        }
    }

    #[test]
    fn bad_formats_are_errors() {
        assert!(items("%Q").is_err());
        assert_eq!(
            parse("2026-01-02", "%Y-%m-%d"),
            Ok(Some(1_767_312_000 * NS_PER_S))
        );
        assert_eq!(parse("nope", "%Y-%m-%d"), Ok(None));
    }
}
