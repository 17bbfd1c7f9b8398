//! Joining group 0 from outside it: the joiner's side of `Group0Join` —
//! asking the seeds in turn, again until one succeeds, following a
//! non-leader's answer to the leader ([`NOT_LEADER`]) — and the request's
//! encoding. The leader's side (the joiner's tokens, the `Join` entry,
//! answering once it is applied) is the driver's, in [`crate::group0`].

use std::net::SocketAddr;
use std::time::Duration;

use uuid::Uuid;

use crate::group0_entry::{decode_member, encode_member, Member};
use crate::messaging::{self, MessagingError};
use crate::verb::Verb;

/// Between rounds of asking the seeds to be added.
const JOIN_RETRY: Duration = Duration::from_secs(1);
/// How a node that is not the leader refuses a proposal or a join: the
/// leader's address follows.
pub(crate) const NOT_LEADER: &str = "not the group 0 leader; the leader is at ";

/// Asks the seeds, in turn and again until one succeeds, to add `me`
/// with `num_tokens` tokens the leader chooses — or, replacing a dead
/// member, its tokens; returns the member record as group 0 applied it
/// (its tokens among it).
pub async fn join_through_seeds(
    me: &Member,
    num_tokens: usize,
    replaces: Option<Uuid>,
    seeds: &[SocketAddr],
) -> Member {
    let payload = encode_join(num_tokens, replaces, me);
    let mut ask: Vec<SocketAddr> = seeds.to_vec();
    loop {
        let mut next_round = Vec::new();
        for seed in ask {
            tracing::info!("group 0: asking {seed} to add this node");
            match messaging::request(seed, 0, Verb::Group0Join, &payload).await {
                Ok(answer) => match decode_member(&answer) {
                    Ok(member) => {
                        tracing::info!("group 0: joined through {seed} with {} tokens", member.tokens.len());
                        return member;
                    }
                    Err(e) => tracing::warn!("group 0: {seed} answered a bad member record: {e}"),
                },
                Err(MessagingError::Failed { message, .. }) if message.starts_with(NOT_LEADER) => {
                    match message[NOT_LEADER.len()..].parse::<SocketAddr>() {
                        Ok(leader) => next_round.insert(0, leader),
                        Err(_) => tracing::warn!("group 0: {seed} answered {message}"),
                    }
                }
                Err(e) => tracing::info!("group 0: {seed}: {e}"),
            }
        }
        shoal_runtime::time::sleep(JOIN_RETRY).await;
        next_round.extend(seeds.iter().copied());
        ask = next_round;
    }
}

/// A join request: `[u32 tokens wanted][16 host id replaced, nil for
/// none][member]`.
fn encode_join(num_tokens: usize, replaces: Option<Uuid>, me: &Member) -> Vec<u8> {
    let mut payload = (num_tokens as u32).to_be_bytes().to_vec();
    payload.extend_from_slice(replaces.unwrap_or_default().as_bytes());
    encode_member(me, &mut payload);
    payload
}

pub(crate) fn decode_join(payload: &[u8]) -> Result<(usize, Option<Uuid>, Member), String> {
    let Some((count, rest)) = payload.split_first_chunk::<4>() else { return Err("short join".to_string()) };
    let Some((replaces, member)) = rest.split_first_chunk::<16>() else { return Err("short join".to_string()) };
    let replaces = Some(Uuid::from_bytes(*replaces)).filter(|id| !id.is_nil());
    Ok((u32::from_be_bytes(*count) as usize, replaces, decode_member(member)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_round_trip() {
        let member = crate::group0_entry::sample_member();
        let join = encode_join(16, None, &member);
        assert_eq!(decode_join(&join), Ok((16, None, member.clone())));
        let replaced = Uuid::from_u128(5);
        assert_eq!(decode_join(&encode_join(0, Some(replaced), &member)), Ok((0, Some(replaced), member)));
        assert!(decode_join(&join[..19]).is_err());
    }
}
