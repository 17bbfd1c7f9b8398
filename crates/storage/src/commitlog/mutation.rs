//! A commitlog entry's payload: one partition update of one table —
//! table id (16 bytes), token (8, big-endian), key, then the partition in
//! [`crate::codec`]'s encoding.

use uuid::Uuid;

use crate::codec::{self, DecodeError, Decoder, Encoder};
use crate::partition::{PartitionPosition, PartitionUpdate};

pub fn encode_mutation(out: &mut Vec<u8>, table: Uuid, position: &PartitionPosition, update: &PartitionUpdate) {
    out.extend_from_slice(table.as_bytes());
    out.extend_from_slice(&position.token.to_be_bytes());
    let mut e = Encoder { out };
    e.bytes(&position.key);
    codec::encode_partition(&mut e, update);
}

pub fn decode_mutation(payload: &[u8]) -> Result<(Uuid, PartitionPosition, PartitionUpdate), DecodeError> {
    let mut d = Decoder::new(payload);
    let table = Uuid::from_slice(d.slice(16)?).map_err(|_| d.error("bad table id"))?;
    let token = d.fixed_i64()?;
    let key = d.bytes()?;
    let update = codec::decode_partition(&mut d)?;
    if !d.is_empty() {
        return Err(d.error("trailing bytes after the mutation"));
    }
    Ok((table, PartitionPosition { token, key }, update))
}
