//! The batches this node holds for other nodes' coordinators (the
//! batchlog's replica side, the local half of `BatchStore` and
//! `BatchRemove`): in memory, per shard ([`BATCHES_BYTES_MAX`]), and in
//! the shard's batch log (a [`crate::side_log`], synced every 10 s;
//! entries are [`encode_batch`]'s bytes), read back when the node starts
//! ([`open`]). Removals are not logged. What a holder does with a batch
//! still held is [`crate::batchlog`]'s.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shoal_replica::Mutation;
use shoal_storage::codec::{DecodeError, Decoder, Encoder};
use shoal_storage::commitlog::Position;
use uuid::Uuid;

use crate::side_log::{self, SideLog};
use crate::{wire, CoordinatorError};

/// Batch bytes a shard holds for coordinators.
pub const BATCHES_BYTES_MAX: usize = 64 << 20;

struct Held {
    stored: Instant,
    mutations: Vec<Mutation>,
    bytes: usize,
    /// Its entry in the batch log, when it is on one.
    logged: Option<Position>,
}

#[derive(Default)]
struct Batchlog {
    held: BTreeMap<Uuid, Held>,
    bytes: usize,
    /// `None` until [`open`] ran (or if it failed): copies in memory only.
    log: Option<Rc<SideLog>>,
}

thread_local! {
    static BATCHLOG: RefCell<Batchlog> = RefCell::default();
}

/// Holds a batch another node coordinates (`payload`: [`encode_batch`]).
pub(crate) fn hold(payload: &[u8]) -> Result<(), CoordinatorError> {
    let (id, mutations) =
        decode_batch(payload).map_err(|e| CoordinatorError::Invalid(format!("malformed batch: {e}")))?;
    BATCHLOG.with(|log| {
        let mut log = log.borrow_mut();
        if log.bytes + payload.len() > BATCHES_BYTES_MAX {
            return Err(CoordinatorError::Overloaded(format!(
                "this node holds {} bytes of batches already; try again later",
                log.bytes
            )));
        }
        let logged = log.log.as_ref().and_then(|side| match side.append(|out| out.extend_from_slice(payload)) {
            Ok(at) => Some(at),
            Err(e) => {
                tracing::warn!("batch {id} is held in memory only: {e}");
                None
            }
        });
        log.bytes += payload.len();
        log.held.insert(id, Held { stored: Instant::now(), mutations, bytes: payload.len(), logged });
        Ok(())
    })
}

/// Opens this shard's batch log in `dir` and holds again the batches it
/// kept (replayed [`crate::batchlog`]'s `REPLAY_AFTER` from now unless their coordinator
/// removes them); call once per shard at start. Without it (or if it
/// fails: logged) copies are kept in memory only.
pub async fn open(dir: &Path) {
    let install = |side| BATCHLOG.with(|log| log.borrow_mut().log = Some(side));
    let keep_again = |entry: &[u8]| {
        if let Err(e) = hold(entry) {
            tracing::error!("a batch in {} is not held again: {e}", dir.display());
        }
    };
    if let Err(e) = side_log::open(dir, install, keep_again).await {
        tracing::error!("the batch log in {}: {e}; batches it held may be lost", dir.display());
    }
}

/// Deletes the batch log's segments no held batch needs.
pub(crate) async fn discard_finished() {
    let Some((side, oldest)) = BATCHLOG.with(|log| {
        let log = log.borrow();
        let side = log.log.clone()?;
        let oldest = log.held.values().filter_map(|held| held.logged).min();
        Some((side, oldest))
    }) else {
        return;
    };
    side.discard_before(oldest).await;
}

/// Forgets a batch whose coordinator finished it.
pub(crate) fn forget(id: Uuid) {
    BATCHLOG.with(|log| {
        let mut log = log.borrow_mut();
        if let Some(held) = log.held.remove(&id) {
            log.bytes -= held.bytes;
        }
    });
}

/// The batches held longer than `after`, whose coordinator did not
/// finish them.
pub(crate) fn due(after: Duration) -> Vec<(Uuid, Vec<Mutation>)> {
    BATCHLOG.with(|log| {
        let log = log.borrow();
        log.held
            .iter()
            .filter(|(_, held)| held.stored.elapsed() > after)
            .map(|(id, held)| (*id, held.mutations.clone()))
            .collect()
    })
}

/// `[16 id][varint count][varint+mutation]...`
pub(crate) fn encode_batch(id: Uuid, mutations: &[Mutation]) -> Vec<u8> {
    let mut out = id.as_bytes().to_vec();
    let e = &mut Encoder { out: &mut out };
    e.var_u64(mutations.len() as u64);
    for m in mutations {
        e.bytes(&wire::encode_mutation(m));
    }
    out
}

pub fn decode_batch(bytes: &[u8]) -> Result<(Uuid, Vec<Mutation>), DecodeError> {
    let d = &mut Decoder::new(bytes);
    let id = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad batch id"))?;
    let count = d.var_u64()?;
    let mut mutations = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(d.remaining()));
    for _ in 0..count {
        let bytes: Bytes = d.bytes()?;
        mutations.push(wire::decode_mutation(&bytes)?);
    }
    if !d.is_empty() {
        return Err(d.error("trailing bytes after the batch"));
    }
    Ok((id, mutations))
}
