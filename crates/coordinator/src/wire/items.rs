//! memcached item operations asked of the replica that leads their keys
//! (`Verb::ItemRun`), and its answers: one outcome, or one error, per
//! operation, in order.
//!
//! Decoding is total, as for every data message (fuzzed:
//! `fuzz/fuzz_targets/data_messages.rs`).

use shoal_replica::{Access, Arith, Fetch, Item, ItemOp, ItemOutcome, ItemTable, Lifetime, Store, StoreMode};
use shoal_storage::codec::{DecodeError, Decoder, Encoder};
use shoal_storage::PartitionPosition;

use super::{
    decode_flag, decode_list, decode_option, decode_position, decode_uuid, encode_list, encode_option, encode_position,
    encode_uuid, finish,
};
use crate::{ConsistencyLevel, ItemLevels};

/// A run of item operations asked of their leader: the table, the levels
/// its replicas answer at, the time left, and the operations in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRunRequest {
    pub table: ItemTable,
    pub levels: ItemLevels,
    pub timeout_ms: u64,
    pub ops: Vec<(PartitionPosition, ItemOp)>,
}

/// An operation's answer from its leader: its outcome, or its error as
/// the kind the data verbs answer (`target`: invalid, overloaded, other)
/// and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemAnswer {
    Done(ItemOutcome),
    Failed { kind: u8, message: String },
}

pub fn encode_item_run(request: &ItemRunRequest) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    let table = &request.table;
    encode_uuid(e, table.id);
    [table.value, table.flags, table.cas].into_iter().for_each(|column| e.var_u64(u64::from(column)));
    e.var_u64(u64::from(request.levels.read.code()));
    e.var_u64(u64::from(request.levels.write.code()));
    e.var_u64(request.timeout_ms);
    encode_list(e, &request.ops, |e, (position, op)| {
        encode_position(e, position);
        encode_op(e, op);
    });
    out
}

pub fn decode_item_run(bytes: &[u8]) -> Result<ItemRunRequest, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let id = decode_uuid(d)?;
    let table = ItemTable { id, value: d.var_u32()?, flags: d.var_u32()?, cas: d.var_u32()? };
    let levels = ItemLevels { read: decode_level(d)?, write: decode_level(d)? };
    let timeout_ms = d.var_u64()?;
    let ops = decode_list(d, |d| Ok((decode_position(d)?, decode_op(d)?)))?;
    finish(d, ItemRunRequest { table, levels, timeout_ms, ops })
}

pub fn encode_item_answers(answers: &[ItemAnswer]) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &mut Encoder { out: &mut out };
    encode_list(e, answers, |e, answer| match answer {
        ItemAnswer::Done(outcome) => {
            e.u8(0);
            encode_outcome(e, outcome);
        }
        ItemAnswer::Failed { kind, message } => {
            e.u8(1);
            e.u8(*kind);
            e.bytes(message.as_bytes());
        }
    });
    out
}

pub fn decode_item_answers(bytes: &[u8]) -> Result<Vec<ItemAnswer>, DecodeError> {
    let d = &mut Decoder::new(bytes);
    let answers = decode_list(d, |d| match d.u8()? {
        0 => Ok(ItemAnswer::Done(decode_outcome(d)?)),
        1 => {
            let kind = d.u8()?;
            let message = String::from_utf8_lossy(&d.bytes()?).into_owned();
            Ok(ItemAnswer::Failed { kind, message })
        }
        _ => Err(d.error("bad item answer")),
    })?;
    finish(d, answers)
}

fn decode_level(d: &mut Decoder) -> Result<ConsistencyLevel, DecodeError> {
    let code = u16::try_from(d.var_u64()?).map_err(|_| d.error("bad consistency level"))?;
    ConsistencyLevel::from_code(code).ok_or_else(|| d.error("bad consistency level"))
}

fn encode_lifetime(e: &mut Encoder, lifetime: &Lifetime) {
    match lifetime {
        Lifetime::Forever => e.u8(0),
        Lifetime::Until(at) => {
            e.u8(1);
            e.var_i64(*at);
        }
    }
}

fn decode_lifetime(d: &mut Decoder) -> Result<Lifetime, DecodeError> {
    match decode_flag(d)? {
        false => Ok(Lifetime::Forever),
        true => Ok(Lifetime::Until(d.var_i64()?)),
    }
}

fn encode_cas(e: &mut Encoder, cas: Option<u64>) {
    encode_option(e, cas.as_ref(), |e, cas| e.var_u64(*cas));
}

fn decode_cas(d: &mut Decoder) -> Result<Option<u64>, DecodeError> {
    decode_option(d, |d| d.var_u64())
}

fn encode_bool(e: &mut Encoder, flag: bool) {
    e.u8(u8::from(flag));
}

fn encode_op(e: &mut Encoder, op: &ItemOp) {
    match op {
        ItemOp::Get(Fetch { touch, vivify, recache_within_s, no_bump }) => {
            e.u8(0);
            encode_option(e, touch.as_ref(), encode_lifetime);
            encode_option(e, vivify.as_ref(), encode_lifetime);
            encode_option(e, recache_within_s.as_ref(), |e, s| e.var_i64(*s));
            encode_bool(e, *no_bump);
        }
        ItemOp::Store(store) => {
            e.u8(1);
            e.u8(match store.mode {
                StoreMode::Set => 0,
                StoreMode::Add => 1,
                StoreMode::Replace => 2,
                StoreMode::Append => 3,
                StoreMode::Prepend => 4,
            });
            e.bytes(&store.value);
            e.var_u64(u64::from(store.flags));
            encode_lifetime(e, &store.lifetime);
            encode_cas(e, store.compare_cas);
            encode_cas(e, store.new_cas);
            encode_option(e, store.vivify.as_ref(), encode_lifetime);
            encode_bool(e, store.stale_if_older);
        }
        ItemOp::Arith(arith) => {
            e.u8(2);
            encode_bool(e, arith.decrement);
            e.var_u64(arith.delta);
            encode_option(e, arith.create.as_ref(), |e, (initial, lifetime)| {
                e.var_u64(*initial);
                encode_lifetime(e, lifetime);
            });
            encode_cas(e, arith.compare_cas);
            encode_cas(e, arith.new_cas);
            encode_option(e, arith.touch.as_ref(), encode_lifetime);
        }
        ItemOp::Delete { compare_cas } => {
            e.u8(3);
            encode_cas(e, *compare_cas);
        }
        ItemOp::Invalidate { compare_cas, lifetime, new_cas } => {
            e.u8(4);
            encode_cas(e, *compare_cas);
            encode_option(e, lifetime.as_ref(), encode_lifetime);
            encode_cas(e, *new_cas);
        }
        ItemOp::Touch { lifetime } => {
            e.u8(5);
            encode_lifetime(e, lifetime);
        }
    }
}

fn decode_op(d: &mut Decoder) -> Result<ItemOp, DecodeError> {
    Ok(match d.u8()? {
        0 => ItemOp::Get(Fetch {
            touch: decode_option(d, decode_lifetime)?,
            vivify: decode_option(d, decode_lifetime)?,
            recache_within_s: decode_option(d, |d| d.var_i64())?,
            no_bump: decode_flag(d)?,
        }),
        1 => {
            let mode = match d.u8()? {
                0 => StoreMode::Set,
                1 => StoreMode::Add,
                2 => StoreMode::Replace,
                3 => StoreMode::Append,
                4 => StoreMode::Prepend,
                _ => return Err(d.error("bad store mode")),
            };
            ItemOp::Store(Store {
                mode,
                value: d.bytes()?,
                flags: d.var_u32()?,
                lifetime: decode_lifetime(d)?,
                compare_cas: decode_cas(d)?,
                new_cas: decode_cas(d)?,
                vivify: decode_option(d, decode_lifetime)?,
                stale_if_older: decode_flag(d)?,
            })
        }
        2 => ItemOp::Arith(Arith {
            decrement: decode_flag(d)?,
            delta: d.var_u64()?,
            create: decode_option(d, |d| Ok((d.var_u64()?, decode_lifetime(d)?)))?,
            compare_cas: decode_cas(d)?,
            new_cas: decode_cas(d)?,
            touch: decode_option(d, decode_lifetime)?,
        }),
        3 => ItemOp::Delete { compare_cas: decode_cas(d)? },
        4 => ItemOp::Invalidate {
            compare_cas: decode_cas(d)?,
            lifetime: decode_option(d, decode_lifetime)?,
            new_cas: decode_cas(d)?,
        },
        5 => ItemOp::Touch { lifetime: decode_lifetime(d)? },
        _ => return Err(d.error("bad item operation")),
    })
}

fn encode_outcome(e: &mut Encoder, outcome: &ItemOutcome) {
    match outcome {
        ItemOutcome::Found(item) => {
            e.u8(0);
            e.bytes(&item.value);
            e.var_u64(u64::from(item.flags));
            e.var_u64(item.cas);
            encode_lifetime(e, &item.lifetime);
            let access = &item.access;
            e.var_i64(access.last_s);
            [access.fetched, access.stale, access.token_sent, item.won].into_iter().for_each(|f| encode_bool(e, f));
        }
        ItemOutcome::Missing => e.u8(1),
        ItemOutcome::Stored { cas } => {
            e.u8(2);
            e.var_u64(*cas);
        }
        ItemOutcome::NotStored => e.u8(3),
        ItemOutcome::Exists => e.u8(4),
        ItemOutcome::Deleted => e.u8(5),
        ItemOutcome::NotANumber => e.u8(6),
    }
}

fn decode_outcome(d: &mut Decoder) -> Result<ItemOutcome, DecodeError> {
    Ok(match d.u8()? {
        0 => {
            let (value, flags, cas, lifetime) = (d.bytes()?, d.var_u32()?, d.var_u64()?, decode_lifetime(d)?);
            let last_s = d.var_i64()?;
            let access =
                Access { last_s, fetched: decode_flag(d)?, stale: decode_flag(d)?, token_sent: decode_flag(d)? };
            ItemOutcome::Found(Item { value, flags, cas, lifetime, access, won: decode_flag(d)? })
        }
        1 => ItemOutcome::Missing,
        2 => ItemOutcome::Stored { cas: d.var_u64()? },
        3 => ItemOutcome::NotStored,
        4 => ItemOutcome::Exists,
        5 => ItemOutcome::Deleted,
        6 => ItemOutcome::NotANumber,
        _ => return Err(d.error("bad item outcome")),
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use uuid::Uuid;

    use super::*;

    fn every_op() -> Vec<ItemOp> {
        let at = Lifetime::Until(1_800_000_000);
        vec![
            ItemOp::Get(Fetch::default()),
            ItemOp::Get(Fetch {
                touch: Some(at),
                vivify: Some(Lifetime::Forever),
                recache_within_s: Some(30),
                no_bump: true,
            }),
            ItemOp::Store(Store {
                mode: StoreMode::Prepend,
                value: Bytes::from_static(b"v"),
                flags: u32::MAX,
                lifetime: at,
                compare_cas: Some(7),
                new_cas: Some(u64::MAX),
                vivify: Some(at),
                stale_if_older: true,
            }),
            ItemOp::Arith(Arith {
                decrement: true,
                delta: 3,
                create: Some((10, at)),
                compare_cas: None,
                new_cas: Some(9),
                touch: Some(Lifetime::Forever),
            }),
            ItemOp::Delete { compare_cas: Some(1) },
            ItemOp::Invalidate { compare_cas: None, lifetime: Some(at), new_cas: Some(2) },
            ItemOp::Touch { lifetime: Lifetime::Until(-5) },
        ]
    }

    #[test]
    fn a_run_and_its_answers_round_trip() {
        let key = Bytes::from_static(b"key");
        let position = PartitionPosition { token: shoal_schema::murmur3_token(&key), key };
        let request = ItemRunRequest {
            table: ItemTable { id: Uuid::from_u128(7), value: 1, flags: 2, cas: 3 },
            levels: ItemLevels { read: ConsistencyLevel::Quorum, write: ConsistencyLevel::All },
            timeout_ms: 2000,
            ops: every_op().into_iter().map(|op| (position.clone(), op)).collect(),
        };
        let encoded = encode_item_run(&request);
        assert_eq!(decode_item_run(&encoded), Ok(request));
        for cut in 0..encoded.len() {
            assert!(decode_item_run(&encoded[..cut]).is_err(), "a run cut at {cut} bytes decodes");
        }
        let access = Access { last_s: -1, fetched: true, stale: false, token_sent: true };
        let item =
            Item { value: Bytes::from_static(b"x"), flags: 4, cas: 5, lifetime: Lifetime::Forever, access, won: true };
        let answers = vec![
            ItemAnswer::Done(ItemOutcome::Found(item)),
            ItemAnswer::Done(ItemOutcome::Stored { cas: 8 }),
            ItemAnswer::Done(ItemOutcome::NotANumber),
            ItemAnswer::Failed { kind: 2, message: "busy".into() },
        ];
        assert_eq!(decode_item_answers(&encode_item_answers(&answers)), Ok(answers));
    }
}
