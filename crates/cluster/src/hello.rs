//! The handshake that opens every internode connection. The caller sends a
//! [`Hello`] (the payload of a `Hello` request): its protocol version,
//! cluster name, host id, address and storage port, shard count, and the shard of the callee
//! it wants. The callee checks it ([`Hello::check`]) and answers a
//! [`Welcome`] from that shard, or a failure naming what does not match,
//! and closes. The caller sends nothing else until it is welcomed, so the
//! callee can hand the connection to the wanted shard before reading on.
//!
//! Integers are big-endian; strings are `[u16 length][UTF-8]`, an address
//! `[u8 4 or 16][octets]`. Decoding (on `buf::Reader`) is total.

use std::net::IpAddr;

use bytes::Bytes;
use shoal_buf::{Reader, Short};

use crate::wire::{ip_of, put_ip, put_text, text_of, WireError};
use thiserror::Error;
use uuid::Uuid;

/// The internode protocol this build speaks; a node refuses another.
/// 2: a Paxos prepare carries the rows to read, its promise their data.
/// 3: counter cells hold per-replica shards, and counter writes are led
/// by one replica (`CounterMutation`).
/// 4: read digests and repair hashes are 128-bit xxh3 (16 bytes, not 8).
/// 5: writes to another data center are forwarded (`MutationForward`,
/// `MutationRelay`, `MutationDone`), and frames may be one-way.
pub const PROTOCOL_VERSION: u16 = 5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub cluster_name: String,
    pub host_id: Uuid,
    /// The caller's listen address and storage port: where it answers.
    pub address: IpAddr,
    pub storage_port: u16,
    pub shard_count: u16,
    pub from_shard: u16,
    pub to_shard: u16,
}

/// The callee's answer to an acceptable [`Hello`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    pub host_id: Uuid,
    pub shard_count: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HelloError {
    #[error("malformed handshake: {0}")]
    Malformed(&'static str),
    #[error("malformed handshake: {0}")]
    Short(#[from] Short),
    #[error("malformed handshake: {0}")]
    Wire(#[from] WireError),
    #[error("internode protocol version {theirs} is not this node's {ours}")]
    Version { theirs: u16, ours: u16 },
    #[error("cluster name '{theirs}' is not this node's '{ours}'")]
    ClusterName { theirs: String, ours: String },
    #[error("shard {to_shard} asked for, but this node has {shard_count} shard(s)")]
    NoSuchShard { to_shard: u16, shard_count: u16 },
    #[error("the caller has this node's own host id {0}")]
    SameHostId(Uuid),
}

impl Hello {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.version.to_be_bytes());
        put_text(out, &self.cluster_name);
        out.extend_from_slice(self.host_id.as_bytes());
        put_ip(out, self.address);
        for n in [self.storage_port, self.shard_count, self.from_shard, self.to_shard] {
            out.extend_from_slice(&n.to_be_bytes());
        }
    }

    pub fn decode(payload: Bytes) -> Result<Hello, HelloError> {
        let mut r = Reader::new(&payload);
        let version = r.be_u16("version")?;
        let cluster_name = text_of(&mut r)?;
        let host_id = Uuid::from_bytes(r.array("host id")?);
        let address = ip_of(&mut r)?;
        let storage_port = r.be_u16("storage port")?;
        let shard_count = r.be_u16("shard count")?;
        let from_shard = r.be_u16("from shard")?;
        let to_shard = r.be_u16("to shard")?;
        if !r.is_empty() {
            return Err(HelloError::Malformed("trailing bytes"));
        }
        Ok(Hello { version, cluster_name, host_id, address, storage_port, shard_count, from_shard, to_shard })
    }

    /// Whether a node of `cluster_name`, `host_id` and `shard_count`
    /// accepts this caller.
    pub fn check(&self, cluster_name: &str, host_id: Uuid, shard_count: u16) -> Result<(), HelloError> {
        if self.version != PROTOCOL_VERSION {
            return Err(HelloError::Version { theirs: self.version, ours: PROTOCOL_VERSION });
        }
        if self.cluster_name != cluster_name {
            return Err(HelloError::ClusterName { theirs: self.cluster_name.clone(), ours: cluster_name.to_string() });
        }
        if self.to_shard >= shard_count {
            return Err(HelloError::NoSuchShard { to_shard: self.to_shard, shard_count });
        }
        if self.host_id == host_id {
            return Err(HelloError::SameHostId(host_id));
        }
        Ok(())
    }
}

impl Welcome {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.host_id.as_bytes());
        out.extend_from_slice(&self.shard_count.to_be_bytes());
    }

    pub fn decode(payload: Bytes) -> Result<Welcome, HelloError> {
        let mut r = Reader::new(&payload);
        let welcome = Welcome { host_id: Uuid::from_bytes(r.array("host id")?), shard_count: r.be_u16("shard count")? };
        if !r.is_empty() {
            return Err(HelloError::Malformed("trailing bytes"));
        }
        if welcome.shard_count == 0 {
            return Err(HelloError::Malformed("zero shards"));
        }
        Ok(welcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            cluster_name: "Shoal Cluster".to_string(),
            host_id: Uuid::from_u128(1),
            address: IpAddr::from([127, 0, 0, 2]),
            storage_port: 7000,
            shard_count: 2,
            from_shard: 1,
            to_shard: 0,
        }
    }

    fn encoded(h: &Hello) -> Bytes {
        let mut out = Vec::new();
        h.encode(&mut out);
        Bytes::from(out)
    }

    #[test]
    fn hellos_and_welcomes_round_trip() {
        let mut v6 = hello();
        v6.address = IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]);
        for h in [hello(), v6] {
            assert_eq!(Hello::decode(encoded(&h)), Ok(h));
        }
        let w = Welcome { host_id: Uuid::from_u128(9), shard_count: 3 };
        let mut out = Vec::new();
        w.encode(&mut out);
        assert_eq!(Welcome::decode(Bytes::from(out)), Ok(w));
    }

    #[test]
    fn every_truncation_and_extension_is_malformed() {
        let wire = encoded(&hello());
        for len in 0..wire.len() {
            assert!(
                matches!(
                    Hello::decode(wire.slice(..len)),
                    Err(HelloError::Malformed(_) | HelloError::Short(_) | HelloError::Wire(_))
                ),
                "{len}"
            );
        }
        let mut longer = wire.to_vec();
        longer.push(0);
        assert_eq!(Hello::decode(Bytes::from(longer)), Err(HelloError::Malformed("trailing bytes")));
    }

    #[test]
    fn checks_name_what_does_not_match() {
        let me = Uuid::from_u128(2);
        assert_eq!(hello().check("Shoal Cluster", me, 2), Ok(()));
        assert!(matches!(hello().check("Other", me, 2), Err(HelloError::ClusterName { .. })));
        assert!(matches!(hello().check("Shoal Cluster", me, 0), Err(HelloError::NoSuchShard { .. })));
        assert!(matches!(hello().check("Shoal Cluster", Uuid::from_u128(1), 2), Err(HelloError::SameHostId(_))));
        let old = Hello { version: 0, ..hello() };
        assert!(matches!(old.check("Shoal Cluster", me, 2), Err(HelloError::Version { .. })));
    }
}
