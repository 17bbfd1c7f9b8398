//! Consistency levels: how many replicas must answer a request.
//!
//! A level asks for a number of answers from a partition's replicas: of
//! all of them (ONE, TWO, THREE, QUORUM, ALL; ANY as ONE, where a write's
//! kept hint counts as an answer), of those in the coordinator's data
//! center (LOCAL_ONE, LOCAL_QUORUM), or a quorum in each data center (EACH_QUORUM, writes
//! only). A [`Tally`] counts answers against that; with too few live
//! replicas the request fails at once (Unavailable). SERIAL and
//! LOCAL_SERIAL are the serial consistencies of conditional writes; as a
//! plain read's level they count as QUORUM and LOCAL_QUORUM.

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

/// The consistency levels of item operations: reads (`get`, `mg`) and the
/// reads of read-modify-writes at `read` (`memcache_read_consistency`),
/// writes answered once `write` replicas applied them
/// (`memcache_write_consistency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemLevels {
    pub read: ConsistencyLevel,
    pub write: ConsistencyLevel,
}

impl Default for ItemLevels {
    fn default() -> ItemLevels {
        ItemLevels { read: ConsistencyLevel::One, write: ConsistencyLevel::One }
    }
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

    /// The level named `name`, as [`ConsistencyLevel::name`] spells it.
    pub fn from_name(name: &str) -> Option<ConsistencyLevel> {
        ConsistencyLevel::ALL.into_iter().find(|level| level.name() == name)
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

/// Answers a request at one level needs: per data center (`None`: any),
/// how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    needs: Vec<(Option<String>, usize)>,
    got: Vec<usize>,
}

impl Tally {
    /// What `level` needs of `replicas`, given each one's data center
    /// (`data_centers[i]` is `replicas[i]`'s) and the coordinator's.
    pub(crate) fn new(level: ConsistencyLevel, data_centers: &[&str], local_dc: &str) -> Tally {
        let total = data_centers.len();
        let local = data_centers.iter().filter(|dc| **dc == local_dc).count();
        let quorum = |n: usize| n / 2 + 1;
        let any = |n: usize| vec![(None, n)];
        let in_local = |n: usize| vec![(Some(local_dc.to_string()), n)];
        let needs = match level {
            ConsistencyLevel::Any | ConsistencyLevel::One => any(1),
            ConsistencyLevel::Two => any(2),
            ConsistencyLevel::Three => any(3),
            ConsistencyLevel::Quorum | ConsistencyLevel::Serial => any(quorum(total)),
            ConsistencyLevel::All => any(total),
            ConsistencyLevel::LocalOne => in_local(1),
            ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial => in_local(quorum(local)),
            ConsistencyLevel::EachQuorum => {
                let mut dcs: Vec<&str> = data_centers.to_vec();
                dcs.sort_unstable();
                dcs.dedup();
                dcs.into_iter()
                    .map(|dc| (Some(dc.to_string()), quorum(data_centers.iter().filter(|d| **d == dc).count())))
                    .collect()
            }
        };
        let got = vec![0; needs.len()];
        Tally { needs, got }
    }

    /// Needs one more answer for a pending replica in `dc` (a node that
    /// gains the range by a join or a leave in progress), where its answer
    /// would count.
    pub(crate) fn add_pending(&mut self, dc: &str) {
        if let Some((_, n)) = self.needs.iter_mut().find(|(need_dc, _)| need_dc.as_deref().is_none_or(|d| d == dc)) {
            *n += 1;
        }
    }

    /// Answers needed in all.
    pub(crate) fn block_for(&self) -> usize {
        self.needs.iter().map(|(_, n)| n).sum()
    }

    /// Answers counted so far (at most what is needed).
    pub(crate) fn received(&self) -> usize {
        self.got.iter().sum()
    }

    /// Whether an answer from a replica in `dc` would count.
    pub(crate) fn wants(&self, dc: &str) -> bool {
        self.needs
            .iter()
            .zip(&self.got)
            .any(|((need_dc, n), got)| got < n && need_dc.as_deref().is_none_or(|d| d == dc))
    }

    /// Counts an answer from a replica in `dc`.
    pub(crate) fn count(&mut self, dc: &str) {
        for ((need_dc, n), got) in self.needs.iter().zip(self.got.iter_mut()) {
            if *got < *n && need_dc.as_deref().is_none_or(|d| d == dc) {
                *got += 1;
                return;
            }
        }
    }

    pub(crate) fn is_met(&self) -> bool {
        self.needs.iter().zip(&self.got).all(|((_, n), got)| got >= n)
    }

    /// The first need that `live` replicas (by data center) cannot meet:
    /// `(required, alive)`, what Unavailable reports.
    pub(crate) fn unmet_by(&self, live: &[&str]) -> Option<(usize, usize)> {
        self.needs.iter().find_map(|(dc, n)| {
            let alive = live.iter().filter(|d| dc.as_deref().is_none_or(|want| want == **d)).count();
            (alive < *n).then_some((*n, alive))
        })
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

    #[test]
    fn tallies_count_by_level_and_data_center() {
        let replicas = ["dc1", "dc1", "dc2", "dc2", "dc2"];
        let tally = |level| Tally::new(level, &replicas, "dc1");
        assert_eq!(tally(ConsistencyLevel::Quorum).block_for(), 3);
        assert_eq!(tally(ConsistencyLevel::All).block_for(), 5);
        assert_eq!(tally(ConsistencyLevel::LocalQuorum).block_for(), 2);
        assert_eq!(tally(ConsistencyLevel::EachQuorum).block_for(), 4);

        let mut local = tally(ConsistencyLevel::LocalQuorum);
        assert!(!local.wants("dc2"));
        local.count("dc2");
        assert_eq!(local.received(), 0, "a remote data center's answer does not count");
        local.count("dc1");
        local.count("dc1");
        assert!(local.is_met());

        let mut each = tally(ConsistencyLevel::EachQuorum);
        ["dc2", "dc2", "dc2", "dc1"].into_iter().for_each(|dc| each.count(dc));
        assert!(!each.is_met() && each.received() == 3);
        each.count("dc1");
        assert!(each.is_met());

        assert_eq!(tally(ConsistencyLevel::Three).unmet_by(&["dc1", "dc2"]), Some((3, 2)));
        assert_eq!(tally(ConsistencyLevel::LocalOne).unmet_by(&["dc2"]), Some((1, 0)));
        assert_eq!(tally(ConsistencyLevel::Quorum).unmet_by(&["dc1", "dc2", "dc2"]), None);
    }
}
