//! Choosing a joining node's tokens so that what every node of its data
//! center *replicates* comes out even, not only the ranges it owns first
//! (Cassandra's `allocate_tokens_for_local_replication_factor`).
//!
//! Why replicated shares: at RF=3 a node stores every range whose first
//! three distinct hosts, walking clockwise, include it. Tokens that only
//! evened out first-owned ranges left, at four nodes, two of them
//! replicating 0.91 of the ring and one 0.50 (fair: 0.75).
//!
//! The model. A token t of host X makes X replicate a *span* ending at t:
//! the range (previous token, t], then each earlier range while fewer
//! than RF distinct other hosts hold the tokens from that range's end up
//! to t — stopping at another token of X, whose span that range is. A
//! host's spans are disjoint, so its replicated share is their sum.
//!
//! The search is greedy, as Cassandra's: the joiner's tokens are placed
//! one at a time, each at the midpoint of whichever range lowers most
//! - the squared distances of the hosts' shares from their targets (RF/N
//!   for the others; for the joiner RF/N scaled by the tokens it has
//!   placed, so that it grows at an even pace), plus
//! - half the squared distances of the changed spans from RF/N/tokens:
//!   even spans keep later joins able to even out every host.
//!
//! A token changes only the spans after it until RF+1 distinct hosts have
//! passed, so a candidate costs a few span walks, and each candidate is
//! kept until a placed token lands in the stretch of ring it read.
//!
//! While a data center has no more nodes than RF every node replicates
//! everything; its first RF nodes then split the ring into RF equal
//! interleaved slices (at RF=3 the pattern a b c a b c …), the shape from
//! which the next joiner can even every host out.
//!
//! Racks ([`balancing_group`]). When a data center has exactly RF racks,
//! NetworkTopologyStrategy puts one replica of every range on each rack:
//! a rack holds a whole copy, split among its nodes by the ranges each
//! owns first among the rack's tokens. A joiner then balances against its
//! rack's nodes at RF=1, as Cassandra's allocator does by rack. With
//! other rack counts the data center is balanced as one group of hosts,
//! which NetworkTopologyStrategy's spreading over racks can skew; and a
//! keyspace of SimpleStrategy, which ignores racks, sees the rack-wise
//! tokens' first-owned shares.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::replication::Placement;
use crate::ring::{range_width, TokenRing, RING_TOKENS};

/// Whom a joiner at `joiner` balances its tokens against, and at which
/// replication factor: the other nodes of its data center (of `others`:
/// the members and joins in flight) at `replication_factor`; or, where
/// that data center has exactly `replication_factor` racks counting the
/// joiner's (and more than one), the other nodes of its rack at 1.
pub fn balancing_group<'a>(
    joiner: &Placement,
    others: impl IntoIterator<Item = (Uuid, &'a Placement)>,
    replication_factor: usize,
) -> (BTreeSet<Uuid>, usize) {
    let local: Vec<(Uuid, &Placement)> =
        others.into_iter().filter(|(_, p)| p.data_center == joiner.data_center).collect();
    let racks: BTreeSet<&str> = local.iter().map(|(_, p)| p.rack.as_str()).chain([joiner.rack.as_str()]).collect();
    if replication_factor > 1 && racks.len() == replication_factor {
        let rack = local.iter().filter(|(_, p)| p.rack == joiner.rack).map(|(h, _)| *h).collect();
        return (rack, 1);
    }
    (local.iter().map(|(h, _)| *h).collect(), replication_factor)
}

/// How much evening out each token's span counts against evening out
/// each host's share. Measured over 6 host-id draws, 1 to 16 nodes joining
/// one by one, 256 tokens each, as the worst host's distance from its fair
/// share: hosts alone (0) strand some far off it (41% at RF=3, 18% at
/// RF=2); at 0.5, 0.17% at RF=3, 1.7% at RF=2, 0.4% at RF=1; at 1, 0.24%,
/// 2.2% and 0.5%. A join took 10 ms on average, 68 ms at most (release).
const TOKEN_WEIGHT: f64 = 0.5;

/// `count` tokens for `host` joining `ring`, balancing the replicated
/// shares of its data center's nodes (`local`: the other hosts of the
/// joiner's data center) at `replication_factor`. No chosen token is one
/// `ring` holds. In a data center with no node yet they are evenly
/// spaced, starting at an offset drawn from the host id (so two first
/// nodes differ).
pub fn allocate_tokens(
    ring: &TokenRing,
    local: &BTreeSet<Uuid>,
    host: Uuid,
    count: usize,
    replication_factor: usize,
) -> Vec<i64> {
    assert!(count > 0, "a node holds at least one token");
    assert!(replication_factor > 0, "a replication factor is at least 1");
    assert!(!local.contains(&host), "the joiner is not yet a member");
    let mut chosen = Vec::with_capacity(count);
    if local.is_empty() {
        let step = (u64::MAX / count as u64).max(1);
        let offset = host.as_u64_pair().1;
        for i in 0..count as u64 {
            let mut token = offset.wrapping_add(i.wrapping_mul(step)) as i64;
            while ring.holds(token) || chosen.contains(&token) {
                token = token.wrapping_add(1);
            }
            chosen.push(token);
        }
        return chosen;
    }
    // Hosts by index; the joiner is the last.
    let hosts: Vec<Uuid> = local.iter().copied().collect();
    let joiner = hosts.len() as u32;
    let index = |h: &Uuid| hosts.binary_search(h).expect("a local host") as u32;
    let nodes = hosts.len() + 1;
    // Until the data center outgrows the replication factor every node
    // replicates everything: the first RF nodes instead split the ring
    // into RF equal interleaved slices, the shape from which the next
    // joiners can even out replicated shares.
    let (rf, fair) = if nodes > replication_factor {
        (replication_factor, replication_factor as f64 / nodes as f64)
    } else {
        (1, 1.0 / replication_factor as f64)
    };
    let mut local_ring = LocalRing {
        tokens: ring.entries().filter(|(_, h)| local.contains(h)).map(|(t, h)| (t, index(&h))).collect(),
        rf,
        token_target: fair / count as f64,
        seen: Vec::with_capacity(rf),
    };
    let mut shares = local_ring.shares(nodes);
    // At RF=1 a token's span is its slice alone, which the midpoint of a
    // range smaller than the joiner's fair slice would leave too thin.
    let slice = (rf == 1).then(|| (fair * RING_TOKENS / count as f64) as u128);
    let mut candidates: Vec<Option<Candidate>> = vec![None; local_ring.tokens.len()];
    // Each pass places one token; a pass with no range left to split
    // (every range one token wide) ends the loop early.
    while chosen.len() < count {
        let joiner_target = fair * (chosen.len() + 1) as f64 / count as f64;
        let distance = |h: u32| shares[h as usize] - if h == joiner { joiner_target } else { fair };
        let mut best: Option<(f64, usize)> = None;
        for (i, candidate) in candidates.iter_mut().enumerate() {
            let candidate = candidate.get_or_insert_with(|| local_ring.candidate(i, joiner, slice, ring));
            let Candidate { placement: Some(placement), .. } = candidate else { continue };
            let score = placement
                .changes
                .iter()
                .map(|(h, delta)| {
                    let now = distance(*h);
                    (now + delta).powi(2) - now.powi(2)
                })
                .sum::<f64>()
                + TOKEN_WEIGHT * placement.token_score;
            if best.is_none_or(|(best_score, _)| score < best_score) {
                best = Some((score, i));
            }
        }
        let Some((_, i)) = best else { break };
        // The chosen range is split: both halves are new candidates.
        let placement = candidates[i].take().and_then(|c| c.placement).expect("the best has a placement");
        for (h, delta) in &placement.changes {
            shares[*h as usize] += delta;
        }
        let at = local_ring.insertion_point(i, placement.token);
        local_ring.tokens.insert(at, (placement.token, joiner));
        candidates.insert(at, None);
        for candidate in &mut candidates {
            if candidate.as_ref().is_some_and(|c| c.reads(placement.token)) {
                *candidate = None;
            }
        }
        chosen.push(placement.token);
    }
    if cfg!(debug_assertions) {
        let fresh = local_ring.shares(nodes);
        let kept_right = fresh.iter().zip(&shares).all(|(fresh, kept)| (fresh - kept).abs() < 1e-9);
        assert!(kept_right, "the shares kept while placing are the ring's: {fresh:?} vs {shares:?}");
    }
    chosen
}

/// One data center's tokens, by host index, and the replication factor
/// their spans are taken at.
struct LocalRing {
    tokens: Vec<(i64, u32)>,
    rf: usize,
    /// The span each token would have on a balanced ring: RF/N/count.
    token_target: f64,
    /// Scratch: the distinct other hosts a span walk has passed.
    seen: Vec<u32>,
}

/// The placement of the joiner's next token in one range, and the stretch
/// of the ring its evaluation read: a token inserted inside that stretch
/// changes the evaluation, one outside it does not.
#[derive(Clone)]
struct Candidate {
    placement: Option<TokenPlacement>,
    /// The ring from `from` to `to`, clockwise, both exclusive; `None`:
    /// all of it.
    read: Option<(i64, i64)>,
}

#[derive(Clone)]
struct TokenPlacement {
    token: i64,
    /// Each host's replicated share gained (or lost) by the token.
    changes: Vec<(u32, f64)>,
    /// How far the spans it changes (its own included) move from the
    /// target span of one token: the change in their squared distances.
    token_score: f64,
}

impl Candidate {
    fn reads(&self, token: i64) -> bool {
        match self.read {
            None => true,
            Some((from, to)) => {
                let offset = token.wrapping_sub(from) as u64;
                offset != 0 && offset < to.wrapping_sub(from) as u64
            }
        }
    }
}

/// A span walk's result: the share, and how many tokens before its own
/// the walk read (the ring's size: all of them, round to itself).
struct Span {
    width: f64,
    reach: usize,
}

impl LocalRing {
    /// Each of `hosts` hosts' replicated share: the sum of its spans.
    fn shares(&mut self, hosts: usize) -> Vec<f64> {
        let mut shares = vec![0.0; hosts];
        for i in 0..self.tokens.len() {
            shares[self.tokens[i].1 as usize] += self.span(i).width;
        }
        shares
    }

    /// The replicated share the token at `i` gives its host.
    fn span(&mut self, i: usize) -> Span {
        let tokens = &self.tokens;
        walk(|q| tokens[q], tokens.len(), i, self.rf, &mut self.seen)
    }

    /// [`Self::span`] of the token at `q` of the ring with `new` inserted
    /// at `at`.
    fn span_with(&mut self, new: (i64, u32), at: usize, q: usize) -> Span {
        let tokens = &self.tokens;
        let view = |q: usize| match q.cmp(&at) {
            std::cmp::Ordering::Less => tokens[q],
            std::cmp::Ordering::Equal => new,
            std::cmp::Ordering::Greater => tokens[q - 1],
        };
        walk(view, tokens.len() + 1, q, self.rf, &mut self.seen)
    }

    /// The joiner's token placed in the range ending at token `i`: at its
    /// midpoint, or a `slice` into it, or just past where `ring` (another
    /// data center) holds those; none in a range too narrow.
    fn candidate(&mut self, i: usize, joiner: u32, slice: Option<u128>, ring: &TokenRing) -> Candidate {
        let n = self.tokens.len();
        let previous = self.tokens[(i + n - 1) % n].0;
        let width = range_width(previous, self.tokens[i].0);
        let unplaced = Candidate { placement: None, read: Some((previous, self.tokens[i].0)) };
        if width < 2 {
            return unplaced;
        }
        let mut take = slice.map_or(width / 2, |slice| slice.clamp(1, width - 1));
        // Another data center's token may sit on the spot: the next free
        // one (a handful of steps: its tokens are spread as these are).
        while ring.holds(previous.wrapping_add(take as u64 as i64)) {
            if take + 1 >= width {
                return unplaced;
            }
            take += 1;
        }
        let token = previous.wrapping_add(take as u64 as i64);
        let (placement, read) = self.place(i, (token, joiner));
        Candidate { placement: Some(placement), read }
    }

    /// `new` placed in the range ending at token `i`: its placement, and
    /// the stretch of the ring that evaluating it read.
    fn place(&mut self, i: usize, new: (i64, u32)) -> (TokenPlacement, Option<(i64, i64)>) {
        let n = self.tokens.len();
        let at = self.insertion_point(i, new.0);
        let span = self.span_with(new, at, at);
        let target = self.token_target;
        let mut token_score = (span.width - target).powi(2);
        let mut changes: Vec<(u32, f64)> = vec![(new.1, span.width)];
        // The stretch read, in old tokens: from `back` before token `i` to
        // `ahead` after it.
        let mut back = span.reach as isize;
        let mut ahead = 0;
        // The tokens after the new one whose walk back can reach it: until
        // RF+1 distinct hosts have passed, each of them sees fewer than RF
        // others.
        let mut passed: Vec<u32> = Vec::with_capacity(self.rf + 1);
        let mut whole_ring = true;
        for step in 0..n {
            let j = (i + step) % n;
            let host = self.tokens[j].1;
            let before = self.span(j);
            let after = self.span_with(new, at, if j < at { j } else { j + 1 });
            token_score += (after.width - target).powi(2) - (before.width - target).powi(2);
            match changes.iter_mut().find(|(h, _)| *h == host) {
                Some((_, sum)) => *sum += after.width - before.width,
                None => changes.push((host, after.width - before.width)),
            }
            // A walk of the ring with the new token stops no farther back
            // than the walk without it: it meets the same tokens and one more.
            back = back.max(before.reach as isize - step as isize);
            ahead = step;
            if !passed.contains(&host) {
                passed.push(host);
                if passed.len() > self.rf {
                    whole_ring = false;
                    break;
                }
            }
        }
        let read = (!whole_ring && back + (ahead as isize) < n as isize).then(|| {
            let from = (i as isize - back).rem_euclid(n as isize) as usize;
            (self.tokens[from].0, self.tokens[(i + ahead) % n].0)
        });
        (TokenPlacement { token: new.0, changes, token_score }, read)
    }

    /// Where `token`, inside the range ending at token `i`, goes in the
    /// sorted ring: in the range wrapping past the last token it may sort
    /// last rather than first.
    fn insertion_point(&self, i: usize, token: i64) -> usize {
        let n = self.tokens.len();
        if i == 0 && token > self.tokens[n - 1].0 {
            n
        } else {
            i
        }
    }
}

/// The span of the token at `i` of a ring of `n` tokens read through
/// `at` (ascending), at `rf`; `seen` is scratch.
fn walk(at: impl Fn(usize) -> (i64, u32), n: usize, i: usize, rf: usize, seen: &mut Vec<u32>) -> Span {
    let (token, owner) = at(i);
    let previous = |k: usize| at((k + n - 1) % n).0;
    let mut width = range_width(previous(i), token);
    seen.clear();
    for reach in 1..n {
        let k = (i + n - reach) % n;
        let (start, holder) = at(k);
        let stops = holder == owner || (!seen.contains(&holder) && seen.len() + 1 >= rf);
        if stops {
            return Span { width: width as f64 / RING_TOKENS, reach };
        }
        if !seen.contains(&holder) {
            seen.push(holder);
        }
        width += range_width(previous(k), start);
    }
    Span { width: width as f64 / RING_TOKENS, reach: n }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;
    use crate::replication::{ReplicaMap, Strategy, VnodeReplicas};

    /// Every host's replicated share of `ring` at `rf` (each summing to
    /// min(rf, hosts)).
    fn replicated_shares(ring: &TokenRing, rf: usize) -> BTreeMap<Uuid, f64> {
        let hosts: Vec<Uuid> = ring.entries().map(|(_, h)| h).collect::<BTreeSet<_>>().into_iter().collect();
        let index = |h: &Uuid| hosts.binary_search(h).expect("a host of the ring") as u32;
        let tokens = ring.entries().map(|(t, h)| (t, index(&h))).collect();
        let shares = LocalRing { tokens, rf, token_target: 0.0, seen: Vec::new() }.shares(hosts.len());
        hosts.into_iter().zip(shares).collect()
    }

    fn host(n: u128) -> Uuid {
        Uuid::from_u128(n.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }

    /// Hosts of one data center joining one by one, each allocating
    /// against the ring so far; `check` sees the ring after each join.
    fn grow(nodes: u128, num_tokens: usize, rf: usize, mut check: impl FnMut(&TokenRing, usize)) {
        let mut hosts: Vec<(Uuid, Vec<i64>)> = Vec::new();
        let mut ring = TokenRing::default();
        for n in 1..=nodes {
            let local: BTreeSet<Uuid> = hosts.iter().map(|(h, _)| *h).collect();
            let tokens = allocate_tokens(&ring, &local, host(n), num_tokens, rf);
            assert_eq!(tokens.len(), num_tokens);
            hosts.push((host(n), tokens));
            ring = TokenRing::new(hosts.iter().map(|(h, t)| (*h, t.as_slice()))).expect("no token twice");
            check(&ring, n as usize);
        }
    }

    #[test]
    fn spans_sum_to_the_replication_factor() {
        grow(5, 16, 3, |ring, nodes| {
            for rf in 1..=6 {
                let shares = replicated_shares(ring, rf);
                let total: f64 = shares.values().sum();
                assert!((total - rf.min(nodes) as f64).abs() < 1e-9, "rf {rf}: {total}");
                assert!(shares.values().all(|s| *s <= 1.0 + 1e-9), "{shares:?}");
            }
        });
        let lone = TokenRing::new([(host(1), &[42][..])]).expect("one token");
        assert_eq!(replicated_shares(&lone, 3)[&host(1)], 1.0);
    }

    #[test]
    fn joining_nodes_replicate_even_shares() {
        for (rf, nodes, tolerance) in [(3, 7, 0.02), (2, 4, 0.02), (1, 4, 0.01)] {
            grow(nodes, 256, rf, |ring, nodes| {
                let fair = rf.min(nodes) as f64 / nodes as f64;
                for (h, share) in replicated_shares(ring, rf) {
                    let off = (share - fair).abs() / fair;
                    assert!(off <= tolerance, "rf {rf}, {nodes} nodes: {h} replicates {share:.4}, fair {fair:.4}");
                }
            });
        }
    }

    #[test]
    fn the_first_nodes_interleave_in_equal_slices() {
        grow(3, 64, 3, |ring, nodes| {
            if nodes == 3 {
                for (h, share) in ring.ownership() {
                    assert!((share - 1.0 / 3.0).abs() < 1e-3, "{h} owns {share:.4}");
                }
            }
        });
    }

    #[test]
    fn tokens_stay_distinct_and_off_other_data_centers() {
        let first = allocate_tokens(&TokenRing::default(), &BTreeSet::new(), host(1), 256, 3);
        let ring = TokenRing::new([(host(1), first.as_slice())]).expect("distinct");
        // Wanted slices wider than the ranges: each still lands inside one.
        let joiner = allocate_tokens(&ring, &BTreeSet::from([host(1)]), host(2), 16, 1);
        let distinct: BTreeSet<i64> = joiner.iter().copied().collect();
        assert_eq!(distinct.len(), 16);
        assert!(TokenRing::new([(host(1), first.as_slice()), (host(2), joiner.as_slice())]).is_ok());
        // The first node of a second data center whose even spacing would
        // land on the first one's tokens.
        let clash = allocate_tokens(&ring, &BTreeSet::new(), host(1), 256, 3);
        assert!(clash.iter().all(|t| !ring.holds(*t)));
    }

    #[test]
    fn a_spot_another_data_center_holds_is_passed_by() {
        // Data center 2's first node, and data center 1's tokens on and
        // around each midpoint of its ranges.
        let first = allocate_tokens(&TokenRing::default(), &BTreeSet::new(), host(2), 16, 1);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        let blocking: Vec<i64> = (0..16)
            .flat_map(|i| {
                let previous = sorted[(i + 15) % 16];
                let middle = previous.wrapping_add((range_width(previous, sorted[i]) / 2) as u64 as i64);
                (-2..=2).map(move |d| middle.wrapping_add(d))
            })
            .collect();
        let ring = TokenRing::new([(host(1), blocking.as_slice()), (host(2), first.as_slice())]).expect("distinct");
        let joiner = allocate_tokens(&ring, &BTreeSet::from([host(2)]), host(3), 16, 1);
        assert_eq!(joiner.len(), 16);
        assert!(joiner.iter().all(|t| !ring.holds(*t)), "{joiner:?}");
    }

    /// Each host's share of the ring it replicates under `strategy`.
    fn replicated_by(ring: &TokenRing, placements: &HashMap<Uuid, Placement>, strategy: &Strategy) -> Vec<f64> {
        let map = VnodeReplicas { ring, placements, strategy, local: Uuid::nil() };
        let tokens: Vec<i64> = ring.tokens().collect();
        let mut shares: BTreeMap<Uuid, f64> = BTreeMap::new();
        for (k, end) in tokens.iter().enumerate() {
            let start = tokens[(k + tokens.len() - 1) % tokens.len()];
            for h in map.replicas(*end) {
                *shares.entry(h).or_default() += range_width(start, *end) as f64 / RING_TOKENS;
            }
        }
        shares.into_values().collect()
    }

    #[test]
    fn with_as_many_racks_as_replicas_each_rack_splits_its_copy_evenly() {
        let rack_of = ["r1", "r2", "r3", "r1", "r2", "r3", "r1"];
        let strategy = Strategy::NetworkTopology { factors: BTreeMap::from([("dc1".to_string(), 3)]) };
        let mut placements: HashMap<Uuid, Placement> = HashMap::new();
        let mut hosts: Vec<(Uuid, Vec<i64>)> = Vec::new();
        let mut ring = TokenRing::default();
        for (n, rack) in rack_of.iter().enumerate() {
            let joiner = Placement { data_center: "dc1".to_string(), rack: rack.to_string() };
            let (local, rf) = balancing_group(&joiner, placements.iter().map(|(h, p)| (*h, p)), 3);
            let tokens = allocate_tokens(&ring, &local, host(n as u128 + 1), 256, rf);
            hosts.push((host(n as u128 + 1), tokens));
            placements.insert(host(n as u128 + 1), joiner);
            ring = TokenRing::new(hosts.iter().map(|(h, t)| (*h, t.as_slice()))).expect("no token twice");
            if n + 1 < 3 {
                continue;
            }
            // Each rack holds one whole copy, shared by its nodes.
            let in_rack = |r: &str| placements.values().filter(|p| p.rack == r).count() as f64;
            let shares = replicated_by(&ring, &placements, &strategy);
            let order: Vec<&Placement> = {
                let mut ids: Vec<&Uuid> = placements.keys().collect();
                ids.sort();
                ids.into_iter().map(|h| &placements[h]).collect()
            };
            for (share, place) in shares.iter().zip(order) {
                let fair = 1.0 / in_rack(&place.rack);
                assert!(
                    (share - fair).abs() / fair < 0.02,
                    "{} nodes: {share:.4} on {}, fair {fair:.4}",
                    n + 1,
                    place.rack
                );
            }
        }
        // Other rack counts: the data center is one group.
        let two_racks = [(host(1), place("r1")), (host(2), place("r2"))];
        let (group, rf) = balancing_group(&place("r1"), two_racks.iter().map(|(h, p)| (*h, p)), 3);
        assert_eq!((group, rf), (BTreeSet::from([host(1), host(2)]), 3));
        let elsewhere = [(host(1), Placement { data_center: "dc2".to_string(), rack: "r2".to_string() })];
        let (group, rf) = balancing_group(&place("r1"), elsewhere.iter().map(|(h, p)| (*h, p)), 1);
        assert_eq!((group, rf), (BTreeSet::new(), 1));
    }

    fn place(rack: &str) -> Placement {
        Placement { data_center: "dc1".to_string(), rack: rack.to_string() }
    }

    #[test]
    fn first_nodes_differ_by_host() {
        let a = allocate_tokens(&TokenRing::default(), &BTreeSet::new(), host(1), 4, 3);
        let b = allocate_tokens(&TokenRing::default(), &BTreeSet::new(), host(2), 4, 3);
        assert_ne!(a, b);
    }
}
