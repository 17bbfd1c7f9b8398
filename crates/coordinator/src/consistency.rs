//! Consistency levels: how many replicas must answer a request.
//!
//! One node keeps one copy of each partition, so every level is served
//! alike today; the level still travels with every request so the cluster
//! (replication over a token ring) only has to start counting replicas.
//! The rules that do not depend on replica counts apply now: SERIAL and
//! LOCAL_SERIAL are only serial consistencies of conditional writes.

/// The levels of the CQL protocol (`[consistency]`, section 3 of the v4
/// spec), with its codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConsistencyLevel {
    Any,
    One,
    Two,
    Three,
    Quorum,
    All,
    LocalQuorum,
    EachQuorum,
    Serial,
    LocalSerial,
    /// The drivers' default.
    #[default]
    LocalOne,
}

impl ConsistencyLevel {
    const ALL: [ConsistencyLevel; 11] = [
        ConsistencyLevel::Any,
        ConsistencyLevel::One,
        ConsistencyLevel::Two,
        ConsistencyLevel::Three,
        ConsistencyLevel::Quorum,
        ConsistencyLevel::All,
        ConsistencyLevel::LocalQuorum,
        ConsistencyLevel::EachQuorum,
        ConsistencyLevel::Serial,
        ConsistencyLevel::LocalSerial,
        ConsistencyLevel::LocalOne,
    ];

    /// The level with protocol code `code`, if it names one.
    pub fn from_code(code: u16) -> Option<ConsistencyLevel> {
        ConsistencyLevel::ALL.into_iter().find(|level| level.code() == code)
    }

    pub fn code(self) -> u16 {
        match self {
            ConsistencyLevel::Any => 0x0000,
            ConsistencyLevel::One => 0x0001,
            ConsistencyLevel::Two => 0x0002,
            ConsistencyLevel::Three => 0x0003,
            ConsistencyLevel::Quorum => 0x0004,
            ConsistencyLevel::All => 0x0005,
            ConsistencyLevel::LocalQuorum => 0x0006,
            ConsistencyLevel::EachQuorum => 0x0007,
            ConsistencyLevel::Serial => 0x0008,
            ConsistencyLevel::LocalSerial => 0x0009,
            ConsistencyLevel::LocalOne => 0x000A,
        }
    }

    /// The name drivers and Cassandra's messages use (`LOCAL_QUORUM`).
    pub fn name(self) -> &'static str {
        match self {
            ConsistencyLevel::Any => "ANY",
            ConsistencyLevel::One => "ONE",
            ConsistencyLevel::Two => "TWO",
            ConsistencyLevel::Three => "THREE",
            ConsistencyLevel::Quorum => "QUORUM",
            ConsistencyLevel::All => "ALL",
            ConsistencyLevel::LocalQuorum => "LOCAL_QUORUM",
            ConsistencyLevel::EachQuorum => "EACH_QUORUM",
            ConsistencyLevel::Serial => "SERIAL",
            ConsistencyLevel::LocalSerial => "LOCAL_SERIAL",
            ConsistencyLevel::LocalOne => "LOCAL_ONE",
        }
    }

    /// SERIAL or LOCAL_SERIAL: the levels of a conditional write's Paxos
    /// phase (and of serial reads), never of a plain write.
    pub fn is_serial(self) -> bool {
        matches!(self, ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial)
    }
}

impl std::fmt::Display for ConsistencyLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        for level in ConsistencyLevel::ALL {
            assert_eq!(ConsistencyLevel::from_code(level.code()), Some(level));
        }
        assert_eq!(ConsistencyLevel::from_code(0x000B), None);
        assert_eq!(ConsistencyLevel::LocalQuorum.to_string(), "LOCAL_QUORUM");
        assert!(ConsistencyLevel::LocalSerial.is_serial() && !ConsistencyLevel::Quorum.is_serial());
    }
}
