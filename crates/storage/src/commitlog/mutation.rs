//! A commitlog entry's payload: one partition update of one table —
//! table id (16 bytes), token (8, big-endian), key, then the partition in
//! [`crate::codec`]'s encoding.

use uuid::Uuid;

use crate::codec::{self, DecodeError, Decoder, Encoder};
use crate::partition::{PartitionPosition, PartitionUpdate};

pub fn encode_mutation(out: &mut Vec<u8>, table: Uuid, position: &PartitionPosition, update: &PartitionUpdate) {
    let start = out.len();
    out.extend_from_slice(table.as_bytes());
    out.extend_from_slice(&position.token.to_be_bytes());
    let mut e = Encoder { out };
    e.bytes(&position.key);
    codec::encode_partition(&mut e, update);
    // Pair assertion: what replay will read back is what was appended.
    // Debug builds only (every test, the model test, fuzzing): decoding
    // every write again would double its encoding cost in production.
    debug_assert!(
        decode_mutation(&out[start..]).is_ok_and(|(t, p, u)| t == table && &p == position && &u == update),
        "a commitlog entry must decode to the mutation appended"
    );
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
