//! `timestamp ± duration` and `date ± duration` (`WHERE t > ? - 5m`,
//! `SELECT d + 1d`), as Cassandra's `OperationFcts` compute them: the
//! duration's months move the calendar month in UTC (the day clamped to
//! the new month's last, as `java.util.Calendar` does), then its days,
//! then its nanoseconds. A timestamp takes only whole milliseconds, a date
//! only whole days; anything finer fails with Cassandra's text.

use crate::arithmetic::NumericOp;
use crate::literal::{civil_from_days, days_from_civil, days_in_month, format_duration};
use crate::value::{Value, ValueError};

const MS_PER_DAY: i64 = 86_400_000;
const NANOS_PER_MS: i64 = 1_000_000;
/// Protocol dates count days with 2^31 as the Unix epoch.
const DATE_EPOCH: i64 = 1 << 31;

/// Whether `left op duration` is a temporal operation Cassandra defines.
pub fn supported(op: NumericOp, left: &crate::CqlType) -> bool {
    matches!(op, NumericOp::Add | NumericOp::Sub) && matches!(left, crate::CqlType::Timestamp | crate::CqlType::Date)
}

/// `base op duration`, `base` a timestamp or a date; call only where
/// [`supported`].
pub fn shift(op: NumericOp, base: &Value, duration: &Value) -> Result<Value, ValueError> {
    let Value::Duration { months, days, nanos } = *duration else {
        return Err(ValueError::Operation(format!("a {} is no duration", duration.cql_type())));
    };
    let sign = if op == NumericOp::Sub { -1 } else { 1 };
    let failed = |kind: &str, why: String| {
        ValueError::Operation(format!("the operation '{kind} {} duration' failed: {why}", op.symbol()))
    };
    let shown = || format_duration(months, days, nanos);
    match *base {
        Value::Timestamp(ms) => {
            if nanos % NANOS_PER_MS != 0 {
                return Err(failed(
                    "timestamp",
                    format!("The duration must have a millisecond precision. Was: {}", shown()),
                ));
            }
            let shifted = add(ms, sign * i64::from(months), sign * i64::from(days), sign * (nanos / NANOS_PER_MS))
                .ok_or_else(|| failed("timestamp", "the result is out of range".to_string()))?;
            Ok(Value::Timestamp(shifted))
        }
        Value::Date(date) => {
            if nanos != 0 {
                return Err(failed("date", format!("The duration must have a day precision. Was: {}", shown())));
            }
            let ms = (i64::from(date) - DATE_EPOCH) * MS_PER_DAY;
            let out_of_range = || failed("date", "the result is out of range".to_string());
            let shifted = add(ms, sign * i64::from(months), sign * i64::from(days), 0).ok_or_else(out_of_range)?;
            let date = u32::try_from(shifted.div_euclid(MS_PER_DAY) + DATE_EPOCH).map_err(|_| out_of_range())?;
            Ok(Value::Date(date))
        }
        _ => Err(ValueError::Operation(format!("a {} cannot take a duration", base.cql_type()))),
    }
}

/// `ms` plus calendar `months`, then `days`, then `plus_ms`; `None` past
/// the range of a timestamp.
fn add(ms: i64, months: i64, days: i64, plus_ms: i64) -> Option<i64> {
    let (day, time_ms) = (ms.div_euclid(MS_PER_DAY), ms.rem_euclid(MS_PER_DAY));
    let (year, month, day_of_month) = civil_from_days(day);
    let month_index = (year.checked_mul(12)?).checked_add(month - 1)?.checked_add(months)?;
    let (year, month) = (month_index.div_euclid(12), month_index.rem_euclid(12) + 1);
    let day_of_month = day_of_month.min(days_in_month(year, month));
    let day = days_from_civil(year, month, day_of_month).checked_add(days)?;
    day.checked_mul(MS_PER_DAY)?.checked_add(time_ms)?.checked_add(plus_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timestamp(text: &str) -> i64 {
        match crate::literal::parse_literal(&crate::CqlType::Timestamp, crate::literal::LiteralKind::String, text) {
            Ok(Value::Timestamp(ms)) => ms,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn duration(months: i32, days: i32, nanos: i64) -> Value {
        Value::Duration { months, days, nanos }
    }

    #[test]
    fn months_move_the_calendar_and_clamp_the_day() {
        let jan31 = Value::Timestamp(timestamp("2016-01-31 10:00:00+0000"));
        let feb29 = Value::Timestamp(timestamp("2016-02-29 10:00:00+0000"));
        assert_eq!(shift(NumericOp::Add, &jan31, &duration(1, 0, 0)).expect("shifts"), feb29);
        let minus5m = shift(NumericOp::Sub, &feb29, &duration(0, 0, 300_000_000_000)).expect("shifts");
        assert_eq!(minus5m, Value::Timestamp(timestamp("2016-02-29 09:55:00+0000")));
        let before_epoch = Value::Timestamp(timestamp("1969-12-31 23:00:00+0000"));
        let next_year = shift(NumericOp::Add, &before_epoch, &duration(12, 1, 0)).expect("shifts");
        assert_eq!(next_year, Value::Timestamp(timestamp("1971-01-01 23:00:00+0000")));
    }

    #[test]
    fn dates_move_by_days_and_refuse_finer_durations() {
        let date = Value::Date(DATE_EPOCH as u32 + 10);
        assert_eq!(
            shift(NumericOp::Sub, &date, &duration(0, 5, 0)).expect("shifts"),
            Value::Date(DATE_EPOCH as u32 + 5)
        );
        let error = shift(NumericOp::Sub, &date, &duration(0, 0, 600_000_000_000)).expect_err("minutes").to_string();
        assert!(
            error.contains("the operation 'date - duration' failed: The duration must have a day precision. Was: 10m"),
            "{error}"
        );
        let stamp = Value::Timestamp(0);
        let error = shift(NumericOp::Sub, &stamp, &duration(0, 0, 10_000)).expect_err("micros").to_string();
        assert!(error.contains("The duration must have a millisecond precision. Was: 10us"), "{error}");
    }
}
