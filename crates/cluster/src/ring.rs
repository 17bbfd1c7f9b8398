//! The token ring: which node owns which range of Murmur3 tokens (vnodes),
//! and how a joining node chooses its tokens.
//!
//! Every node holds `num_tokens` tokens. A token t of node n makes n the
//! owner of the range (previous token, t], the first range wrapping from
//! the ring's last token to its first (Cassandra's rule). The ring is a
//! sorted vector of (token, host): finding a token's owner is a binary
//! search, walking the ring clockwise from it a slice iteration.
//!
//! A joining node's tokens are chosen by `token_allocation`.

use std::collections::BTreeMap;

use thiserror::Error;
use uuid::Uuid;

/// The ring's size in tokens: Murmur3 tokens are every i64.
pub const RING_TOKENS: f64 = 18_446_744_073_709_551_616.0;

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

    /// Every token and its owner, in ring order (ascending).
    pub fn entries(&self) -> impl Iterator<Item = (i64, Uuid)> + '_ {
        self.tokens.iter().copied()
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
pub fn range_width(previous: i64, token: i64) -> u128 {
    match token.wrapping_sub(previous) as u64 {
        0 => 1 << 64,
        width => u128::from(width),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> Uuid {
        Uuid::from_u128(n.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
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
        let ring = TokenRing::new([(host(1), &[-5, 9][..]), (host(2), &[0][..]), (host(3), &[i64::MAX][..])])
            .expect("distinct");
        let total: f64 = ring.ownership().values().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }
}
