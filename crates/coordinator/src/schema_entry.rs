//! A schema change as group 0 carries it: the change to announce to
//! clients, and the whole next schema as the schema file's text (which
//! keeps table and column ids, so every node installs the same schema).
//!
//! `[u8 kind][u8 target][u32+text]...[u32+schema text]`, big-endian
//! lengths. Decoding is total: the bytes come from the Raft log and peers.

use shoal_buf::Reader;
use shoal_schema::{SchemaChange, SchemaChangeKind, SchemaChangeTarget};

const KEYSPACE: u8 = 1;
const TABLE: u8 = 2;
const TYPE: u8 = 3;

pub fn encode(change: &SchemaChange, schema_text: &str) -> Vec<u8> {
    let mut out = vec![match change.kind {
        SchemaChangeKind::Created => 1,
        SchemaChangeKind::Updated => 2,
        SchemaChangeKind::Dropped => 3,
    }];
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
    };
    for text in texts.into_iter().chain([schema_text]) {
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    out
}

pub fn decode(bytes: &[u8]) -> Result<(SchemaChange, String), String> {
    let mut r = Reader::new(bytes);
    let kind = match r.u8("change kind").map_err(|e| e.to_string())? {
        1 => SchemaChangeKind::Created,
        2 => SchemaChangeKind::Updated,
        3 => SchemaChangeKind::Dropped,
        other => return Err(format!("unknown schema change kind {other}")),
    };
    let target = r.u8("change target").map_err(|e| e.to_string())?;
    let mut text = || -> Result<String, String> {
        let len = r.be_i32("text length").map_err(|e| e.to_string())? as u32 as usize;
        let bytes = r.take(len, "text").map_err(|e| e.to_string())?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "text is not UTF-8".to_string())
    };
    let target = match target {
        KEYSPACE => SchemaChangeTarget::Keyspace(text()?),
        TABLE => SchemaChangeTarget::Table { keyspace: text()?, table: text()? },
        TYPE => SchemaChangeTarget::Type { keyspace: text()?, name: text()? },
        other => return Err(format!("unknown schema change target {other}")),
    };
    let schema_text = text()?;
    if !r.is_empty() {
        return Err("trailing bytes after the schema".to_string());
    }
    Ok((SchemaChange { kind, target }, schema_text))
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
        assert_eq!(decode(&bytes), Ok((change, "CREATE KEYSPACE ks ...".to_string())));
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "{len}");
        }
    }
}
