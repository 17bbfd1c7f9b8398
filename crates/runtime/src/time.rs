//! Timers on the shard's executor.

pub use compio::runtime::time::{interval, sleep, timeout, Elapsed};
