//! How a coordinator asks a replica ([`Target`]): this node's local half
//! ([`crate::local`], [`crate::held_batches`]) called directly, another
//! node by a message of the verb to its shard owning the partition (a
//! range read: the range's first token).
//!
//! A replica's answer is `[u8 outcome][body]` ([`encode_answer`],
//! [`answer_body`]): 0 and the payload, or an error as a message — 1
//! invalid (the client's to fix), 2 overloaded, 3 any other — so a
//! coordinator returns the replica's error as the kind it is. A request
//! that gets no answer (connection lost, timeout) is a replica that did
//! not answer, which consistency levels count.
//!
//! Above the local halves, beneath the executors that use it (write,
//! read, counter, Paxos, hints, batchlog, streaming, repair, views).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use shoal_cluster::messaging::{self, MessagingError};
use shoal_cluster::verb::Verb;
use shoal_replica::{Ballot, Mutation, PartitionSelection, Promise, ReadCommand, ReadResult};
use shoal_storage::Partition;
use uuid::Uuid;

use crate::local::{
    accept_local, commit_local, digest, mutate_local, prepare_local, read_local, read_raw_local, row_hashes_local,
    truncate_local,
};
use crate::shards::first_token;
use crate::topology::Topology;
use crate::wire::PaxosPrepare;
use crate::{held_batches, wire, ConsistencyLevel, CoordinatorError, WriteType};

const OK: u8 = 0;
const INVALID: u8 = 1;
const OVERLOADED: u8 = 2;
pub(crate) const FAILED: u8 = 3;

/// A handler's answer: its outcome and body, or its error's kind and
/// message. An acknowledgement (success, no body: every applied
/// mutation's) allocates nothing.
pub(crate) fn encode_answer(result: Result<Vec<u8>, CoordinatorError>) -> Bytes {
    static ACKNOWLEDGED: [u8; 1] = [OK];
    let (kind, body) = match result {
        Ok(body) if body.is_empty() => return Bytes::from_static(&ACKNOWLEDGED),
        Ok(body) => (OK, body),
        Err(e) => (error_kind(&e), e.to_string().into_bytes()),
    };
    let mut answer = Vec::with_capacity(1 + body.len());
    answer.push(kind);
    answer.extend_from_slice(&body);
    Bytes::from(answer)
}

/// How an error travels back to the node that asked: its kind.
pub(crate) fn error_kind(e: &CoordinatorError) -> u8 {
    match e {
        CoordinatorError::Invalid(_) => INVALID,
        CoordinatorError::Overloaded(_) => OVERLOADED,
        _ => FAILED,
    }
}

/// An error `address` answered, as the kind it is.
pub(crate) fn remote_error(address: SocketAddr, kind: u8, message: String) -> CoordinatorError {
    match kind {
        INVALID => CoordinatorError::Invalid(message),
        OVERLOADED => CoordinatorError::Overloaded(message),
        _ => CoordinatorError::Remote(format!("{address}: {message}")),
    }
}

/// A request that does not decode: invalid, the asking node's to fix.
pub(crate) fn malformed(e: shoal_storage::codec::DecodeError) -> CoordinatorError {
    CoordinatorError::Invalid(format!("malformed data message: {e}"))
}

/// The body of `address`'s answer to a data verb, or its error as the
/// kind it is.
pub(crate) fn answer_body(address: SocketAddr, answer: Bytes) -> Result<Bytes, CoordinatorError> {
    let Some((&outcome, body)) = answer.split_first() else {
        return Err(CoordinatorError::Remote(format!("{address} answered nothing")));
    };
    match outcome {
        OK => Ok(answer.slice(1..)),
        kind => Err(remote_error(address, kind, String::from_utf8_lossy(body).into_owned())),
    }
}

/// A data verb's request to another node ([`Target::start_call`]): its
/// answer's body, or why there is none.
pub(crate) enum Call {
    Sent {
        sent: messaging::Sent,
        address: SocketAddr,
    },
    Opening(Pin<Box<dyn Future<Output = Result<Bytes, CoordinatorError>>>>),
    /// Failed before it was sent; taken when polled.
    Failed(Option<CoordinatorError>),
}

impl Future for Call {
    type Output = Result<Bytes, CoordinatorError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut *self {
            Call::Sent { sent, address } => {
                let address = *address;
                Pin::new(sent).poll(cx).map(|answer| answered(address, answer))
            }
            Call::Opening(opening) => opening.as_mut().poll(cx),
            Call::Failed(failure) => {
                Poll::Ready(Err(failure.take().unwrap_or_else(|| CoordinatorError::Remote("polled again".into()))))
            }
        }
    }
}

/// `verb` with `payload` sent to `address`'s shard `shard`: the body of
/// its answer.
async fn request(address: SocketAddr, shard: u16, verb: Verb, payload: &[u8]) -> Result<Bytes, CoordinatorError> {
    answered(address, messaging::request(address, shard, verb, payload).await)
}

/// The body of what `address` answered, or why there is none.
fn answered(address: SocketAddr, answer: Result<Bytes, MessagingError>) -> Result<Bytes, CoordinatorError> {
    answer_body(address, answer.map_err(|e| CoordinatorError::Remote(e.to_string()))?)
}

/// A replica a coordinator asks: this node (served on its own shards, no
/// message) or another.
pub(crate) struct Target<'a> {
    pub topology: &'a Topology,
    pub host: Uuid,
}

impl Target<'_> {
    fn is_local(&self) -> bool {
        self.host == self.topology.me
    }

    /// Where this replica answers.
    pub(crate) fn address(&self) -> Result<SocketAddr, CoordinatorError> {
        let endpoint = self
            .topology
            .endpoint(self.host)
            .ok_or_else(|| CoordinatorError::Remote(format!("node {} left the cluster", self.host)))?;
        Ok(endpoint.address)
    }

    /// Sends `verb` with `payload` to this replica, another node, at once
    /// where a connection to it is open: its answer's body as a [`Call`],
    /// which borrows nothing and needs no pinning, so a write holds its
    /// replicas' answers in a plain list polled by its own task.
    pub(crate) fn start_call(&self, verb: Verb, token: i64, payload: Bytes) -> Call {
        let address = match self.address() {
            Ok(address) => address,
            Err(e) => return Call::Failed(Some(e)),
        };
        let shard = self.topology.shard_on(self.host, token);
        match messaging::send_request(address, shard, verb, &payload) {
            Some(Ok(sent)) => Call::Sent { sent, address },
            Some(Err(e)) => Call::Failed(Some(CoordinatorError::Remote(e.to_string()))),
            // Rare (the first request to a node's shard): boxed.
            None => Call::Opening(Box::pin(async move { request(address, shard, verb, &payload).await })),
        }
    }

    pub(crate) async fn call(&self, verb: Verb, token: i64, payload: &[u8]) -> Result<Bytes, CoordinatorError> {
        let address = self.address()?;
        request(address, self.topology.shard_on(self.host, token), verb, payload).await
    }

    /// Applies `mutation` (`payload`: its encoding) on this replica: this
    /// node applies it as it is, another node is sent the encoding.
    pub(crate) async fn mutate(
        &self,
        mutation: Mutation,
        payload: &[u8],
        write_type: WriteType,
        deadline: Instant,
    ) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return mutate_local(mutation, ConsistencyLevel::One, write_type, deadline).await;
        }
        self.send_mutation(mutation.position.token, payload).await
    }

    /// Sends this replica, another node, an encoded mutation of `token`.
    pub(crate) async fn send_mutation(&self, token: i64, payload: &[u8]) -> Result<(), CoordinatorError> {
        self.call(Verb::Mutation, token, payload).await.map(drop)
    }

    /// Asks this replica, another node, to lead a counter write of `token`
    /// (`payload`: its encoding) and answer once its level is met.
    pub(crate) async fn lead_counter_write(&self, token: i64, payload: &[u8]) -> Result<(), CoordinatorError> {
        self.call(Verb::CounterMutation, token, payload).await.map(drop)
    }

    /// Asks this replica, another node, to lead a run of item operations
    /// whose first key has `token` (`payload`: the run's encoding); its
    /// answers, one per operation.
    pub(crate) async fn lead_items(&self, token: i64, payload: &[u8]) -> Result<Bytes, CoordinatorError> {
        self.call(Verb::ItemRun, token, payload).await
    }

    /// The token whose shard a read command goes to: its first
    /// partition's, or its range's first (that shard reads the range on
    /// every shard of its node owning a token of it).
    fn token_of(command: &ReadCommand) -> i64 {
        match &command.partitions {
            PartitionSelection::Keys(keys) => keys.first().map_or(0, |k| k.token),
            PartitionSelection::Range { from, .. } => first_token(from),
        }
    }

    pub(crate) async fn read_data(
        &self,
        command: &ReadCommand,
        deadline: Instant,
    ) -> Result<ReadResult, CoordinatorError> {
        if self.is_local() {
            // Boxed: this node's read's state (the replica's) is what a
            // read's future is mostly made of, and inline it was copied
            // whole where the read's replicas are joined and where the
            // read is boxed; a remote read's is small.
            return Box::pin(read_local(command, ConsistencyLevel::One, deadline)).await;
        }
        let answer = self.call(Verb::ReadData, Self::token_of(command), &wire::encode_read_command(command)).await?;
        wire::decode_read_result(&answer).map_err(|e| CoordinatorError::Remote(format!("a replica's rows: {e}")))
    }

    pub(crate) async fn read_digest(&self, command: &ReadCommand, deadline: Instant) -> Result<u128, CoordinatorError> {
        if self.is_local() {
            // Boxed, as in `read_data`.
            return Ok(digest(&Box::pin(read_local(command, ConsistencyLevel::One, deadline)).await?));
        }
        let answer = self.call(Verb::ReadDigest, Self::token_of(command), &wire::encode_read_command(command)).await?;
        match answer.as_ref().try_into() {
            Ok(bytes) => Ok(u128::from_be_bytes(bytes)),
            Err(_) => Err(CoordinatorError::Remote(format!("a digest of {} bytes", answer.len()))),
        }
    }

    /// Removes every row of `table` on this node.
    pub(crate) async fn truncate(&self, table: Uuid, deadline: Instant) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return truncate_local(table, deadline).await;
        }
        self.call(Verb::Truncate, 0, table.as_bytes()).await.map(drop)
    }

    /// Has this node hold a logged batch (`payload`: its encoding).
    pub(crate) async fn store_batch(&self, payload: &[u8]) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return held_batches::hold(payload);
        }
        self.call(Verb::BatchStore, 0, payload).await.map(drop)
    }

    /// Has this node forget a batch it holds.
    pub(crate) async fn remove_batch(&self, id: Uuid) -> Result<(), CoordinatorError> {
        if self.is_local() {
            held_batches::forget(id);
            return Ok(());
        }
        self.call(Verb::BatchRemove, 0, id.as_bytes()).await.map(drop)
    }

    /// Asks this replica to promise a ballot.
    pub(crate) async fn paxos_prepare(&self, prepare: &PaxosPrepare) -> Result<Promise, CoordinatorError> {
        if self.is_local() {
            return prepare_local(prepare.clone()).await;
        }
        let answer =
            self.call(Verb::PaxosPrepare, prepare.position.token, &wire::encode_paxos_prepare(prepare)).await?;
        wire::decode_promise(&answer).map_err(|e| CoordinatorError::Remote(format!("a replica's promise: {e}")))
    }

    /// Asks this replica to accept a proposal (`payload`: its encoding
    /// with `ballot`); whether it did.
    pub(crate) async fn paxos_accept(
        &self,
        mutation: &Mutation,
        ballot: Ballot,
        payload: &[u8],
    ) -> Result<bool, CoordinatorError> {
        if self.is_local() {
            return accept_local(mutation.clone(), ballot).await;
        }
        match self.call(Verb::PaxosAccept, mutation.position.token, payload).await?.as_ref() {
            [accepted @ (0 | 1)] => Ok(*accepted == 1),
            other => Err(CoordinatorError::Remote(format!("an accept answered {} bytes", other.len()))),
        }
    }

    /// Has this replica apply a chosen proposal (`payload`: its encoding
    /// with `ballot`) and record it committed: this node applies the
    /// mutation as it is, another node is sent the encoding.
    pub(crate) async fn paxos_commit(
        &self,
        mutation: Mutation,
        ballot: Ballot,
        payload: &[u8],
    ) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return commit_local(mutation, ballot).await;
        }
        self.send_commit(mutation.position.token, payload).await
    }

    /// Sends this replica, another node, a chosen proposal of `token`
    /// (`payload`: its encoding with its ballot) to commit.
    pub(crate) async fn send_commit(&self, token: i64, payload: &[u8]) -> Result<(), CoordinatorError> {
        self.call(Verb::PaxosCommit, token, payload).await.map(drop)
    }

    /// The row hashes of this replica's stored copies of `command`'s
    /// partitions (its clustering is ignored: every row).
    pub(crate) async fn row_hashes(
        &self,
        command: &ReadCommand,
    ) -> Result<Vec<Option<wire::RowHashes>>, CoordinatorError> {
        let PartitionSelection::Keys(keys) = &command.partitions else {
            unreachable!("row hashes are asked of named partitions");
        };
        if self.is_local() {
            return row_hashes_local(command.table, keys.clone()).await;
        }
        let answer =
            self.call(Verb::RepairRowHashes, Self::token_of(command), &wire::encode_read_command(command)).await?;
        let hashes = wire::decode_row_hashes(&answer)
            .map_err(|e| CoordinatorError::Remote(format!("a replica's row hashes: {e}")))?;
        if hashes.len() != keys.len() {
            return Err(CoordinatorError::Remote(format!(
                "{} partitions' row hashes for {} keys",
                hashes.len(),
                keys.len()
            )));
        }
        Ok(hashes)
    }

    /// The stored partitions of a command naming its keys.
    pub(crate) async fn read_raw(&self, command: &ReadCommand) -> Result<Vec<Option<Partition>>, CoordinatorError> {
        let PartitionSelection::Keys(keys) = &command.partitions else {
            unreachable!("raw reads name their partitions");
        };
        if self.is_local() {
            return read_raw_local(command.table, keys.clone(), command.clustering.clone()).await;
        }
        let answer = self.call(Verb::ReadRaw, Self::token_of(command), &wire::encode_read_command(command)).await?;
        let partitions =
            wire::decode_partitions(&answer).map_err(|e| CoordinatorError::Remote(format!("a replica's data: {e}")))?;
        if partitions.len() != keys.len() {
            return Err(CoordinatorError::Remote(format!("{} partitions for {} keys", partitions.len(), keys.len())));
        }
        Ok(partitions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range read goes to the shard owning the range's first token (it
    /// once went wherever `this_shard()`, read as a token, fell: shard 0).
    #[test]
    fn a_range_read_goes_to_the_shard_of_its_first_token() {
        let start = i64::MIN + (3 << 50);
        let command = crate::local::tests::range_read(start, start + 10);
        assert_eq!(Target::token_of(&command), start);
        let peer = shoal_schema::sharder::Sharder { nr_shards: 4, ignore_msb: crate::SHARDING_IGNORE_MSB };
        assert_eq!(peer.shard_of(Target::token_of(&command)), 3);
    }

    /// An acknowledgement, a body and an error each read back as they were
    /// sent.
    #[test]
    fn answers_read_back_as_their_outcome() {
        let peer: SocketAddr = "127.0.0.1:7000".parse().expect("an address");
        let ack = encode_answer(Ok(Vec::new()));
        assert_eq!(ack.as_ref(), [OK]);
        assert_eq!(answer_body(peer, ack).expect("ok"), Bytes::new());
        let digest = encode_answer(Ok(vec![1, 2, 3]));
        assert_eq!(answer_body(peer, digest).expect("ok"), Bytes::from_static(&[1, 2, 3]));
        let refused = encode_answer(Err(CoordinatorError::Invalid("bad".to_string())));
        assert!(matches!(answer_body(peer, refused), Err(CoordinatorError::Invalid(m)) if m == "bad"));
    }
}
