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
/// how many, and how many came. One need but at EACH_QUORUM, held inline:
/// a request's tally allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tally<'a> {
    needs: Needs<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Needs<'a> {
    One([Need<'a>; 1]),
    Each(Vec<Need<'a>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Need<'a> {
    dc: Option<&'a str>,
    n: usize,
    got: usize,
}

impl Need<'_> {
    /// Whether an answer from a replica in `dc` meets this need.
    fn counts(&self, dc: &str) -> bool {
        self.dc.is_none_or(|want| want == dc)
    }
}

impl<'a> Tally<'a> {
    /// What `level` needs of replicas in `data_centers` (one item per
    /// replica: its data center), given the coordinator's.
    pub(crate) fn new(
        level: ConsistencyLevel,
        data_centers: impl Iterator<Item = &'a str> + Clone,
        local_dc: &'a str,
    ) -> Tally<'a> {
        let total = data_centers.clone().count();
        // Only the LOCAL_ levels count their data center's replicas.
        let local = || data_centers.clone().filter(|dc| *dc == local_dc).count();
        let quorum = |n: usize| n / 2 + 1;
        let one = |dc, n| Needs::One([Need { dc, n, got: 0 }]);
        let needs = match level {
            ConsistencyLevel::Any | ConsistencyLevel::One => one(None, 1),
            ConsistencyLevel::Two => one(None, 2),
            ConsistencyLevel::Three => one(None, 3),
            ConsistencyLevel::Quorum | ConsistencyLevel::Serial => one(None, quorum(total)),
            ConsistencyLevel::All => one(None, total),
            ConsistencyLevel::LocalOne => one(Some(local_dc), 1),
            ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial => one(Some(local_dc), quorum(local())),
            ConsistencyLevel::EachQuorum => {
                let mut dcs: Vec<&str> = data_centers.clone().collect();
                dcs.sort_unstable();
                dcs.dedup();
                let in_dc = |dc: &str| data_centers.clone().filter(|d| *d == dc).count();
                Needs::Each(dcs.into_iter().map(|dc| Need { dc: Some(dc), n: quorum(in_dc(dc)), got: 0 }).collect())
            }
        };
        Tally { needs }
    }

    fn needs(&self) -> &[Need<'a>] {
        match &self.needs {
            Needs::One(one) => one,
            Needs::Each(each) => each,
        }
    }

    fn needs_mut(&mut self) -> &mut [Need<'a>] {
        match &mut self.needs {
            Needs::One(one) => one,
            Needs::Each(each) => each,
        }
    }

    /// Needs one more answer for a pending replica in `dc` (a node that
    /// gains the range by a join or a leave in progress), where its answer
    /// would count.
    pub(crate) fn add_pending(&mut self, dc: &str) {
        if let Some(need) = self.needs_mut().iter_mut().find(|need| need.counts(dc)) {
            need.n += 1;
        }
    }

    /// Answers needed in all.
    pub(crate) fn block_for(&self) -> usize {
        self.needs().iter().map(|need| need.n).sum()
    }

    /// Answers counted so far (at most what is needed).
    pub(crate) fn received(&self) -> usize {
        self.needs().iter().map(|need| need.got).sum()
    }

    /// Whether an answer from a replica in `dc` would count.
    pub(crate) fn wants(&self, dc: &str) -> bool {
        self.needs().iter().any(|need| need.got < need.n && need.counts(dc))
    }

    /// Counts an answer from a replica in `dc`.
    pub(crate) fn count(&mut self, dc: &str) {
        if let Some(need) = self.needs_mut().iter_mut().find(|need| need.got < need.n && need.counts(dc)) {
            need.got += 1;
        }
    }

    pub(crate) fn is_met(&self) -> bool {
        self.needs().iter().all(|need| need.got >= need.n)
    }

    /// The first need that `live` replicas (one item per replica: its data
    /// center) cannot meet: `(required, alive)`, what Unavailable reports.
    pub(crate) fn unmet_by<'l>(&self, live: impl Iterator<Item = &'l str> + Clone) -> Option<(usize, usize)> {
        self.needs().iter().find_map(|need| {
            let alive = live.clone().filter(|dc| need.counts(dc)).count();
            (alive < need.n).then_some((need.n, alive))
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
        let tally = |level| Tally::new(level, replicas.into_iter(), "dc1");
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

        assert_eq!(tally(ConsistencyLevel::Three).unmet_by(["dc1", "dc2"].into_iter()), Some((3, 2)));
        assert_eq!(tally(ConsistencyLevel::LocalOne).unmet_by(["dc2"].into_iter()), Some((1, 0)));
        assert_eq!(tally(ConsistencyLevel::Quorum).unmet_by(["dc1", "dc2", "dc2"].into_iter()), None);
    }
}
