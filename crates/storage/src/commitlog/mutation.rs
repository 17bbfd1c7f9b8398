//! A commitlog entry's payload: one partition update of one table —
//! table id (16 bytes), token (8, big-endian), key, then the partition in
//! [`crate::codec`]'s encoding.

use uuid::Uuid;

use crate::codec::{self, DecodeError, Decoder, Encoder};
use crate::partition::{Partition, PartitionPosition, PartitionUpdate, Tombstone};
use crate::single_row::RowCells;

pub fn encode_mutation(out: &mut Vec<u8>, table: Uuid, position: &PartitionPosition, update: &PartitionUpdate) {
    let start = out.len();
    codec::encode_partition(&mut encode_position(out, table, position), update);
    // Pair assertion: what replay will read back is what was appended.
    // Debug builds only (every test, the model test, fuzzing): decoding
    // every write again would double its encoding cost in production.
    debug_assert!(
        decode_mutation(&out[start..]).is_ok_and(|(t, p, u)| t == table && &p == position && &u == update),
        "a commitlog entry must decode to the mutation appended"
    );
}

/// [`encode_mutation`] of `update`, given `encoded`, the partition's
/// encoding as it came (a replica's write received from its coordinator):
/// copied, not encoded again. `encoded` must be `update`'s encoding, or
/// what decodes to `update`.
pub fn encode_received_mutation(
    out: &mut Vec<u8>,
    table: Uuid,
    position: &PartitionPosition,
    update: &PartitionUpdate,
    encoded: &[u8],
) {
    let start = out.len();
    encode_position(out, table, position).out.extend_from_slice(encoded);
    // Pair assertion, as for any entry (debug builds only).
    debug_assert!(
        decode_mutation(&out[start..]).is_ok_and(|(t, p, u)| t == table && &p == position && &u == update),
        "a commitlog entry must decode to the mutation appended"
    );
}

/// [`encode_mutation`] of [`RowCells::to_partition`], written from the
/// cells as they lie (a memcached `set`): the same bytes, so replay reads
/// it as any other entry.
pub fn encode_row_mutation(out: &mut Vec<u8>, table: Uuid, position: &PartitionPosition, row: &RowCells) {
    let start = out.len();
    codec::encode_single_row_partition(
        &mut encode_position(out, table, position),
        row.timestamp,
        row.expiry,
        row.cells,
    );
    debug_assert!(
        decode_mutation(&out[start..]).is_ok_and(|(t, p, u)| t == table && &p == position && u == row.to_partition()),
        "a commitlog entry must decode to the row appended"
    );
}

/// [`encode_mutation`] of a partition holding `tombstone` alone (a
/// memcached `delete`), written without building the `Partition`.
pub fn encode_tombstone_mutation(out: &mut Vec<u8>, table: Uuid, position: &PartitionPosition, tombstone: Tombstone) {
    let start = out.len();
    codec::encode_tombstone_partition(&mut encode_position(out, table, position), tombstone);
    debug_assert!(
        decode_mutation(&out[start..]).is_ok_and(|(t, p, u)| t == table
            && &p == position
            && u == Partition { tombstone: Some(tombstone), ..Partition::default() }),
        "a commitlog entry must decode to the tombstone appended"
    );
}

/// The entry's table id, token and key; the partition follows.
fn encode_position<'a>(out: &'a mut Vec<u8>, table: Uuid, position: &PartitionPosition) -> Encoder<'a> {
    out.extend_from_slice(table.as_bytes());
    out.extend_from_slice(&position.token.to_be_bytes());
    let mut e = Encoder { out };
    e.bytes(&position.key);
    e
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::partition::Expiry;

    #[test]
    fn a_row_entry_is_the_entry_of_its_partition() {
        let table = Uuid::from_u128(7);
        let position = PartitionPosition { token: -42, key: Bytes::from_static(b"key") };
        let value = vec![b'x'; 1024];
        let flags = 5i64.to_be_bytes();
        let cells: [(u32, &[u8]); 4] = [(1, &value), (2, &flags), (3, b""), (300, b"id beyond one byte")];
        for expiry in [None, Some(Expiry { ttl_s: 60, expires_at_s: 1_700_000_060 })] {
            let row = RowCells { timestamp: 1_700_000_000_000_000, expiry, cells: &cells };
            let (mut direct, mut general) = (Vec::new(), Vec::new());
            encode_row_mutation(&mut direct, table, &position, &row);
            encode_mutation(&mut general, table, &position, &row.to_partition());
            assert_eq!(direct, general);
        }
    }

    #[test]
    fn a_tombstone_entry_is_the_entry_of_its_partition() {
        let table = Uuid::from_u128(7);
        let position = PartitionPosition { token: 3, key: Bytes::from_static(b"key") };
        // The longest varints too: the entry is gathered on the stack.
        let times = [(0, 1_700_000_000), (1_700_000_000_000_000, 1_700_000_000), (-5, 0), (i64::MIN, i64::MAX)];
        for (timestamp, deletion_time_s) in times {
            let tombstone = Tombstone { timestamp, deletion_time_s };
            let (mut direct, mut general) = (Vec::new(), Vec::new());
            encode_tombstone_mutation(&mut direct, table, &position, tombstone);
            let partition = Partition { tombstone: Some(tombstone), ..Partition::default() };
            encode_mutation(&mut general, table, &position, &partition);
            assert_eq!(direct, general);
        }
    }

    #[test]
    fn a_received_entry_is_the_entry_of_its_partition() {
        let table = Uuid::from_u128(7);
        let position = PartitionPosition { token: 9, key: Bytes::from_static(b"key") };
        let cells: [(u32, &[u8]); 2] = [(1, b"value"), (4, &[0; 8])];
        let update = RowCells { timestamp: 1_700_000_000_000_000, expiry: None, cells: &cells }.to_partition();
        let mut encoded = Vec::new();
        codec::encode_partition(&mut Encoder { out: &mut encoded }, &update);
        let (mut received, mut general) = (Vec::new(), Vec::new());
        encode_received_mutation(&mut received, table, &position, &update, &encoded);
        encode_mutation(&mut general, table, &position, &update);
        assert_eq!(received, general);
    }
}
