//! The disk's capacity and what a request costs of it (Seastar's model,
//! DESIGN.md §6).
//!
//! The disk sustains any mix of reads and writes with
//! `iops_r/iops_r_max + bw_r/bw_r_max + iops_w/iops_w_max + bw_w/bw_w_max <= 1`.
//! A request therefore costs a per-request part (one operation of that
//! direction's IOPS) plus a per-byte part (its bytes of that direction's
//! bandwidth). Costs are expressed in nanoseconds of the shard's share of
//! the disk: a shard owns `1 / shard_count` of every limit, so the cost of
//! a request is the time the shard's slice of the disk is busy with it, and
//! the token bucket refills at exactly one nanosecond per nanosecond.
//!
//! Invariants: every limit is positive; a request costs at least 1 ns.

use std::path::PathBuf;

use thiserror::Error;

/// What the disk can do, as `shoal iotune` measures it (bytes per second
/// and operations per second, ScyllaDB's `io_properties.yaml` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoProperties {
    pub read_iops: u64,
    pub read_bandwidth_bytes_per_s: u64,
    pub write_iops: u64,
    pub write_bandwidth_bytes_per_s: u64,
}

impl IoProperties {
    /// Used when no `io_properties.yaml` is given (the log says to run
    /// iotune): a modest NVMe drive, below what this project's machines
    /// measure (43,000 / 33,000 IOPS, 1.6 / 1.5 GB/s with O_DIRECT), so a
    /// node that never ran iotune neither floods a slower disk by much nor
    /// starves reads that the page cache answers.
    pub const CONSERVATIVE: IoProperties = IoProperties {
        read_iops: 40_000,
        read_bandwidth_bytes_per_s: 1 << 30,
        write_iops: 30_000,
        write_bandwidth_bytes_per_s: 500 << 20,
    };

    /// Each limit divided by `shard_count`: shards split the disk.
    pub fn per_shard(self, shard_count: usize) -> IoProperties {
        assert!(shard_count > 0, "a node has at least one shard");
        let n = shard_count as u64;
        let split = |v: u64| (v / n).max(1);
        IoProperties {
            read_iops: split(self.read_iops),
            read_bandwidth_bytes_per_s: split(self.read_bandwidth_bytes_per_s),
            write_iops: split(self.write_iops),
            write_bandwidth_bytes_per_s: split(self.write_bandwidth_bytes_per_s),
        }
    }

    fn check(self) -> Result<IoProperties, PropertiesError> {
        let fields = [
            ("read_iops", self.read_iops),
            ("read_bandwidth", self.read_bandwidth_bytes_per_s),
            ("write_iops", self.write_iops),
            ("write_bandwidth", self.write_bandwidth_bytes_per_s),
        ];
        match fields.iter().find(|(_, v)| *v == 0) {
            Some((name, _)) => Err(PropertiesError::Zero(name)),
            None => Ok(self),
        }
    }

    /// Reads ScyllaDB's `io_properties.yaml`: the first disk listed.
    pub fn parse_yaml(text: &str) -> Result<IoProperties, PropertiesError> {
        let file: PropertiesFile = serde_yaml::from_str(text).map_err(PropertiesError::Parse)?;
        let disk = file.disks.into_iter().next().ok_or(PropertiesError::NoDisk)?;
        IoProperties {
            read_iops: disk.read_iops,
            read_bandwidth_bytes_per_s: disk.read_bandwidth,
            write_iops: disk.write_iops,
            write_bandwidth_bytes_per_s: disk.write_bandwidth,
        }
        .check()
    }

    /// Reads `path` (a blocking read: call it before the shards start).
    pub fn load(path: &std::path::Path) -> Result<IoProperties, PropertiesError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PropertiesError::Read { path: path.to_path_buf(), source })?;
        IoProperties::parse_yaml(&text)
    }

    /// ScyllaDB's `io_properties.yaml` for one disk mounted at `mountpoint`.
    pub fn render_yaml(self, mountpoint: &str) -> String {
        format!(
            "disks:\n  - mountpoint: {mountpoint}\n    read_iops: {}\n    read_bandwidth: {}\n    write_iops: {}\n    write_bandwidth: {}\n",
            self.read_iops, self.read_bandwidth_bytes_per_s, self.write_iops, self.write_bandwidth_bytes_per_s
        )
    }
}

#[derive(Debug, Error)]
pub enum PropertiesError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("not a valid io_properties.yaml: {0}")]
    Parse(serde_yaml::Error),
    #[error("io_properties.yaml lists no disk")]
    NoDisk,
    #[error("io_properties.yaml: {0} must be positive")]
    Zero(&'static str),
}

#[derive(serde::Deserialize)]
struct PropertiesFile {
    disks: Vec<DiskProperties>,
}

#[derive(serde::Deserialize)]
struct DiskProperties {
    #[serde(rename = "mountpoint")]
    _mountpoint: Option<String>,
    read_iops: u64,
    read_bandwidth: u64,
    write_iops: u64,
    write_bandwidth: u64,
}

/// Which half of the disk's capacity a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

/// Request costs on one shard's slice of the disk.
#[derive(Debug, Clone, Copy)]
pub struct CostModel {
    read_request_ns: u64,
    read_byte_ps: u64,
    write_request_ns: u64,
    write_byte_ps: u64,
}

const NS_PER_S: u64 = 1_000_000_000;
const PS_PER_S: u64 = 1_000_000_000_000;

impl CostModel {
    /// The costs on one shard's slice (`shard` already divided).
    pub fn new(shard: IoProperties) -> CostModel {
        let shard = shard.check().unwrap_or(IoProperties::CONSERVATIVE);
        CostModel {
            read_request_ns: (NS_PER_S / shard.read_iops).max(1),
            read_byte_ps: (PS_PER_S / shard.read_bandwidth_bytes_per_s).max(1),
            write_request_ns: (NS_PER_S / shard.write_iops).max(1),
            write_byte_ps: (PS_PER_S / shard.write_bandwidth_bytes_per_s).max(1),
        }
    }

    /// Nanoseconds of the shard's disk time that a request moving `bytes`
    /// in `direction` costs.
    pub fn cost_ns(&self, direction: Direction, bytes: usize) -> u64 {
        let (request_ns, byte_ps) = match direction {
            Direction::Read => (self.read_request_ns, self.read_byte_ps),
            Direction::Write => (self.write_request_ns, self.write_byte_ps),
        };
        let cost_ns = request_ns.saturating_add((bytes as u64).saturating_mul(byte_ps) / 1_000);
        assert!(cost_ns >= 1, "every request costs something");
        cost_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_costs_its_operation_plus_its_bytes() {
        let disk = IoProperties {
            read_iops: 100_000,
            read_bandwidth_bytes_per_s: 1_000_000_000,
            write_iops: 50_000,
            write_bandwidth_bytes_per_s: 500_000_000,
        };
        let model = CostModel::new(disk);
        assert_eq!(model.cost_ns(Direction::Read, 0), 10_000);
        assert_eq!(model.cost_ns(Direction::Read, 1_000_000), 10_000 + 1_000_000);
        assert_eq!(model.cost_ns(Direction::Write, 4096), 20_000 + 8_192);
        // Two shards: each owns half, so each request costs twice as much.
        let halved = CostModel::new(disk.per_shard(2));
        assert_eq!(halved.cost_ns(Direction::Read, 0), 20_000);
    }

    #[test]
    fn the_yaml_round_trips_in_scyllas_format() {
        let disk = IoProperties::CONSERVATIVE;
        let text = disk.render_yaml("/var/lib/shoal");
        assert!(text.starts_with("disks:\n  - mountpoint: /var/lib/shoal\n    read_iops: 40000\n"));
        assert_eq!(IoProperties::parse_yaml(&text).expect("parses"), disk);
        assert!(matches!(IoProperties::parse_yaml("disks: []"), Err(PropertiesError::NoDisk)));
        let zero = text.replace("write_iops: 30000", "write_iops: 0");
        assert!(matches!(IoProperties::parse_yaml(&zero), Err(PropertiesError::Zero("write_iops"))));
    }
}
