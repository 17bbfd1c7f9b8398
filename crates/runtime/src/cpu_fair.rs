//! The bookkeeping of the shard's CPU scheduling groups (Seastar's
//! scheduling groups, DESIGN.md §6), with time passed in so tests run it
//! on a fake clock; `sched.rs` feeds it real time on each shard.
//!
//! Each group has shares and a virtual runtime: running `elapsed` ns adds
//! `elapsed * SHARE_SCALE / shares`. A group is *active* while it has work
//! under way (tasks of the group alive, or, for statements, requests in
//! progress). A background group at one of its yield points asks
//! [`CpuFair::lag_behind`]: if another active group's virtual runtime is
//! more than [`SLACK_VNS`] behind its own, it has had more than its share
//! of recent time, and it gives the core back for as long as the others
//! need to catch up. Three rules keep this fair and bounded:
//! - **No banked credit.** A group that becomes active starts at the least
//!   virtual runtime among the active groups, as in CFS and Seastar: having
//!   been idle does not buy a burst later.
//! - **A wait pays the debt.** After a group has given the core back for
//!   the time it was asked to ([`CpuFair::waited`]), every active group
//!   behind it is raised to its virtual runtime: a group that had the
//!   core offered and did not use it (its requests were waiting on the disk
//!   or the network) does not keep that as credit. So nothing starves: a
//!   background group alone beside idle-but-pending statements still gets
//!   its share of the core.
//! - **Bounded waits.** A single wait is at most [`MAX_WAIT_NS`].

use std::fmt;

/// Shares are relative to this: a group with 1000 shares advances its
/// virtual runtime at the speed of real time.
pub const SHARE_SCALE: u64 = 1_000;
/// How far ahead (in virtual ns) a group may run before it yields:
/// Seastar's task quota, 0.5 ms.
pub const SLACK_VNS: u64 = 500_000;
/// The longest a group gives the core back at once.
pub const MAX_WAIT_NS: u64 = 20_000_000;
/// Shares are kept within these (a controller's output included).
pub const MIN_SHARES: u32 = 1;
pub const MAX_SHARES: u32 = 10_000;

/// The groups of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// Client requests (CQL and memcached).
    Statements,
    /// Commitlog background work (segment syncs).
    Commitlog,
    /// Writing memtables out as SSTables.
    Flush,
    /// Compaction of SSTables (regular, major, cleanup).
    Compaction,
    /// Moving data between nodes: bootstrap, decommission, repair, and
    /// building materialized views from existing data.
    Streaming,
    /// Everything else in the background (cache warming, replays).
    Maintenance,
}

impl Group {
    pub const ALL: [Group; 6] =
        [Group::Statements, Group::Commitlog, Group::Flush, Group::Compaction, Group::Streaming, Group::Maintenance];

    /// The name in metrics (ScyllaDB's group names).
    pub fn name(self) -> &'static str {
        match self {
            Group::Statements => "statement",
            Group::Commitlog => "commitlog",
            Group::Flush => "memtable",
            Group::Compaction => "compaction",
            Group::Streaming => "streaming",
            Group::Maintenance => "main",
        }
    }

    /// The shares a group starts with (ScyllaDB's defaults; flush's and
    /// compaction's then follow their controllers).
    pub fn default_shares(self) -> u32 {
        match self {
            Group::Streaming | Group::Maintenance => 200,
            _ => 1000,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One group's state and figures.
#[derive(Debug, Clone, Copy)]
pub struct GroupStats {
    pub shares: u32,
    /// Virtual runtime: ns of CPU scaled by `SHARE_SCALE / shares`.
    pub vruntime: u64,
    /// Work under way (tasks or requests).
    pub active: u32,
    /// CPU time used, ns.
    pub runtime_ns: u64,
    /// Polls of the group's tasks (Seastar's tasks processed).
    pub tasks: u64,
    /// Tasks giving the core back now.
    pub waiting: u32,
    /// Time tasks spent giving the core back, ns.
    pub wait_ns: u64,
}

/// The groups of one shard.
pub struct CpuFair {
    groups: [GroupStats; 6],
}

impl Default for CpuFair {
    fn default() -> Self {
        CpuFair {
            groups: Group::ALL.map(|group| GroupStats {
                shares: group.default_shares(),
                vruntime: 0,
                active: 0,
                runtime_ns: 0,
                tasks: 0,
                waiting: 0,
                wait_ns: 0,
            }),
        }
    }
}

impl CpuFair {
    pub fn stats(&self, group: Group) -> GroupStats {
        self.groups[group.index()]
    }

    /// Sets a group's shares, kept within `MIN_SHARES..=MAX_SHARES`.
    pub fn set_shares(&mut self, group: Group, shares: u32) {
        self.groups[group.index()].shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    }

    /// Work of `group` starts; a group becoming active starts at the least
    /// virtual runtime among the active ones (no banked credit).
    pub fn activate(&mut self, group: Group) {
        if self.groups[group.index()].active == 0 {
            if let Some(floor) = self.min_active_vruntime() {
                let state = &mut self.groups[group.index()];
                state.vruntime = state.vruntime.max(floor);
            }
        }
        self.groups[group.index()].active += 1;
    }

    /// Work of `group` ends.
    pub fn deactivate(&mut self, group: Group) {
        let state = &mut self.groups[group.index()];
        state.active = state.active.saturating_sub(1);
    }

    /// `group` ran for `elapsed_ns` of CPU in one task poll.
    pub fn charge(&mut self, group: Group, elapsed_ns: u64) {
        let state = &mut self.groups[group.index()];
        state.runtime_ns += elapsed_ns;
        state.tasks += 1;
        state.vruntime += elapsed_ns.saturating_mul(SHARE_SCALE) / u64::from(state.shares);
    }

    /// How long `group` should give the core back: the CPU time the active
    /// groups behind it need to catch up (each at its shares), when one is
    /// more than `SLACK_VNS` behind; `None` when it may go on.
    pub fn lag_behind(&self, group: Group) -> Option<u64> {
        let own = self.groups[group.index()].vruntime;
        let behind = self.others_active(group).filter(|g| g.vruntime + SLACK_VNS < own);
        let mut wait_ns = 0u64;
        let mut any = false;
        for other in behind {
            any = true;
            wait_ns += (own - other.vruntime).saturating_mul(u64::from(other.shares)) / SHARE_SCALE;
        }
        any.then(|| wait_ns.clamp(1, MAX_WAIT_NS))
    }

    /// A task of `group` starts giving the core back.
    pub fn wait_started(&mut self, group: Group) {
        self.groups[group.index()].waiting += 1;
    }

    /// A task of `group` gave the core back for `waited_ns`: the groups
    /// still behind it had their turn and are raised to its virtual runtime.
    pub fn waited(&mut self, group: Group, waited_ns: u64) {
        let own = &mut self.groups[group.index()];
        own.waiting = own.waiting.saturating_sub(1);
        own.wait_ns += waited_ns;
        self.offer_unused(group);
    }

    /// The groups behind `group` were offered the core and did not take
    /// it: they are raised to its virtual runtime (no credit kept).
    pub fn offer_unused(&mut self, group: Group) {
        let floor = self.groups[group.index()].vruntime;
        for (i, other) in self.groups.iter_mut().enumerate() {
            if i != group.index() && other.active > 0 {
                other.vruntime = other.vruntime.max(floor);
            }
        }
    }

    /// CPU time used so far by the groups other than `group`, ns (a wait
    /// that sees it unchanged over a slice ends: the core was idle).
    pub fn others_runtime_ns(&self, group: Group) -> u64 {
        let others = self.groups.iter().enumerate().filter(|(i, _)| *i != group.index());
        others.map(|(_, g)| g.runtime_ns).fold(0, u64::saturating_add)
    }

    fn others_active(&self, group: Group) -> impl Iterator<Item = &GroupStats> {
        self.groups.iter().enumerate().filter(move |(i, g)| *i != group.index() && g.active > 0).map(|(_, g)| g)
    }

    fn min_active_vruntime(&self) -> Option<u64> {
        self.groups.iter().filter(|g| g.active > 0).map(|g| g.vruntime).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake shard: tasks of some groups, always runnable unless giving
    /// the core back, run in turn (as the executor's FIFO run queue does)
    /// for `slice_ns` each, then ask whether to give the core back.
    struct Sim {
        fair: CpuFair,
        now_ns: u64,
        /// Per task: its group and when its wait ends (0: runnable).
        tasks: Vec<(Group, u64)>,
        used: [u64; 6],
    }

    impl Sim {
        fn new(groups: &[(Group, u32)]) -> Sim {
            let mut fair = CpuFair::default();
            for &(group, shares) in groups {
                fair.set_shares(group, shares);
                fair.activate(group);
            }
            Sim { fair, now_ns: 0, tasks: groups.iter().map(|&(g, _)| (g, 0)).collect(), used: [0; 6] }
        }

        fn run(&mut self, slice_ns: u64, until_ns: u64) {
            let mut next = 0;
            while self.now_ns < until_ns {
                let n = self.tasks.len();
                let runnable = (0..n).map(|k| (next + k) % n).find(|&i| self.tasks[i].1 <= self.now_ns);
                let Some(i) = runnable else {
                    // Everyone waits: the core idles until the first wait ends.
                    self.now_ns = self.tasks.iter().map(|t| t.1).min().unwrap_or(until_ns);
                    continue;
                };
                next = i + 1;
                let group = self.tasks[i].0;
                if self.tasks[i].1 > 0 {
                    // The wait that just ended.
                    self.tasks[i].1 = 0;
                    self.fair.waited(group, 0);
                }
                self.fair.charge(group, slice_ns);
                self.used[group.index()] += slice_ns;
                self.now_ns += slice_ns;
                if let Some(wait) = self.fair.lag_behind(group) {
                    self.fair.wait_started(group);
                    self.tasks[i].1 = self.now_ns + wait;
                }
            }
        }
    }

    #[test]
    fn saturated_groups_share_the_core_by_shares() {
        let mut sim = Sim::new(&[(Group::Compaction, 1000), (Group::Streaming, 200)]);
        sim.run(50_000, 2_000_000_000);
        let ratio = sim.used[Group::Compaction.index()] as f64 / sim.used[Group::Streaming.index()] as f64;
        assert!((4.5..=5.5).contains(&ratio), "1000:200 shares gave {ratio}:1");
        // The core never idled: someone always could run.
        let total: u64 = sim.used.iter().sum();
        assert!(total >= 2_000_000_000, "{total}");
    }

    #[test]
    fn equal_shares_split_evenly_with_uneven_slices() {
        let mut sim = Sim::new(&[(Group::Compaction, 1000), (Group::Flush, 1000)]);
        sim.run(30_000, 1_000_000_000);
        let ratio = sim.used[Group::Compaction.index()] as f64 / sim.used[Group::Flush.index()] as f64;
        assert!((0.9..=1.1).contains(&ratio), "{ratio}");
    }

    #[test]
    fn an_idle_group_banks_no_credit() {
        let mut fair = CpuFair::default();
        fair.activate(Group::Compaction);
        // Compaction alone for a second: nothing to yield to.
        for _ in 0..1_000 {
            fair.charge(Group::Compaction, 1_000_000);
            assert_eq!(fair.lag_behind(Group::Compaction), None);
        }
        // Streaming, idle all that time, arrives: it starts level with
        // compaction, not a second behind it.
        fair.activate(Group::Streaming);
        assert_eq!(fair.stats(Group::Streaming).vruntime, fair.stats(Group::Compaction).vruntime);
        assert_eq!(fair.lag_behind(Group::Compaction), None);
        // So compaction yields after about one slack's worth, not a second.
        fair.charge(Group::Compaction, SLACK_VNS + 1);
        let wait = fair.lag_behind(Group::Compaction).expect("compaction is ahead");
        assert!(wait < 2 * SLACK_VNS, "{wait}");
    }

    #[test]
    fn a_pending_group_that_does_not_run_starves_nobody() {
        // Statements have requests under way but use no CPU (they wait on
        // the disk): compaction still gets about its half of the core.
        let mut fair = CpuFair::default();
        fair.activate(Group::Statements);
        fair.activate(Group::Compaction);
        let (mut now, mut ran) = (0u64, 0u64);
        while now < 1_000_000_000 {
            fair.charge(Group::Compaction, 100_000);
            now += 100_000;
            ran += 100_000;
            if let Some(wait) = fair.lag_behind(Group::Compaction) {
                assert!(wait <= MAX_WAIT_NS);
                fair.wait_started(Group::Compaction);
                now += wait;
                fair.waited(Group::Compaction, wait);
            }
        }
        let share = ran as f64 / now as f64;
        assert!((0.45..=0.6).contains(&share), "compaction had {share} of the core");
    }

    #[test]
    fn statements_running_hold_compaction_to_its_share() {
        // Statements saturate the core between compaction's steps; they
        // never yield (they are the foreground), compaction does.
        let mut fair = CpuFair::default();
        fair.set_shares(Group::Compaction, 250);
        fair.activate(Group::Statements);
        fair.activate(Group::Compaction);
        let (mut now, mut statements, mut compaction) = (0u64, 0u64, 0u64);
        let (mut compaction_ready_at, mut waiting) = (0, false);
        while now < 1_000_000_000 {
            if compaction_ready_at <= now {
                if waiting {
                    fair.waited(Group::Compaction, 0);
                    waiting = false;
                }
                fair.charge(Group::Compaction, 100_000);
                compaction += 100_000;
                now += 100_000;
                if let Some(wait) = fair.lag_behind(Group::Compaction) {
                    fair.wait_started(Group::Compaction);
                    compaction_ready_at = now + wait;
                    waiting = true;
                }
            }
            // One statement step between compaction steps (FIFO run queue).
            fair.charge(Group::Statements, 100_000);
            statements += 100_000;
            now += 100_000;
        }
        let ratio = statements as f64 / compaction as f64;
        assert!((3.6..=4.4).contains(&ratio), "1000:250 gave {ratio}:1");
    }

    #[test]
    fn shares_stay_within_bounds() {
        let mut fair = CpuFair::default();
        fair.set_shares(Group::Compaction, 0);
        assert_eq!(fair.stats(Group::Compaction).shares, MIN_SHARES);
        fair.set_shares(Group::Compaction, u32::MAX);
        assert_eq!(fair.stats(Group::Compaction).shares, MAX_SHARES);
    }
}
