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
//!
//! Statement groups (the default `statement` group and one per service
//! level, at most [`SERVICE_LEVEL_GROUPS_MAX`]) are balanced among
//! themselves only: a connection about to start a request asks
//! [`CpuFair::lag_behind`] for its group, which then looks at the other
//! statement groups alone (requests never wait for background work), with
//! [`STATEMENT_SLACK_VNS`]. A request group's demand is invisible between
//! its requests (the next one waits in the socket while others run), so a
//! statement group counts as *contending* while it has requests in
//! progress and until the shard has run [`RECENT_CPU_NS`] of CPU without
//! it: the shard's CPU, not the wall clock, so this needs no clock reads
//! and an idle shard forgets nothing it should not.

use std::fmt;

/// Shares are relative to this: a group with 1000 shares advances its
/// virtual runtime at the speed of real time.
pub const SHARE_SCALE: u64 = 1_000;
/// How far ahead (in virtual ns) a group may run before it yields:
/// Seastar's task quota, 0.5 ms.
pub const SLACK_VNS: u64 = 500_000;
/// How far ahead (in virtual ns) a statement group may run before its
/// connections wait to start requests: 10 ms of virtual time, 2 ms of CPU
/// at 200 shares. Larger than a task quota because a wait ends only a
/// slice after the groups behind stop using the core: a burst per wait
/// keeps a level beside a lightly loaded one from idling the core much,
/// and a request in progress is never stopped anyway.
pub const STATEMENT_SLACK_VNS: u64 = 10_000_000;
/// The slice a statement group's wait is slept in: a wait ends after a
/// slice in which the groups behind used no CPU, so this bounds how long
/// the core may idle for a level beside one whose clients want little.
pub const STATEMENT_WAIT_SLICE_NS: u64 = 250_000;
/// The longest a statement group's connections wait at once: longer than
/// a background group's, since the lead of a level (the slack and a
/// request's virtual cost) is larger. A wait cut short here forgives
/// nothing: the level runs one request per wait until the others catch
/// up, so its requests are delayed, never starved.
pub const STATEMENT_MAX_WAIT_NS: u64 = 50_000_000;
/// A statement group that has not run while the shard ran this much CPU
/// has stopped competing (its clients are idle or elsewhere). Several
/// requests' worth, and more than the OS may take the thread away in one
/// poll on a busy machine (that time is charged to the poll too). Cheap
/// to overstate: a wait for a level that stopped ends after one slice.
pub const RECENT_CPU_NS: u64 = 100_000_000;
/// The longest a group gives the core back at once.
pub const MAX_WAIT_NS: u64 = 20_000_000;
/// Shares are kept within these (a controller's output included).
pub const MIN_SHARES: u32 = 1;
pub const MAX_SHARES: u32 = 10_000;
/// Service levels a shard gives groups of their own, at most: ScyllaDB's
/// cap on user service levels (its scheduling groups left for them).
/// Keeps the groups, and every loop over them, bounded.
pub const SERVICE_LEVEL_GROUPS_MAX: usize = 6;
const FIXED_GROUPS: usize = Group::ALL.len();
pub(crate) const GROUPS: usize = FIXED_GROUPS + SERVICE_LEVEL_GROUPS_MAX;

/// A service level's slot among a shard's statement groups; only the
/// scheduler hands them out ([`CpuFair::set_service_levels`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot(u8);

/// The groups of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// Client requests (CQL and memcached) of no service level:
    /// ScyllaDB's `default` level.
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
    /// The CQL requests of the roles whose effective service level holds
    /// this slot, with the level's shares.
    ServiceLevel(Slot),
}

impl Group {
    /// The fixed groups (service levels' come and go with the schema).
    pub const ALL: [Group; 6] =
        [Group::Statements, Group::Commitlog, Group::Flush, Group::Compaction, Group::Streaming, Group::Maintenance];

    /// The name in metrics (ScyllaDB's group names); a service level's
    /// group shows as `sl:NAME` (its label comes from the scheduler,
    /// which knows the level's name).
    pub fn name(self) -> &'static str {
        match self {
            Group::Statements => "statement",
            Group::Commitlog => "commitlog",
            Group::Flush => "memtable",
            Group::Compaction => "compaction",
            Group::Streaming => "streaming",
            Group::Maintenance => "main",
            Group::ServiceLevel(_) => "sl",
        }
    }

    /// The shares a group starts with (ScyllaDB's defaults; flush's and
    /// compaction's then follow their controllers, a service level's are
    /// its own).
    pub fn default_shares(self) -> u32 {
        match self {
            Group::Streaming | Group::Maintenance => 200,
            _ => 1000,
        }
    }

    /// Whether it runs client requests: the groups balanced among
    /// themselves when connections start requests.
    pub fn is_statement(self) -> bool {
        matches!(self, Group::Statements | Group::ServiceLevel(_))
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Group::Statements => 0,
            Group::Commitlog => 1,
            Group::Flush => 2,
            Group::Compaction => 3,
            Group::Streaming => 4,
            Group::Maintenance => 5,
            Group::ServiceLevel(Slot(slot)) => FIXED_GROUPS + usize::from(slot),
        }
    }

    fn of_index(index: usize) -> Group {
        match Group::ALL.get(index) {
            Some(&group) => group,
            // Below GROUPS (the slots' range), so it fits a u8.
            None => Group::ServiceLevel(Slot((index - FIXED_GROUPS) as u8)),
        }
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A wait under way ([`CpuFair::wait_started`]): the group giving the
/// core back and where its virtual runtime stood then.
#[derive(Debug)]
#[must_use]
pub struct Wait {
    group: Group,
    vruntime: u64,
}

/// How a wait ended ([`CpuFair::waited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnd {
    /// It lasted as long as it was to, or the groups behind did not use
    /// the core offered: whatever they left is not kept as credit.
    Served,
    /// The groups behind came within the slack (a statement group's wait
    /// lasts until then, as the level's other connections may run on), or
    /// a statement group's wait reached its cap: nothing is forgiven.
    CaughtUp,
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
    /// The shard's CPU clock (all groups' CPU) when it last ran.
    pub last_ran_ns: u64,
}

impl GroupStats {
    fn new(shares: u32) -> GroupStats {
        GroupStats { shares, vruntime: 0, active: 0, runtime_ns: 0, tasks: 0, waiting: 0, wait_ns: 0, last_ran_ns: 0 }
    }
}

/// The groups of one shard.
pub struct CpuFair {
    groups: [GroupStats; GROUPS],
    /// The service level each slot runs, by name; `None`: free.
    levels: [Option<Box<str>>; SERVICE_LEVEL_GROUPS_MAX],
    /// CPU charged to every group so far: the clock by which a statement
    /// group's last run is recent ([`RECENT_CPU_NS`]).
    cpu_clock_ns: u64,
    /// Whether any slot runs a level.
    has_levels: bool,
}

impl Default for CpuFair {
    fn default() -> Self {
        CpuFair {
            groups: std::array::from_fn(|i| GroupStats::new(Group::of_index(i).default_shares())),
            levels: Default::default(),
            cpu_clock_ns: 0,
            has_levels: false,
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

    /// Gives each service level of `levels` (name, shares) a group: a
    /// level that had one keeps it (its figures go on) with its shares
    /// now; a new one takes the first free slot with its figures from
    /// zero; a slot whose level is gone is freed. Past
    /// [`SERVICE_LEVEL_GROUPS_MAX`] levels the rest get none (their roles'
    /// requests run in `Statements`). Work of a freed slot still under
    /// way finishes there, counted to whoever takes the slot next.
    pub fn set_service_levels<'a>(&mut self, levels: impl IntoIterator<Item = (&'a str, u32)> + Clone) {
        for slot in &mut self.levels {
            if slot.as_deref().is_some_and(|name| !levels.clone().into_iter().any(|(n, _)| n == name)) {
                *slot = None;
            }
        }
        for (name, shares) in levels {
            let group = match self.service_level(name) {
                Some(group) => group,
                None => {
                    let Some(free) = self.levels.iter().position(Option::is_none) else { continue };
                    self.levels[free] = Some(name.into());
                    let group = Group::of_index(FIXED_GROUPS + free);
                    let stats = &mut self.groups[group.index()];
                    // A new level's figures start from zero; the live
                    // counts (tasks alive, waits under way) stay true.
                    *stats = GroupStats { active: stats.active, waiting: stats.waiting, ..GroupStats::new(shares) };
                    group
                }
            };
            self.set_shares(group, shares);
        }
        self.has_levels = self.levels.iter().any(Option::is_some);
    }

    /// The group of service level `name`, if it has one.
    pub fn service_level(&self, name: &str) -> Option<Group> {
        let slot = self.levels.iter().position(|level| level.as_deref() == Some(name))?;
        Some(Group::of_index(FIXED_GROUPS + slot))
    }

    /// The name `group` shows under in metrics; `None` for a free slot.
    pub fn label(&self, group: Group) -> Option<String> {
        match group {
            Group::ServiceLevel(Slot(slot)) => Some(format!("sl:{}", self.levels[usize::from(slot)].as_deref()?)),
            fixed => Some(fixed.name().to_string()),
        }
    }

    /// Every group that shows in metrics: the fixed ones, then the
    /// service levels' in slot order.
    pub fn groups(&self) -> impl Iterator<Item = Group> + '_ {
        (0..GROUPS).map(Group::of_index).filter(|&g| self.label_exists(g))
    }

    fn label_exists(&self, group: Group) -> bool {
        match group {
            Group::ServiceLevel(Slot(slot)) => self.levels[usize::from(slot)].is_some(),
            _ => true,
        }
    }

    /// Work of `group` starts; a group becoming active starts at the least
    /// virtual runtime among the active ones (no banked credit).
    pub fn activate(&mut self, group: Group) {
        if !self.contending(group.index()) {
            if let Some(floor) = self.min_contending_vruntime() {
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
        self.cpu_clock_ns = self.cpu_clock_ns.saturating_add(elapsed_ns);
        let state = &mut self.groups[group.index()];
        state.runtime_ns += elapsed_ns;
        state.tasks += 1;
        state.vruntime += elapsed_ns.saturating_mul(SHARE_SCALE) / u64::from(state.shares);
        state.last_ran_ns = self.cpu_clock_ns;
    }

    /// How long `group` should give the core back: the CPU time the
    /// groups behind it need to catch up (each at its shares), when one is
    /// more than the slack behind; `None` when it may go on. A background
    /// group looks at every active group, a statement group at the other
    /// contending statement groups.
    pub fn lag_behind(&self, group: Group) -> Option<u64> {
        let own = self.groups[group.index()].vruntime;
        let slack = if group.is_statement() { STATEMENT_SLACK_VNS } else { SLACK_VNS };
        let behind = self.peers(group).map(|i| &self.groups[i]).filter(|g| g.vruntime + slack < own);
        let mut wait_ns = 0u64;
        let mut any = false;
        for other in behind {
            any = true;
            wait_ns += (own - other.vruntime).saturating_mul(u64::from(other.shares)) / SHARE_SCALE;
        }
        let max = if group.is_statement() { STATEMENT_MAX_WAIT_NS } else { MAX_WAIT_NS };
        any.then(|| wait_ns.clamp(1, max))
    }

    /// A task of `group` starts giving the core back.
    pub fn wait_started(&mut self, group: Group) -> Wait {
        let state = &mut self.groups[group.index()];
        state.waiting += 1;
        Wait { group, vruntime: state.vruntime }
    }

    /// A task gave the core back for `waited_ns`. Unless the groups behind
    /// caught up, they had their turn and are raised to where its group
    /// stood when the wait began. Not to where the group stands now: its
    /// other tasks may have run on meanwhile, and the wait was not sized
    /// for that.
    pub fn waited(&mut self, wait: Wait, waited_ns: u64, end: WaitEnd) {
        let own = &mut self.groups[wait.group.index()];
        own.waiting = own.waiting.saturating_sub(1);
        own.wait_ns += waited_ns;
        if end == WaitEnd::Served {
            self.raise_peers(wait.group, wait.vruntime);
        }
    }

    /// The groups behind `group` (those it gives way to) were offered the
    /// core and did not take it: they are raised to its virtual runtime
    /// (no credit kept).
    pub fn offer_unused(&mut self, group: Group) {
        self.raise_peers(group, self.groups[group.index()].vruntime);
    }

    fn raise_peers(&mut self, group: Group, floor: u64) {
        let mut behind = [false; GROUPS];
        for i in self.peers(group) {
            behind[i] = true;
        }
        for (state, behind) in self.groups.iter_mut().zip(behind) {
            if behind {
                state.vruntime = state.vruntime.max(floor);
            }
        }
    }

    /// CPU time used so far by the groups `group` gives way to (all
    /// others, or the other statement groups), ns: a wait that sees it
    /// unchanged over a slice ends, as the core went unused.
    pub fn others_runtime_ns(&self, group: Group) -> u64 {
        let others = (0..GROUPS).filter(|&i| i != group.index() && Self::gives_way_to(group, i));
        others.map(|i| self.groups[i].runtime_ns).fold(0, u64::saturating_add)
    }

    /// Whether `group`'s waits are for group `other` (by index): a
    /// statement group's for statement groups only.
    fn gives_way_to(group: Group, other: usize) -> bool {
        !group.is_statement() || Group::of_index(other).is_statement()
    }

    /// The groups `group` compares itself with: for a background group
    /// the active ones, for a statement group the contending statement
    /// groups.
    fn peers(&self, group: Group) -> impl Iterator<Item = usize> + '_ {
        let own = group.index();
        (0..GROUPS).filter(move |&i| {
            i != own
                && Self::gives_way_to(group, i)
                && if group.is_statement() { self.contending(i) } else { self.groups[i].active > 0 }
        })
    }

    /// Active, or, while service levels have groups, a statement group
    /// that ran recently. With no level there is one statement group and
    /// nothing to balance it against: the rules are then those from
    /// before levels had groups, to the letter.
    fn contending(&self, index: usize) -> bool {
        let g = &self.groups[index];
        g.active > 0
            || (self.has_levels
                && Group::of_index(index).is_statement()
                && g.tasks > 0
                && self.cpu_clock_ns - g.last_ran_ns <= RECENT_CPU_NS)
    }

    fn min_contending_vruntime(&self) -> Option<u64> {
        (0..GROUPS).filter(|&i| self.contending(i)).map(|i| self.groups[i].vruntime).min()
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
        waits: Vec<Option<Wait>>,
        used: [u64; GROUPS],
    }

    impl Sim {
        fn new(groups: &[(Group, u32)]) -> Sim {
            let mut fair = CpuFair::default();
            for &(group, shares) in groups {
                fair.set_shares(group, shares);
                fair.activate(group);
            }
            let tasks: Vec<(Group, u64)> = groups.iter().map(|&(g, _)| (g, 0)).collect();
            let waits = tasks.iter().map(|_| None).collect();
            Sim { fair, now_ns: 0, tasks, waits, used: [0; GROUPS] }
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
                    let wait = self.waits[i].take().expect("a wait under way");
                    self.fair.waited(wait, 0, WaitEnd::Served);
                }
                self.fair.charge(group, slice_ns);
                self.used[group.index()] += slice_ns;
                self.now_ns += slice_ns;
                if let Some(wait) = self.fair.lag_behind(group) {
                    self.waits[i] = Some(self.fair.wait_started(group));
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
                let started = fair.wait_started(Group::Compaction);
                now += wait;
                fair.waited(started, wait, WaitEnd::Served);
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
        let (mut compaction_ready_at, mut waiting) = (0, None);
        while now < 1_000_000_000 {
            if compaction_ready_at <= now {
                if let Some(wait) = waiting.take() {
                    fair.waited(wait, 0, WaitEnd::Served);
                }
                fair.charge(Group::Compaction, 100_000);
                compaction += 100_000;
                now += 100_000;
                if let Some(wait) = fair.lag_behind(Group::Compaction) {
                    waiting = Some(fair.wait_started(Group::Compaction));
                    compaction_ready_at = now + wait;
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

    #[test]
    fn group_indices_round_trip() {
        for i in 0..GROUPS {
            assert_eq!(Group::of_index(i).index(), i);
        }
        for (i, group) in Group::ALL.iter().enumerate() {
            assert_eq!(group.index(), i);
        }
    }

    fn levels(fair: &mut CpuFair, levels: &[(&str, u32)]) {
        fair.set_service_levels(levels.iter().copied());
    }

    #[test]
    fn service_levels_keep_their_groups_and_free_them_when_dropped() {
        let mut fair = CpuFair::default();
        levels(&mut fair, &[("a", 1000), ("b", 200)]);
        let (a, b) = (fair.service_level("a").expect("a"), fair.service_level("b").expect("b"));
        assert_ne!(a, b);
        assert!(a.is_statement() && b.is_statement());
        assert_eq!(fair.stats(b).shares, 200);
        assert_eq!(fair.label(b).as_deref(), Some("sl:b"));
        fair.charge(a, 1_000);
        // b dropped, c created, a altered: a keeps its group and figures,
        // c takes b's slot from zero.
        levels(&mut fair, &[("a", 500), ("c", 300)]);
        assert_eq!(fair.service_level("a"), Some(a));
        assert_eq!(fair.stats(a).runtime_ns, 1_000);
        assert_eq!(fair.stats(a).shares, 500);
        assert_eq!(fair.service_level("b"), None);
        assert_eq!(fair.service_level("c"), Some(b));
        assert_eq!(fair.label(b).as_deref(), Some("sl:c"));
        let labels: Vec<String> = fair.groups().filter_map(|g| fair.label(g)).collect();
        assert_eq!(labels[Group::ALL.len()..], ["sl:a".to_string(), "sl:c".to_string()]);
        // Past the cap the rest get no group; none defined frees them all.
        let many: Vec<(String, u32)> = (0..8).map(|i| (format!("l{i}"), 100)).collect();
        fair.set_service_levels(many.iter().map(|(n, s)| (n.as_str(), *s)));
        assert_eq!(fair.groups().count(), Group::ALL.len() + SERVICE_LEVEL_GROUPS_MAX);
        assert_eq!(fair.service_level("l7"), None);
        levels(&mut fair, &[]);
        assert_eq!(fair.groups().count(), Group::ALL.len());
    }

    #[test]
    fn statements_never_wait_for_background_groups() {
        let mut fair = CpuFair::default();
        fair.activate(Group::Statements);
        fair.activate(Group::Compaction);
        fair.charge(Group::Statements, 100_000_000);
        assert_eq!(fair.lag_behind(Group::Statements), None);
        // ... but compaction still yields to them.
        fair.charge(Group::Compaction, 200_000_000);
        assert!(fair.lag_behind(Group::Compaction).is_some());
    }

    /// A fake shard serving connections of statement groups: each runs
    /// requests of `request_ns` (then, for a light client, thinks for
    /// `think_ns`), and before each request asks whether its group is
    /// ahead; if so it waits in [`SLICE_NS`] slices, as `sched::give_way`
    /// does, until its group's lead is within the slack, a slice passes
    /// in which the other statement groups used no CPU, or `MAX_WAIT_NS`.
    /// Connections are served in turn (the executor's FIFO run queue).
    struct Shard {
        fair: CpuFair,
        now_ns: u64,
        connections: Vec<Connection>,
        used: [u64; GROUPS],
    }

    struct Connection {
        group: Group,
        request_ns: u64,
        think_ns: u64,
        state: State,
    }

    enum State {
        Ready,
        Thinking { until_ns: u64 },
        Waiting { wait: Wait, started_ns: u64, deadline_ns: u64, slice_end_ns: u64, others_ns: u64 },
    }

    const SLICE_NS: u64 = STATEMENT_WAIT_SLICE_NS;

    impl Shard {
        fn new(levels: &[(&str, u32)]) -> Shard {
            let mut fair = CpuFair::default();
            fair.set_service_levels(levels.iter().copied());
            Shard { fair, now_ns: 0, connections: Vec::new(), used: [0; GROUPS] }
        }

        fn connect(&mut self, level: &str, request_ns: u64, think_ns: u64) {
            let group = self.fair.service_level(level).unwrap_or(Group::Statements);
            self.connections.push(Connection { group, request_ns, think_ns, state: State::Ready });
        }

        /// Moves every connection's wait or think on to `now_ns`.
        fn advance_states(&mut self) {
            for c in &mut self.connections {
                match std::mem::replace(&mut c.state, State::Ready) {
                    State::Thinking { until_ns } if until_ns > self.now_ns => c.state = State::Thinking { until_ns },
                    State::Waiting { wait, started_ns, deadline_ns, slice_end_ns, others_ns } => {
                        let now_others = self.fair.others_runtime_ns(c.group);
                        let waited_ns = self.now_ns - started_ns;
                        if slice_end_ns > self.now_ns {
                            c.state = State::Waiting { wait, started_ns, deadline_ns, slice_end_ns, others_ns };
                        } else if now_others == others_ns {
                            self.fair.waited(wait, waited_ns, WaitEnd::Served);
                        } else if deadline_ns <= self.now_ns || self.fair.lag_behind(c.group).is_none() {
                            self.fair.waited(wait, waited_ns, WaitEnd::CaughtUp);
                        } else {
                            let slice_end_ns = (self.now_ns + SLICE_NS).min(deadline_ns);
                            c.state =
                                State::Waiting { wait, started_ns, deadline_ns, slice_end_ns, others_ns: now_others };
                        }
                    }
                    _ => {}
                }
            }
        }

        fn next_event_ns(&self) -> u64 {
            let events = self.connections.iter().filter_map(|c| match c.state {
                State::Ready => None,
                State::Thinking { until_ns } => Some(until_ns),
                State::Waiting { slice_end_ns, .. } => Some(slice_end_ns),
            });
            events.min().expect("someone waits")
        }

        fn run(&mut self, until_ns: u64) {
            let mut next = 0;
            while self.now_ns < until_ns {
                self.advance_states();
                let n = self.connections.len();
                let ready = (0..n).map(|k| (next + k) % n).find(|&i| matches!(self.connections[i].state, State::Ready));
                let Some(i) = ready else {
                    self.now_ns = self.next_event_ns();
                    continue;
                };
                next = i + 1;
                let (group, request_ns, think_ns) =
                    (self.connections[i].group, self.connections[i].request_ns, self.connections[i].think_ns);
                if let Some(wait_ns) = self.fair.lag_behind(group) {
                    assert!(wait_ns <= STATEMENT_MAX_WAIT_NS);
                    let wait = self.fair.wait_started(group);
                    let others_ns = self.fair.others_runtime_ns(group);
                    let deadline_ns = self.now_ns + STATEMENT_MAX_WAIT_NS;
                    let slice_end_ns = (self.now_ns + SLICE_NS).min(deadline_ns);
                    self.connections[i].state =
                        State::Waiting { wait, started_ns: self.now_ns, deadline_ns, slice_end_ns, others_ns };
                    continue;
                }
                // A request that runs to its end in one poll: the group is
                // active only while it runs.
                self.fair.activate(group);
                self.fair.charge(group, request_ns);
                self.fair.deactivate(group);
                self.used[group.index()] += request_ns;
                self.now_ns += request_ns;
                if think_ns > 0 {
                    self.connections[i].state = State::Thinking { until_ns: self.now_ns + think_ns };
                }
            }
        }

        fn used(&self, level: &str) -> u64 {
            self.used[self.fair.service_level(level).unwrap_or(Group::Statements).index()]
        }
    }

    #[test]
    fn saturated_service_levels_share_the_core_by_shares() {
        for request_ns in [700_000, 20_000, 100_000] {
            let mut shard = Shard::new(&[("high", 1000), ("low", 200)]);
            for _ in 0..4 {
                shard.connect("high", request_ns, 0);
                shard.connect("low", request_ns, 0);
            }
            shard.run(4_000_000_000);
            let ratio = shard.used("high") as f64 / shard.used("low") as f64;
            assert!((4.5..=5.5).contains(&ratio), "1000:200 shares gave {ratio}:1 with {request_ns} ns requests");
            // The core never idled.
            assert!(shard.used("high") + shard.used("low") >= 3_990_000_000);
        }
    }

    #[test]
    fn the_default_level_competes_with_its_1000_shares() {
        let mut shard = Shard::new(&[("low", 250)]);
        shard.connect("default", 50_000, 0);
        shard.connect("low", 50_000, 0);
        shard.run(2_000_000_000);
        let ratio = shard.used("default") as f64 / shard.used("low") as f64;
        assert!((3.6..=4.4).contains(&ratio), "1000:250 gave {ratio}:1");
    }

    #[test]
    fn equal_levels_split_evenly() {
        let mut shard = Shard::new(&[("a", 500), ("b", 500)]);
        shard.connect("a", 30_000, 0);
        shard.connect("b", 70_000, 0);
        shard.run(2_000_000_000);
        let ratio = shard.used("a") as f64 / shard.used("b") as f64;
        assert!((0.9..=1.1).contains(&ratio), "{ratio}");
    }

    #[test]
    fn a_level_alone_or_beside_a_light_one_keeps_the_core_busy() {
        // Alone: never waits.
        let mut shard = Shard::new(&[("high", 1000), ("low", 100)]);
        shard.connect("low", 100_000, 0);
        shard.run(1_000_000_000);
        assert_eq!(shard.used("low"), 1_000_000_000);
        // Beside a client of the high level that wants a tenth of the core:
        // that client gets all it asks for, and the low level most of the
        // rest, not its 1/11.
        let mut shard = Shard::new(&[("high", 1000), ("low", 100)]);
        shard.connect("high", 100_000, 900_000);
        shard.connect("low", 100_000, 0);
        shard.run(2_000_000_000);
        let (high, low) = (shard.used("high") as f64 / 2e9, shard.used("low") as f64 / 2e9);
        assert!(high >= 0.09, "the light level had {high} of the core");
        assert!(low >= 0.6, "the busy level had {low} of the core beside a light one");
    }

    #[test]
    fn a_level_idle_for_a_while_banks_no_credit() {
        let mut fair = CpuFair::default();
        levels(&mut fair, &[("a", 1000), ("b", 500)]);
        let (a, b) = (fair.service_level("a").expect("a"), fair.service_level("b").expect("b"));
        // a runs one request, then b alone runs for a second.
        fair.activate(a);
        fair.charge(a, 100_000);
        fair.deactivate(a);
        for _ in 0..2_000 {
            fair.activate(b);
            fair.charge(b, 500_000);
            fair.deactivate(b);
        }
        assert_eq!(fair.lag_behind(b), None, "a stopped competing");
        // a comes back level with b, not a second behind it.
        fair.activate(a);
        assert_eq!(fair.stats(a).vruntime, fair.stats(b).vruntime);
        // While a runs requests now and then, it keeps its place between
        // them: b, ahead of it, gives way.
        fair.charge(a, 100_000);
        fair.deactivate(a);
        fair.charge(b, (STATEMENT_SLACK_VNS + 200_000) / 2);
        assert!(fair.lag_behind(b).is_some());
    }
}
