//! Service levels, as ScyllaDB keeps them (`system.service_levels_v2` and
//! the `service_level` attribute of a role): named sets of workload
//! options — a timeout, a workload type, CPU shares — attached to roles.
//!
//! They ride with the roles in the [`Schema`](crate::Schema) snapshot, so
//! they are agreed through group 0 and persisted in the schema file as the
//! roles are. Plain data and ScyllaDB's merge rule: a role's *effective*
//! service level merges the levels attached to it and to every role
//! granted to it, taking the smallest timeout, the smallest shares and a
//! specified workload type over an unspecified one (`batch` over
//! `interactive`), and remembers which level each value came from.

/// Shares a service level has when created without them (ScyllaDB's).
pub const SHARES_DEFAULT: i32 = 1000;

/// ScyllaDB's workload types; `None` in [`ServiceLevel::workload`] is its
/// `unspecified`. The order is ScyllaDB's: between two specified types
/// the smaller wins a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    Batch,
    Interactive,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Batch => "batch",
            Workload::Interactive => "interactive",
        }
    }
}

/// One service level's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceLevel {
    /// The timeout of its roles' requests, in whole milliseconds.
    pub timeout_ms: Option<u64>,
    pub workload: Option<Workload>,
    pub shares: i32,
}

impl Default for ServiceLevel {
    fn default() -> Self {
        ServiceLevel { timeout_ms: None, workload: None, shares: SHARES_DEFAULT }
    }
}

/// One option of an effective service level and the level it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub service_level: String,
}

impl<T> Sourced<T> {
    fn new(value: T, service_level: &str) -> Self {
        Sourced { value, service_level: service_level.to_string() }
    }
}

/// What a role's requests run under: the merge of every service level
/// attached to the role or to a role granted to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveServiceLevel {
    pub timeout_ms: Sourced<Option<u64>>,
    pub workload: Sourced<Option<Workload>>,
    pub shares: Sourced<i32>,
}

impl EffectiveServiceLevel {
    /// The options of `level` alone, each named after it.
    pub fn of(name: &str, level: &ServiceLevel) -> Self {
        EffectiveServiceLevel {
            timeout_ms: Sourced::new(level.timeout_ms, name),
            workload: Sourced::new(level.workload, name),
            shares: Sourced::new(level.shares, name),
        }
    }

    /// ScyllaDB's `service_level_options::merge_with`: a value that is
    /// set wins over one that is not; of two, the smaller timeout, the
    /// smaller shares, and `batch` over `interactive`. On a tie the value
    /// already held (and its source) stays.
    pub fn merge(&mut self, other: &EffectiveServiceLevel) {
        let timeout = match (self.timeout_ms.value, other.timeout_ms.value) {
            (None, Some(_)) => true,
            (Some(mine), Some(theirs)) => theirs < mine,
            _ => false,
        };
        if timeout {
            self.timeout_ms = other.timeout_ms.clone();
        }
        let workload = match (self.workload.value, other.workload.value) {
            (None, Some(_)) => true,
            (Some(mine), Some(theirs)) => theirs < mine,
            _ => false,
        };
        if workload {
            self.workload = other.workload.clone();
        }
        if other.shares.value < self.shares.value {
            self.shares = other.shares.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_takes_the_smaller_value_and_remembers_its_level() {
        let fast = ServiceLevel { timeout_ms: Some(10_000), workload: None, shares: 500 };
        let batch = ServiceLevel { timeout_ms: None, workload: Some(Workload::Batch), shares: 200 };
        let mut merged = EffectiveServiceLevel::of("fast", &fast);
        merged.merge(&EffectiveServiceLevel::of("batch", &batch));
        assert_eq!(merged.timeout_ms, Sourced { value: Some(10_000), service_level: "fast".into() });
        assert_eq!(merged.workload, Sourced { value: Some(Workload::Batch), service_level: "batch".into() });
        assert_eq!(merged.shares, Sourced { value: 200, service_level: "batch".into() });
        let interactive = ServiceLevel { timeout_ms: Some(5_000), workload: Some(Workload::Interactive), shares: 200 };
        merged.merge(&EffectiveServiceLevel::of("interactive", &interactive));
        assert_eq!(merged.timeout_ms.service_level, "interactive");
        assert_eq!(merged.workload.value, Some(Workload::Batch), "batch wins over interactive");
        assert_eq!(merged.shares.service_level, "batch", "a tie keeps the value held");
    }
}
