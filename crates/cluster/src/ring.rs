//! The token ring: which node owns which range of Murmur3 tokens (vnodes),
//! and how a joining node chooses its tokens.
//!
//! Every node holds `num_tokens` tokens. A token t of node n makes n the
//! owner of the range (previous token, t], the first range wrapping from
//! the ring's last token to its first (Cassandra's rule). The ring is a
//! sorted vector of (token, host): finding a token's owner is a binary
//! search, walking the ring clockwise from it a slice iteration.
//!
//! Tokens are chosen to balance ownership ([`allocate_tokens`]): the first
//! node spreads its tokens evenly, and each later node takes, token by
//! token, a slice of the largest range of whichever node owns most above
//! its fair share, so after the join every node owns close to 1/N.

use std::collections::BTreeMap;

use thiserror::Error;
use uuid::Uuid;

/// The ring's size in tokens: Murmur3 tokens are every i64.
const RING_TOKENS: f64 = 18_446_744_073_709_551_616.0;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RingError {
    #[error("token {token} is held by both {first} and {second}")]
    DuplicateToken { token: i64, first: Uuid, second: Uuid },
}

/// Tokens and their owners, in token order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenRing {
    tokens: Vec<(i64, Uuid)>,
}

impl TokenRing {
    /// The ring of these hosts' tokens; a token held twice is an error.
    pub fn new<'a>(hosts: impl IntoIterator<Item = (Uuid, &'a [i64])>) -> Result<TokenRing, RingError> {
        let mut tokens: Vec<(i64, Uuid)> =
            hosts.into_iter().flat_map(|(host, tokens)| tokens.iter().map(move |t| (*t, host))).collect();
        tokens.sort_unstable();
        if let Some(pair) = tokens.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(RingError::DuplicateToken { token: pair[0].0, first: pair[0].1, second: pair[1].1 });
        }
        Ok(TokenRing { tokens })
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The ring's tokens and their owners, clockwise from the owner of
    /// `token` (the first ring token at or after it), once around.
    pub fn walk_from(&self, token: i64) -> impl Iterator<Item = (i64, Uuid)> + '_ {
        let start = self.tokens.partition_point(|(t, _)| *t < token);
        let start = if start == self.tokens.len() { 0 } else { start };
        self.tokens[start..].iter().chain(&self.tokens[..start]).copied()
    }

    /// Every token of the ring, in ring order (ascending).
    pub fn tokens(&self) -> impl Iterator<Item = i64> + '_ {
        self.tokens.iter().map(|(token, _)| *token)
    }

    /// The node that owns `token`; `None` on an empty ring.
    pub fn owner(&self, token: i64) -> Option<Uuid> {
        self.walk_from(token).next().map(|(_, host)| host)
    }

    /// Whether some node holds exactly `token`.
    pub fn holds(&self, token: i64) -> bool {
        self.tokens.binary_search_by_key(&token, |(t, _)| *t).is_ok()
    }

    /// The share of the ring each node owns (summing to 1).
    pub fn ownership(&self) -> BTreeMap<Uuid, f64> {
        let mut shares = BTreeMap::new();
        for (i, (token, host)) in self.tokens.iter().enumerate() {
            let previous = if i == 0 { self.tokens[self.tokens.len() - 1].0 } else { self.tokens[i - 1].0 };
            *shares.entry(*host).or_insert(0.0) += range_width(previous, *token) as f64 / RING_TOKENS;
        }
        shares
    }
}

/// The tokens in (previous, token], wrapping: the whole ring (2^64) when
/// equal (a ring of one token). Exact: an f64 cannot count them.
fn range_width(previous: i64, token: i64) -> u128 {
    match token.wrapping_sub(previous) as u64 {
        0 => 1 << 64,
        width => u128::from(width),
    }
}

/// `count` tokens for `host` joining `ring`, chosen so that ownership is
/// balanced afterwards. On an empty ring they are evenly spaced, starting
/// at an offset drawn from the host id (so two first nodes differ).
pub fn allocate_tokens(ring: &TokenRing, host: Uuid, count: usize) -> Vec<i64> {
    assert!(count > 0, "a node holds at least one token");
    if ring.is_empty() {
        let step = (u64::MAX / count as u64).max(1);
        let offset = host.as_u64_pair().1;
        return (0..count as u64).map(|i| offset.wrapping_add(i.wrapping_mul(step)) as i64).collect();
    }
    let mut ring = ring.clone();
    let nodes = ring.ownership().len() + 1;
    let fair_share = 1.0 / nodes as f64;
    let want_per_token = fair_share * RING_TOKENS / count as f64;
    let mut shares = ring.ownership();
    let mut chosen = Vec::with_capacity(count);
    // Each pass adds one token; a pass that finds no range to split (every
    // range one token wide) ends the loop early.
    while chosen.len() < count {
        // The node most above its fair share gives up a slice of its
        // largest range.
        let Some((&donor, _)) = shares.iter().filter(|(h, _)| **h != host).max_by(|a, b| a.1.total_cmp(b.1)) else {
            break;
        };
        let Some((previous, width)) = largest_range_of(&ring, donor) else { break };
        if width < 2 {
            break;
        }
        // The new token lands strictly inside the range.
        let take = (want_per_token as u128).clamp(1, width - 1);
        let token = previous.wrapping_add(take as u64 as i64);
        let take = take as f64;
        debug_assert!(!ring.holds(token), "a new token lands on a held one");
        chosen.push(token);
        *shares.entry(donor).or_insert(0.0) -= take / RING_TOKENS;
        *shares.entry(host).or_insert(0.0) += take / RING_TOKENS;
        let at = ring.tokens.partition_point(|(t, _)| *t < token);
        ring.tokens.insert(at, (token, host));
    }
    chosen
}

/// The start (exclusive) and width of `host`'s widest range.
fn largest_range_of(ring: &TokenRing, host: Uuid) -> Option<(i64, u128)> {
    let n = ring.tokens.len();
    (0..n)
        .filter(|i| ring.tokens[*i].1 == host)
        .map(|i| {
            let previous = ring.tokens[(i + n - 1) % n].0;
            (previous, range_width(previous, ring.tokens[i].0))
        })
        .max_by_key(|(_, width)| *width)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> Uuid {
        Uuid::from_u128(n.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }

    /// Hosts joining one by one, each allocating against the ring so far.
    fn grow(nodes: u128, num_tokens: usize) -> (TokenRing, Vec<(Uuid, Vec<i64>)>) {
        let mut hosts: Vec<(Uuid, Vec<i64>)> = Vec::new();
        let mut ring = TokenRing::default();
        for n in 1..=nodes {
            let tokens = allocate_tokens(&ring, host(n), num_tokens);
            assert_eq!(tokens.len(), num_tokens);
            hosts.push((host(n), tokens));
            ring = TokenRing::new(hosts.iter().map(|(h, t)| (*h, t.as_slice()))).expect("no token twice");
        }
        (ring, hosts)
    }

    #[test]
    fn owners_wrap_around_the_ring() {
        let ring = TokenRing::new([(host(1), &[-100, 100][..]), (host(2), &[0][..])]).expect("distinct");
        assert_eq!(ring.owner(-100), Some(host(1)));
        assert_eq!(ring.owner(-99), Some(host(2)));
        assert_eq!(ring.owner(0), Some(host(2)));
        assert_eq!(ring.owner(1), Some(host(1)));
        assert_eq!(ring.owner(i64::MAX), Some(host(1)), "past the last token: the first");
        assert_eq!(ring.owner(i64::MIN), Some(host(1)));
        let walk: Vec<i64> = ring.walk_from(50).map(|(t, _)| t).collect();
        assert_eq!(walk, vec![100, -100, 0]);
        assert_eq!(TokenRing::default().owner(5), None);
        assert!(TokenRing::new([(host(1), &[7][..]), (host(2), &[7][..])]).is_err());
    }

    #[test]
    fn ownership_sums_to_one_and_a_lone_node_owns_everything() {
        let ring = TokenRing::new([(host(1), &[42][..])]).expect("one token");
        assert_eq!(ring.ownership().get(&host(1)).copied(), Some(1.0));
        let (ring, _) = grow(3, 16);
        let total: f64 = ring.ownership().values().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn joining_nodes_get_balanced_shares() {
        for (nodes, num_tokens, tolerance) in [(2, 256, 0.01), (3, 256, 0.02), (5, 256, 0.03), (7, 16, 0.1)] {
            let (ring, _) = grow(nodes, num_tokens);
            let fair = 1.0 / nodes as f64;
            for (h, share) in ring.ownership() {
                assert!(
                    (share - fair).abs() <= fair * tolerance,
                    "{nodes} nodes x {num_tokens} tokens: {h} owns {share:.4}, fair {fair:.4}"
                );
            }
        }
    }

    #[test]
    fn a_joiner_with_fewer_tokens_gets_distinct_ones() {
        // 2^56-wide ranges, wanted slices wider than them: every slice must
        // still fall strictly inside its range.
        let first = allocate_tokens(&TokenRing::default(), host(1), 256);
        let ring = TokenRing::new([(host(1), first.as_slice())]).expect("distinct");
        let joiner = allocate_tokens(&ring, host(2), 16);
        let mut distinct = joiner.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 16);
        assert!(joiner.iter().all(|t| !ring.holds(*t)));
        assert!(TokenRing::new([(host(1), first.as_slice()), (host(2), joiner.as_slice())]).is_ok());
    }

    #[test]
    fn first_nodes_differ_by_host() {
        let a = allocate_tokens(&TokenRing::default(), host(1), 4);
        let b = allocate_tokens(&TokenRing::default(), host(2), 4);
        assert_ne!(a, b);
        let ring = TokenRing::new([(host(1), a.as_slice())]).expect("distinct");
        assert!((ring.ownership()[&host(1)] - 1.0).abs() < 1e-9);
    }
}
