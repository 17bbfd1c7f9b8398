//! `USING TIMEOUT`: a statement's own timeout, in place of the node's
//! `read_request_timeout_in_ms`, `range_request_timeout_in_ms`,
//! `write_request_timeout_in_ms` or `truncate_request_timeout_in_ms`
//! (a ScyllaDB extension). Its value is a `duration` of whole
//! milliseconds, refused otherwise with ScyllaDB's texts. Without one, a
//! statement runs under its role's service level timeout, if any
//! (`auth::service_levels::timeout_of`).

use std::time::Duration;

use shoal_schema::{CqlType, Value};

use crate::ast::{Statement, Term};
use crate::error::{invalid, CqlResult};
use crate::values::{eval, Bindings, BoundValue, Receiver};

/// The bind marker's name, as ScyllaDB's receiver calls it.
pub(crate) const RECEIVER: &str = "[timeout]";

/// The statement's `USING TIMEOUT`, evaluated; `None` when it has none.
pub(crate) fn of(term: Option<&Term>, bindings: Bindings<'_>) -> CqlResult<Option<Duration>> {
    let Some(term) = term else { return Ok(None) };
    let value = match eval(term, Receiver { name: RECEIVER, ty: &CqlType::Duration }, bindings)? {
        BoundValue::Value(value) => value,
        BoundValue::Null => return Err(invalid("Timeout value cannot be null")),
        BoundValue::Unset => return Err(invalid("Timeout value cannot be unset")),
    };
    let Ok(Value::Duration { months, days, nanos }) = Value::deserialize(&CqlType::Duration, &value) else {
        return Err(invalid("Invalid timeout value"));
    };
    checked(months, days, nanos).map(Some)
}

/// The timeout of a write statement (INSERT, UPDATE, DELETE, BATCH).
pub(crate) fn of_write(statement: &Statement, bindings: Bindings<'_>) -> CqlResult<Option<Duration>> {
    let using = match statement {
        Statement::Insert(s) => &s.using,
        Statement::InsertJson(s) => &s.using,
        Statement::Update(s) => &s.using,
        Statement::Delete(s) => &s.using,
        Statement::Batch(b) => &b.using,
        _ => return Ok(None),
    };
    of(using.timeout.as_ref(), bindings)
}

fn checked(months: i32, days: i32, nanos: i64) -> CqlResult<Duration> {
    if months != 0 || days != 0 {
        return Err(invalid("Timeout values cannot be expressed in days/months"));
    }
    if nanos % 1_000_000 != 0 {
        return Err(invalid("Timeout values cannot have granularity finer than milliseconds"));
    }
    let nanos = u64::try_from(nanos).map_err(|_| invalid("Timeout values must be non-negative"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CqlError;

    fn refusal(months: i32, days: i32, nanos: i64) -> String {
        match checked(months, days, nanos) {
            Err(CqlError::Invalid(message)) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn only_whole_nonnegative_milliseconds_are_timeouts() {
        assert_eq!(checked(0, 0, 1_500_000_000).ok(), Some(Duration::from_millis(1500)));
        assert_eq!(checked(0, 0, 0).ok(), Some(Duration::ZERO));
        assert_eq!(refusal(3, 0, 0), "Timeout values cannot be expressed in days/months");
        assert_eq!(refusal(0, 1, 0), "Timeout values cannot be expressed in days/months");
        assert_eq!(refusal(0, 0, 60_000_000_005), "Timeout values cannot have granularity finer than milliseconds");
        assert_eq!(refusal(0, 0, -10_000_000), "Timeout values must be non-negative");
    }
}
