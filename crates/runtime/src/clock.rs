//! The node's wall clock, the one place time is read for data: write
//! timestamps, TTL expiry, `now()` and `currentTimestamp()`, trace start
//! times.
//!
//! Write timestamps (µs since the Unix epoch) come from
//! [`next_write_timestamp_us`], strictly increasing on each shard, so two
//! writes of one shard never tie, whatever the clock's resolution.
//!
//! A test controls time by freezing this thread's clock
//! ([`set_frozen_us`]); everything that reads the clock through here then
//! sees that instant, and write timestamps still increase by 1 µs a call.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static FROZEN_US: Cell<Option<i64>> = const { Cell::new(None) };
    static LAST_WRITE_TIMESTAMP_US: Cell<i64> = const { Cell::new(0) };
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    FROZEN_US.with(Cell::get).unwrap_or_else(|| {
        // A clock before 1970 reads as the epoch: no write may get a
        // negative timestamp from the server.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    })
}

pub fn now_ms() -> i64 {
    now_us() / 1_000
}

pub fn now_s() -> i64 {
    now_us() / 1_000_000
}

/// A server-side write timestamp: the clock in µs, strictly increasing on
/// this shard.
pub fn next_write_timestamp_us() -> i64 {
    LAST_WRITE_TIMESTAMP_US.with(|last| {
        let timestamp_us = now_us().max(last.get() + 1);
        debug_assert!(timestamp_us > last.get());
        last.set(timestamp_us);
        timestamp_us
    })
}

/// Stops this thread's clock at `at_us` (`None`: the system clock again).
/// For tests.
pub fn set_frozen_us(at_us: Option<i64>) {
    FROZEN_US.with(|frozen| frozen.set(at_us));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_timestamps_increase_on_a_frozen_clock() {
        set_frozen_us(Some(1_000));
        assert_eq!(now_us(), 1_000);
        let first = next_write_timestamp_us();
        let second = next_write_timestamp_us();
        assert!(first >= 1_000 && second == first + 1);
        set_frozen_us(None);
        assert!(now_us() > 1_000);
    }
}
