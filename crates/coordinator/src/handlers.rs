//! Other nodes' requests of the data verbs, answered on every shard: the
//! registration of each verb's handler ([`register`]), which decodes the
//! request, runs this node's half of it — the local halves
//! ([`crate::local`], [`crate::held_batches`]), or an executor a peer may
//! ask this node to run (lead a counter write or a run of memcached
//! items, stream, hash for repair) —
//! and encodes the answer ([`crate::target::encode_answer`]).
//!
//! The top of the coordinator's module graph: nothing in the crate calls
//! into it but `start_shard`.

use std::future::{ready, Future};
use std::rc::Rc;

use bytes::Bytes;

use futures_util::future::Either;
use futures_util::{FutureExt, TryFutureExt};
use shoal_cluster::messaging::{self, Caller};
use shoal_cluster::verb::Verb;
use shoal_replica::PartitionSelection;
use shoal_storage::{ClusteringRange, PartitionPosition};
use uuid::Uuid;

use crate::local::{
    accept_local, commit_local, digest, mutate_received, prepare_local, read_local, read_raw_local, row_hashes_local,
    truncate_local,
};
use crate::target::{encode_answer, malformed};
use crate::timeouts::{deadline, timeouts};
use crate::{held_batches, wire, ConsistencyLevel, CoordinatorError};

/// Registers the data verbs' handlers on the calling shard.
pub fn register() {
    messaging::register(Verb::Mutation, handler(handle_mutation));
    messaging::register(Verb::MutationForward, handler(crate::forwarding::serve_forward));
    messaging::register(Verb::MutationRelay, handler(crate::forwarding::serve_relay));
    messaging::register(Verb::MutationDone, handler(crate::forwarding::serve_done));
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
        handler(|payload: Bytes| async move { held_batches::hold(&payload).map(|()| Vec::new()) }),
    );
    messaging::register(
        Verb::BatchRemove,
        handler(|payload: Bytes| async move {
            let id =
                Uuid::from_slice(&payload).map_err(|_| CoordinatorError::Invalid("a batch id is 16 bytes".into()))?;
            held_batches::forget(id);
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
    // The handler's future is boxed as it is made, and mapped in place:
    // not moved into an `async` block's state on its first poll (a copy
    // of a replica's whole apply or read per request).
    Rc::new(move |_caller: Caller, payload: Bytes| {
        handle(payload).map(|answer| Ok(encode_answer(answer))).boxed_local()
    })
}

/// A plain function, not an `async` one: its future is the apply's own
/// (see [`crate::local`]), not one holding the decoded mutation beside it.
/// The frame's bytes (and the read buffer they lie in) are let go once
/// decoded into a copy, before the write waits.
fn handle_mutation(payload: Bytes) -> impl Future<Output = Result<Vec<u8>, CoordinatorError>> {
    match wire::decode_received_mutation(&payload).map_err(malformed) {
        Ok((mutation, partition)) => {
            Either::Left(mutate_received(mutation, partition, deadline(timeouts().write)).map_ok(|()| Vec::new()))
        }
        Err(e) => Either::Right(ready(Err(e))),
    }
}

async fn handle_read_data(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let command = wire::decode_read_command(&payload).map_err(malformed)?;
    drop(payload);
    let result = read_local(&command, ConsistencyLevel::One, deadline(timeouts().range)).await?;
    Ok(wire::encode_read_result(&result))
}

async fn handle_read_digest(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let command = wire::decode_read_command(&payload).map_err(malformed)?;
    drop(payload);
    let result = read_local(&command, ConsistencyLevel::One, deadline(timeouts().range)).await?;
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

async fn handle_paxos_prepare(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let prepare = wire::decode_paxos_prepare(&payload).map_err(malformed)?;
    Ok(wire::encode_promise(&prepare_local(prepare).await?))
}

/// Answers `[u8 1]` when accepted, `[u8 0]` when a higher ballot was
/// promised.
async fn handle_paxos_accept(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (ballot, mutation) = wire::decode_paxos_proposal(&payload).map_err(malformed)?;
    Ok(vec![u8::from(accept_local(mutation, ballot).await?)])
}

async fn handle_paxos_commit(payload: Bytes) -> Result<Vec<u8>, CoordinatorError> {
    let (ballot, mutation) = wire::decode_paxos_proposal(&payload).map_err(malformed)?;
    commit_local(mutation, ballot).await?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use shoal_replica::Mutation;
    use shoal_schema::token::murmur3_token;

    use super::*;
    use crate::target::FAILED;

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
}
