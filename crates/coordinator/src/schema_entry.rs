//! A schema change as group 0 carries it: the change to announce to
//! clients, and the whole next schema as the schema file's text (which
//! keeps table and column ids, so every node installs the same schema).
//!
//! `[u8 kind][u8 target][u32+text]...[schema]`, big-endian lengths. The
//! schema is zstd-compressed, `[u32 text length][u32+compressed]`, marked
//! by [`COMPRESSED`] in the kind byte: every entry carries the whole
//! schema, so the log between group 0's snapshots grows with the square
//! of the DDL statements run, and schema text compresses about tenfold. (Entries of earlier builds,
//! `[u32+schema text]` without the mark, still decode.) Decoding is total
//! and bounded ([`SCHEMA_BYTES_MAX`]): the bytes come from the Raft log and
//! peers.

use shoal_buf::Reader;
use shoal_schema::{SchemaChange, SchemaChangeKind, SchemaChangeTarget};

const KEYSPACE: u8 = 1;
const TABLE: u8 = 2;
const TYPE: u8 = 3;
const FUNCTION: u8 = 4;
const AGGREGATE: u8 = 5;
/// In the kind byte: the schema text is compressed.
const COMPRESSED: u8 = 0x80;
/// The longest schema text an entry may carry (a decompression bomb is
/// refused before it is inflated).
const SCHEMA_BYTES_MAX: usize = 256 << 20;
/// zstd's level: schema changes are rare, their entries live long.
const ZSTD_LEVEL: i32 = 9;

pub fn encode(change: &SchemaChange, schema_text: &str) -> Vec<u8> {
    let kind = match change.kind {
        SchemaChangeKind::Created => 1,
        SchemaChangeKind::Updated => 2,
        SchemaChangeKind::Dropped => 3,
    };
    let mut out = vec![kind | COMPRESSED];
    let texts: Vec<&str> = match &change.target {
        SchemaChangeTarget::Keyspace(keyspace) => {
            out.push(KEYSPACE);
            vec![keyspace]
        }
        SchemaChangeTarget::Table { keyspace, table } => {
            out.push(TABLE);
            vec![keyspace, table]
        }
        SchemaChangeTarget::Type { keyspace, name } => {
            out.push(TYPE);
            vec![keyspace, name]
        }
        // The name, then each argument type.
        SchemaChangeTarget::Function { keyspace, name, arg_types }
        | SchemaChangeTarget::Aggregate { keyspace, name, arg_types } => {
            let is_function = matches!(change.target, SchemaChangeTarget::Function { .. });
            out.push(if is_function { FUNCTION } else { AGGREGATE });
            out.extend_from_slice(&(arg_types.len() as u32).to_be_bytes());
            [keyspace, name].into_iter().chain(arg_types).map(String::as_str).collect()
        }
    };
    for text in texts {
        put_bytes(&mut out, text.as_bytes());
    }
    assert!(schema_text.len() <= SCHEMA_BYTES_MAX, "a schema of {} bytes is over the limit", schema_text.len());
    // zstd does not fail on bytes in memory at a valid level.
    let compressed = zstd::bulk::compress(schema_text.as_bytes(), ZSTD_LEVEL).expect("zstd compresses in memory");
    out.extend_from_slice(&(schema_text.len() as u32).to_be_bytes());
    put_bytes(&mut out, &compressed);
    out
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

pub fn decode(bytes: &[u8]) -> Result<(SchemaChange, String), String> {
    let mut r = Reader::new(bytes);
    let kind_byte = r.u8("change kind").map_err(|e| e.to_string())?;
    let kind = match kind_byte & !COMPRESSED {
        1 => SchemaChangeKind::Created,
        2 => SchemaChangeKind::Updated,
        3 => SchemaChangeKind::Dropped,
        other => return Err(format!("unknown schema change kind {other}")),
    };
    let target = match r.u8("change target").map_err(|e| e.to_string())? {
        KEYSPACE => SchemaChangeTarget::Keyspace(text(&mut r)?),
        TABLE => SchemaChangeTarget::Table { keyspace: text(&mut r)?, table: text(&mut r)? },
        TYPE => SchemaChangeTarget::Type { keyspace: text(&mut r)?, name: text(&mut r)? },
        target @ (FUNCTION | AGGREGATE) => {
            let count = length(&mut r, "argument count")?;
            let (keyspace, name) = (text(&mut r)?, text(&mut r)?);
            let arg_types = (0..count).map(|_| text(&mut r)).collect::<Result<Vec<_>, _>>()?;
            match target {
                FUNCTION => SchemaChangeTarget::Function { keyspace, name, arg_types },
                _ => SchemaChangeTarget::Aggregate { keyspace, name, arg_types },
            }
        }
        other => return Err(format!("unknown schema change target {other}")),
    };
    let schema_text = if kind_byte & COMPRESSED == 0 {
        text(&mut r)?
    } else {
        let len = length(&mut r, "schema length")?;
        if len > SCHEMA_BYTES_MAX {
            return Err(format!("a schema of {len} bytes is over the limit of {SCHEMA_BYTES_MAX}"));
        }
        let compressed = take(&mut r, "compressed schema")?;
        let inflated = zstd::bulk::decompress(compressed, len).map_err(|e| format!("compressed schema: {e}"))?;
        if inflated.len() != len {
            return Err(format!("the schema inflated to {} bytes, not {len}", inflated.len()));
        }
        String::from_utf8(inflated).map_err(|_| "the schema is not UTF-8".to_string())?
    };
    if !r.is_empty() {
        return Err("trailing bytes after the schema".to_string());
    }
    Ok((SchemaChange { kind, target }, schema_text))
}

fn length(r: &mut Reader, what: &'static str) -> Result<usize, String> {
    Ok(r.be_i32(what).map_err(|e| e.to_string())? as u32 as usize)
}

/// `[u32 length][bytes]`.
fn take<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<&'a [u8], String> {
    let len = length(r, what)?;
    r.take(len, what).map_err(|e| e.to_string())
}

fn text(r: &mut Reader) -> Result<String, String> {
    String::from_utf8(take(r, "text")?.to_vec()).map_err(|_| "text is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip_and_truncations_fail() {
        let change = SchemaChange {
            kind: SchemaChangeKind::Updated,
            target: SchemaChangeTarget::Table { keyspace: "ks".to_string(), table: "t".to_string() },
        };
        let bytes = encode(&change, "CREATE KEYSPACE ks ...");
        assert_eq!(decode(&bytes), Ok((change.clone(), "CREATE KEYSPACE ks ...".to_string())));
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "{len}");
        }
        // An entry of an earlier build: the schema text as it is.
        let mut plain = vec![2, TABLE];
        for text in ["ks", "t", "CREATE KEYSPACE ks ..."] {
            put_bytes(&mut plain, text.as_bytes());
        }
        assert_eq!(decode(&plain), Ok((change, "CREATE KEYSPACE ks ...".to_string())));
    }

    #[test]
    fn function_changes_round_trip() {
        for aggregate in [false, true] {
            let (keyspace, name) = ("ks".to_string(), "f".to_string());
            let arg_types = vec!["int".to_string(), "text".to_string()];
            let target = match aggregate {
                false => SchemaChangeTarget::Function { keyspace, name, arg_types },
                true => SchemaChangeTarget::Aggregate { keyspace, name, arg_types },
            };
            let change = SchemaChange { kind: SchemaChangeKind::Dropped, target };
            let bytes = encode(&change, "schema");
            assert_eq!(decode(&bytes), Ok((change, "schema".to_string())));
            for len in 0..bytes.len() {
                assert!(decode(&bytes[..len]).is_err(), "{len}");
            }
        }
    }

    #[test]
    fn schemas_shrink_and_a_bomb_is_refused() {
        let change =
            SchemaChange { kind: SchemaChangeKind::Created, target: SchemaChangeTarget::Keyspace("ks".into()) };
        let schema: String = (0..200)
            .map(|i| format!("CREATE TABLE ks.t{i} (k int PRIMARY KEY, a text, b int) WITH id = {i:032x};\n"))
            .collect();
        let bytes = encode(&change, &schema);
        assert!(bytes.len() * 5 < schema.len(), "{} bytes for a schema of {}", bytes.len(), schema.len());
        assert_eq!(decode(&bytes).map(|(_, text)| text), Ok(schema));
        // A claimed length over the limit is refused before inflating.
        let mut bomb = vec![1 | COMPRESSED, KEYSPACE];
        put_bytes(&mut bomb, b"ks");
        bomb.extend_from_slice(&u32::MAX.to_be_bytes());
        put_bytes(&mut bomb, &zstd::bulk::compress(&[0u8; 1024], 3).expect("compresses"));
        assert!(decode(&bomb).is_err());
    }
}
