//! The data verbs between nodes: what a replica answers when another
//! node's coordinator asks (handlers registered on every shard by
//! [`register`]), and how a coordinator asks ([`Target`]).
//!
//! A replica's answer is `[u8 outcome][body]`: 0 and the payload, or an
//! error as a message — 1 invalid (the client's to fix), 2 overloaded, 3
//! any other — so a coordinator returns the replica's error as the kind it
//! is. A request that gets no answer (connection lost, timeout) is a
//! replica that did not answer, which consistency levels count.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use shoal_cluster::messaging::{self, Caller};
use shoal_cluster::verb::Verb;
use shoal_replica::{Ballot, Mutation, PartitionSelection, Promise, ReadCommand, ReadResult};
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};
use uuid::Uuid;

use crate::proxy::{mutate_local, read_local, read_raw_local, truncate_local};
use crate::shards::first_token;
use crate::timeouts::{deadline, timeouts};
use crate::topology::Topology;
use crate::wire::PaxosPrepare;
use crate::{paxos, wire, ConsistencyLevel, CoordinatorError, WriteType};

const OK: u8 = 0;
const INVALID: u8 = 1;
const OVERLOADED: u8 = 2;
const FAILED: u8 = 3;

/// Registers the data verbs' handlers on the calling shard.
pub fn register() {
    messaging::register(Verb::Mutation, handler(handle_mutation));
    messaging::register(Verb::CounterMutation, handler(crate::counter_write::serve));
    messaging::register(Verb::ItemRun, handler(crate::items::serve));
    messaging::register(Verb::ReadData, handler(handle_read_data));
    messaging::register(Verb::ReadDigest, handler(handle_read_digest));
    messaging::register(Verb::ReadRaw, handler(handle_read_raw));
    messaging::register(Verb::PaxosPrepare, handler(handle_paxos_prepare));
    messaging::register(Verb::PaxosAccept, handler(handle_paxos_accept));
    messaging::register(Verb::PaxosCommit, handler(handle_paxos_commit));
    messaging::register(Verb::Truncate, handler(handle_truncate));
    messaging::register(Verb::StreamRead, handler(crate::streaming::serve_read));
    messaging::register(Verb::Stream, handler(crate::streaming::serve_stream));
    messaging::register(Verb::RepairHashes, handler(crate::repair::serve_hashes));
    messaging::register(Verb::RepairRowHashes, handler(handle_row_hashes));
    messaging::register(
        Verb::BatchStore,
        handler(|payload: Bytes| async move { crate::batchlog::hold(&payload).map(|()| Vec::new()) }),
    );
    messaging::register(
        Verb::BatchRemove,
        handler(|payload: Bytes| async move {
            let id =
                Uuid::from_slice(&payload).map_err(|_| CoordinatorError::Invalid("a batch id is 16 bytes".into()))?;
            crate::batchlog::forget(id);
            Ok(Vec::new())
        }),
    );
}

async fn handle_truncate(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let table = Uuid::from_slice(&payload).map_err(|_| CoordinatorError::Invalid("a truncate names a table".into()))?;
    truncate_local(table, deadline(timeouts().truncate)).await?;
    Ok(Vec::new())
}

fn handler<F, Fut>(handle: F) -> messaging::Handler
where
    F: Fn(Bytes) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<Vec<u8>, CoordinatorError>> + 'static,
{
    let handle = Rc::new(handle);
    Rc::new(move |_caller: Caller, payload: Bytes| {
        let handle = Rc::clone(&handle);
        async move {
            let mut answer = Vec::new();
            match handle(payload).await {
                Ok(body) => {
                    answer.push(OK);
                    answer.extend_from_slice(&body);
                }
                Err(e) => {
                    answer.push(error_kind(&e));
                    answer.extend_from_slice(e.to_string().as_bytes());
                }
            }
            Ok(Bytes::from(answer))
        }
        .boxed_local()
    })
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

pub(crate) fn malformed(e: shoal_storage::codec::DecodeError) -> CoordinatorError {
    CoordinatorError::Invalid(format!("malformed data message: {e}"))
}

async fn handle_mutation(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let mutation = wire::decode_mutation(&payload).map_err(malformed)?;
    let deadline = deadline(timeouts().write);
    mutate_local(mutation, ConsistencyLevel::One, WriteType::Simple, deadline).await?;
    Ok(Vec::new())
}

async fn handle_read_data(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let command = wire::decode_read_command(&payload).map_err(malformed)?;
    let result = read_local(command, ConsistencyLevel::One, deadline(timeouts().range)).await?;
    Ok(wire::encode_read_result(&result))
}

async fn handle_read_digest(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let command = wire::decode_read_command(&payload).map_err(malformed)?;
    let result = read_local(command, ConsistencyLevel::One, deadline(timeouts().range)).await?;
    Ok(digest(&result).to_be_bytes().to_vec())
}

/// A read command that must name its partitions (a raw read, row
/// hashes): its table, keys and clustering ranges.
fn keyed_command(payload: &[u8]) -> Result<(Uuid, Vec<PartitionPosition>, Vec<ClusteringRange>), CoordinatorError> {
    let command = wire::decode_read_command(payload).map_err(malformed)?;
    let PartitionSelection::Keys(keys) = command.partitions else {
        return Err(CoordinatorError::Invalid("raw reads and row hashes name their partitions".to_string()));
    };
    Ok((command.table, keys, command.clustering))
}

async fn handle_read_raw(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (table, keys, clustering) = keyed_command(&payload)?;
    Ok(wire::encode_partitions(&read_raw_local(table, keys, clustering).await?))
}

async fn handle_row_hashes(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (table, keys, _) = keyed_command(&payload)?;
    Ok(wire::encode_row_hashes(&row_hashes_local(table, keys).await?))
}

/// The [`wire::RowHashes`] of this node's stored copies of `keys`.
async fn row_hashes_local(
    table: Uuid,
    keys: Vec<PartitionPosition>,
) -> Result<Vec<Option<wire::RowHashes>>, CoordinatorError> {
    let partitions = read_raw_local(table, keys, vec![ClusteringRange::all()]).await?;
    Ok(partitions.iter().map(|p| p.as_ref().map(wire::RowHashes::of)).collect())
}

async fn handle_paxos_prepare(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let prepare = wire::decode_paxos_prepare(&payload).map_err(malformed)?;
    Ok(wire::encode_promise(&paxos::prepare_local(prepare).await?))
}

/// Answers `[u8 1]` when accepted, `[u8 0]` when a higher ballot was
/// promised.
async fn handle_paxos_accept(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (ballot, mutation) = wire::decode_paxos_proposal(&payload).map_err(malformed)?;
    Ok(vec![u8::from(paxos::accept_local(mutation, ballot).await?)])
}

async fn handle_paxos_commit(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (ballot, mutation) = wire::decode_paxos_proposal(&payload).map_err(malformed)?;
    paxos::commit_local(mutation, ballot).await?;
    Ok(Vec::new())
}

/// A digest of a read's rows: equal rows give equal digests on every node
/// ([`wire::digest_of`] the rows' encoding).
pub(crate) fn digest(result: &ReadResult) -> u128 {
    wire::digest_of(&wire::encode_read_result(result))
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

    async fn call(&self, verb: Verb, token: i64, payload: &[u8]) -> Result<Bytes, CoordinatorError> {
        let address = self.address()?;
        let shard = self.topology.shard_on(self.host, token);
        let answer = messaging::request(address, shard, verb, payload)
            .await
            .map_err(|e| CoordinatorError::Remote(e.to_string()))?;
        answer_body(address, answer)
    }

    /// Applies `mutation` (`payload`: its encoding) on this replica.
    pub(crate) async fn mutate(
        &self,
        mutation: &Mutation,
        payload: &[u8],
        write_type: WriteType,
        deadline: Instant,
    ) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return mutate_local(mutation.clone(), ConsistencyLevel::One, write_type, deadline).await;
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
            return read_local(command.clone(), ConsistencyLevel::One, deadline).await;
        }
        let answer = self.call(Verb::ReadData, Self::token_of(command), &wire::encode_read_command(command)).await?;
        wire::decode_read_result(&answer).map_err(|e| CoordinatorError::Remote(format!("a replica's rows: {e}")))
    }

    pub(crate) async fn read_digest(&self, command: &ReadCommand, deadline: Instant) -> Result<u128, CoordinatorError> {
        if self.is_local() {
            return Ok(digest(&read_local(command.clone(), ConsistencyLevel::One, deadline).await?));
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
            return crate::batchlog::hold(payload);
        }
        self.call(Verb::BatchStore, 0, payload).await.map(drop)
    }

    /// Has this node forget a batch it holds.
    pub(crate) async fn remove_batch(&self, id: Uuid) -> Result<(), CoordinatorError> {
        if self.is_local() {
            crate::batchlog::forget(id);
            return Ok(());
        }
        self.call(Verb::BatchRemove, 0, id.as_bytes()).await.map(drop)
    }

    /// Asks this replica to promise a ballot.
    pub(crate) async fn paxos_prepare(&self, prepare: &PaxosPrepare) -> Result<Promise, CoordinatorError> {
        if self.is_local() {
            return paxos::prepare_local(prepare.clone()).await;
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
            return paxos::accept_local(mutation.clone(), ballot).await;
        }
        match self.call(Verb::PaxosAccept, mutation.position.token, payload).await?.as_ref() {
            [accepted @ (0 | 1)] => Ok(*accepted == 1),
            other => Err(CoordinatorError::Remote(format!("an accept answered {} bytes", other.len()))),
        }
    }

    /// Has this replica apply a chosen proposal (`payload`: its encoding
    /// with `ballot`) and record it committed.
    pub(crate) async fn paxos_commit(
        &self,
        mutation: &Mutation,
        ballot: Ballot,
        payload: &[u8],
    ) -> Result<(), CoordinatorError> {
        if self.is_local() {
            return paxos::commit_local(mutation.clone(), ballot).await;
        }
        self.call(Verb::PaxosCommit, mutation.position.token, payload).await.map(drop)
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
    use std::sync::mpsc;
    use std::time::Duration;

    use shoal_schema::token::murmur3_token;

    use super::*;

    /// A peer's mutation whose token is not its key's is answered with an
    /// error (it once reached an assertion that panicked the handler,
    /// leaving the peer unanswered).
    #[test]
    fn a_wrong_token_from_a_peer_is_answered_as_an_error() {
        let key = bytes::Bytes::from_static(b"k");
        let position = PartitionPosition { token: murmur3_token(&key).wrapping_add(1), key };
        let mutation =
            Mutation { table: Uuid::from_u128(7), position, update: Default::default(), list_ops: Vec::new() };
        let payload = Bytes::from(wire::encode_mutation(&mutation));
        let (answered, answer) = mpsc::channel();
        let _shards = shoal_runtime::start_shards(1, None, move |_| {
            let (payload, answered) = (payload.clone(), answered.clone());
            async move {
                let caller = Caller { host_id: Uuid::from_u128(2), address: ([127, 0, 0, 2], 7000).into(), shard: 0 };
                let _ = answered.send(handler(handle_mutation)(caller, payload).await);
            }
        });
        let answer = answer.recv_timeout(Duration::from_secs(10)).expect("the handler answers");
        let answer = answer.expect("data verbs answer errors in their payload");
        let (outcome, message) = answer.split_first().expect("an outcome byte");
        let message = String::from_utf8_lossy(message);
        assert_eq!(*outcome, FAILED, "{message}");
        assert!(message.contains("is not its key's token"), "{message}");
    }

    /// A range read goes to the shard owning the range's first token (it
    /// once went wherever `this_shard()`, read as a token, fell: shard 0).
    #[test]
    fn a_range_read_goes_to_the_shard_of_its_first_token() {
        let start = i64::MIN + (3 << 50);
        let command = crate::proxy::tests::range_read(start, start + 10);
        assert_eq!(Target::token_of(&command), start);
        let peer = shoal_schema::sharder::Sharder { nr_shards: 4, ignore_msb: crate::SHARDING_IGNORE_MSB };
        assert_eq!(peer.shard_of(Target::token_of(&command)), 3);
    }
}
