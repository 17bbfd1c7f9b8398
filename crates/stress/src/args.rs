//! The command line of `shoal stress` (the contract with `bench/` is
//! crates/stress/README.md) and its validation into a [`Config`].
//!
//! [`StressArgs`] is what the user typed; [`Config`] is the same with the
//! protocol-dependent defaults resolved (port, connections) and every bound
//! checked, so the rest of the crate never re-validates. The JSON report's
//! `config` object is [`Config`] serialized, so it records what actually ran.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;

use crate::error::StressError;

/// Wire protocol to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Cql,
    Memcache,
}

/// What each operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    Write,
    Read,
    /// Reads and writes drawn at random in the proportion of `--ratio`.
    Mixed,
}

/// How keys are drawn from `0..keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PopulationKind {
    /// 0, 1, 2, ... by operation index, wrapping.
    Seq,
    Uniform,
    /// Normal around the middle of the range, stdev = keys / 6, clamped.
    Gaussian,
}

/// memcached command family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemcacheDialect {
    /// `set` / `get`.
    Text,
    /// `ms` / `mg`.
    Meta,
}

/// memcache: what a write operation sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemcacheWrite {
    /// `set` / `ms` of the value.
    Set,
    /// `incr <key> 1` / `ma <key>`: needs numeric values (`--numeric-values`) loaded first.
    Incr,
    /// `delete` / `md`.
    Delete,
}

/// The most digits memcached's `incr` accepts in a stored value (a u64).
pub const NUMERIC_VALUE_MAX_BYTES: usize = 20;

/// `--ratio R:W`: reads to writes for the mixed workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub reads: u32,
    pub writes: u32,
}

impl FromStr for Ratio {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (r, w) = s.split_once(':').ok_or_else(|| format!("expected READS:WRITES, e.g. 3:1, got '{s}'"))?;
        let parse = |x: &str| x.trim().parse::<u32>().map_err(|e| format!("bad ratio part '{x}': {e}"));
        let ratio = Ratio { reads: parse(r)?, writes: parse(w)? };
        if ratio.reads == 0 && ratio.writes == 0 {
            return Err("ratio 0:0 has no operations".into());
        }
        Ok(ratio)
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.reads, self.writes)
    }
}

impl Serialize for Ratio {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Options of `shoal stress`.
#[derive(Debug, Clone, clap::Args)]
pub struct StressArgs {
    /// Wire protocol
    #[arg(long, value_enum, default_value_t = Protocol::Cql)]
    pub protocol: Protocol,
    /// Server address
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port [default: 9042 for cql, 11211 for memcache]
    #[arg(long)]
    pub port: Option<u16>,
    /// Operation mix
    #[arg(long, value_enum, default_value_t = WorkloadKind::Write)]
    pub workload: WorkloadKind,
    /// Reads:writes for --workload mixed
    #[arg(long, default_value = "1:1")]
    pub ratio: Ratio,
    /// Key population (seq: 0, 1, 2, ... by operation index, wrapping)
    #[arg(long = "pop", value_enum, default_value_t = PopulationKind::Uniform)]
    pub pop: PopulationKind,
    /// Population size: partition keys 0..N
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Value size in bytes
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// CQL: clustering rows per partition; a write writes one row, a read the whole partition
    #[arg(long, default_value_t = 1)]
    pub rows_per_partition: u32,
    /// Offered rate in ops/s; 0 = as fast as possible. Latency counts from each op's intended start
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// memcache: TCP connections [default: 4]; cql: driver connections per shard [default: 1]
    #[arg(long)]
    pub connections: Option<usize>,
    /// Operations in flight in total [default: 64 for cql; connections x pipeline for memcache, which
    /// is also its most]
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// memcache: requests written in one write per connection before their replies are read
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// memcache command family
    #[arg(long, value_enum, default_value_t = MemcacheDialect::Text)]
    pub memcache_protocol: MemcacheDialect,
    /// memcache: what a write sends
    #[arg(long, value_enum, default_value_t = MemcacheWrite::Set)]
    pub memcache_write: MemcacheWrite,
    /// memcache text protocol: keys asked for by one `get` (a multi-key get; the others are drawn
    /// like the first)
    #[arg(long, default_value_t = 1)]
    pub keys_per_get: usize,
    /// memcache: values are --value-size ASCII zeros (at most 20), so `incr` can count them
    #[arg(long)]
    pub numeric_values: bool,
    /// Measured run length in seconds (after the warm-up) [default: 10 unless --count]
    #[arg(long, conflicts_with = "count")]
    pub duration: Option<f64>,
    /// Stop after this many measured operations (instead of --duration)
    #[arg(long)]
    pub count: Option<u64>,
    /// Seconds of operations run first and not recorded
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Tokio worker threads
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CQL keyspace
    #[arg(long, default_value = "shoal_stress")]
    pub keyspace: String,
    /// CQL table
    #[arg(long, default_value = "kv")]
    pub table: String,
    /// Do not create the keyspace and table
    #[arg(long)]
    pub no_schema: bool,
    /// CQL: the keyspace's replication factor (SimpleStrategy) when created
    #[arg(long, default_value_t = 1)]
    pub replication_factor: u32,
    /// CQL: create the table without SSTable compression. The loader's values
    /// repeat, so compressed they shrink ~9x on disk; a disk-bound run needs
    /// them at full size
    #[arg(long)]
    pub uncompressed: bool,
    /// CQL: consistency level of every operation (ONE, QUORUM, ALL, ...)
    #[arg(long, default_value = "ONE")]
    pub consistency: String,
    /// CQL: writes are conditional, `INSERT ... IF NOT EXISTS` (a lightweight transaction: Paxos
    /// on a cluster), at serial consistency SERIAL
    #[arg(long)]
    pub conditional: bool,
    /// CQL: the table counts, `(pk bigint, ck int, n counter)`: a write is `UPDATE ... SET n = n + 1`,
    /// a read `SELECT n`. Give it a `--table` of its own
    #[arg(long, conflicts_with = "conditional")]
    pub counter: bool,
    /// CQL protocol version (the driver speaks v4 only)
    #[arg(long, default_value_t = 4)]
    pub protocol_version: u8,
    /// CQL: log in as this role (PasswordAuthenticator), with --password
    #[arg(long, requires = "password")]
    pub user: Option<String>,
    /// CQL: the password of --user
    #[arg(long, requires = "user")]
    pub password: Option<String>,
    /// Also write the summary as JSON to this file
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No per-second progress lines
    #[arg(long)]
    pub quiet: bool,
}

/// The option value naming `v` (e.g. `gaussian`).
pub fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// How the run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopAfter {
    /// Measured seconds after the warm-up.
    Duration(Duration),
    /// Measured operations.
    Count(u64),
}

/// Validated options with protocol defaults resolved.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Config {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub workload: WorkloadKind,
    pub ratio: Ratio,
    pub pop: PopulationKind,
    pub keys: u64,
    pub value_size: usize,
    pub rows_per_partition: u32,
    /// `None`: unthrottled.
    pub rate: Option<f64>,
    pub connections: usize,
    pub concurrency: usize,
    pub pipeline: usize,
    pub memcache_protocol: MemcacheDialect,
    pub memcache_write: MemcacheWrite,
    pub keys_per_get: usize,
    pub numeric_values: bool,
    /// Seconds; `None` with `count`.
    pub duration: Option<f64>,
    pub count: Option<u64>,
    pub warmup: f64,
    pub threads: usize,
    pub keyspace: String,
    pub table: String,
    pub no_schema: bool,
    pub replication_factor: u32,
    pub uncompressed: bool,
    pub consistency: String,
    pub conditional: bool,
    pub counter: bool,
    pub protocol_version: u8,
    pub user: Option<String>,
    /// Never written to the JSON report.
    #[serde(skip)]
    pub password: Option<String>,
    pub json: Option<PathBuf>,
    pub quiet: bool,
}

/// Default measured seconds when neither --duration nor --count is given.
const DEFAULT_DURATION_S: f64 = 10.0;
/// Largest value a memcache reply may announce and a write may send (memcached's own item limit
/// is 1 MiB by default; this only rejects nonsense).
pub const VALUE_SIZE_MAX: usize = 64 << 20;

/// Checks the bounds the rest of the crate relies on.
fn validate(args: &StressArgs) -> Result<(), String> {
    let positive = [
        ("--keys", args.keys > 0),
        ("--rows-per-partition", args.rows_per_partition > 0),
        ("--concurrency", args.concurrency != Some(0)),
        ("--pipeline", args.pipeline > 0),
        ("--threads", args.threads > 0),
        ("--connections", args.connections != Some(0)),
        ("--count", args.count != Some(0)),
        ("--keys-per-get", args.keys_per_get > 0),
    ];
    if let Some((name, _)) = positive.iter().find(|(_, ok)| !ok) {
        return Err(format!("{name} must be at least 1"));
    }
    let seconds = [("--rate", args.rate), ("--warmup", args.warmup), ("--duration", args.duration.unwrap_or(1.0))];
    if let Some((name, v)) = seconds.iter().find(|(_, v)| !v.is_finite() || *v < 0.0) {
        return Err(format!("{name} must be a finite number >= 0, got {v}"));
    }
    if args.duration == Some(0.0) {
        return Err("--duration must be more than 0".into());
    }
    // pk is a CQL bigint, ck an int, and seq walks keys x rows in a u64.
    if args.keys > i64::MAX as u64 || u128::from(args.keys) * u128::from(args.rows_per_partition) > u128::from(u64::MAX)
    {
        return Err("--keys x --rows-per-partition is too large".into());
    }
    if i32::try_from(args.rows_per_partition).is_err() {
        return Err("--rows-per-partition must fit a CQL int".into());
    }
    if args.value_size > VALUE_SIZE_MAX {
        return Err(format!("--value-size must be at most {VALUE_SIZE_MAX}"));
    }
    if args.numeric_values && !(1..=NUMERIC_VALUE_MAX_BYTES).contains(&args.value_size) {
        return Err(format!("--numeric-values: --value-size must be 1 to {NUMERIC_VALUE_MAX_BYTES} digits"));
    }
    if args.keys_per_get > 1 && args.memcache_protocol != MemcacheDialect::Text {
        return Err("--keys-per-get: a multi-key get is the text protocol's (meta `mg` takes one key)".into());
    }
    if args.protocol_version != 4 {
        return Err(format!("--protocol-version {}: only 4 is supported", args.protocol_version));
    }
    Ok(())
}

impl Config {
    pub fn from_args(args: StressArgs) -> Result<Config, StressError> {
        validate(&args).map_err(StressError::InvalidOption)?;
        let (default_port, default_connections) = match args.protocol {
            Protocol::Cql => (9042, 1),
            Protocol::Memcache => (11211, 4),
        };
        let connections = args.connections.unwrap_or(default_connections);
        // memcache: every connection's pipeline full unless capped; a fixed
        // default would silently leave deep pipelines nearly empty.
        let default_concurrency = match args.protocol {
            Protocol::Cql => 64,
            Protocol::Memcache => connections.saturating_mul(args.pipeline),
        };
        let duration = match args.count {
            Some(_) => None,
            None => Some(args.duration.unwrap_or(DEFAULT_DURATION_S)),
        };
        Ok(Config {
            protocol: args.protocol,
            host: args.host,
            port: args.port.unwrap_or(default_port),
            workload: args.workload,
            ratio: args.ratio,
            pop: args.pop,
            keys: args.keys,
            value_size: args.value_size,
            rows_per_partition: args.rows_per_partition,
            rate: (args.rate > 0.0).then_some(args.rate),
            connections,
            concurrency: args.concurrency.unwrap_or(default_concurrency),
            pipeline: args.pipeline,
            memcache_protocol: args.memcache_protocol,
            memcache_write: args.memcache_write,
            keys_per_get: args.keys_per_get,
            numeric_values: args.numeric_values,
            duration,
            count: args.count,
            warmup: args.warmup,
            threads: args.threads,
            keyspace: args.keyspace,
            table: args.table,
            no_schema: args.no_schema,
            conditional: args.conditional,
            counter: args.counter,
            replication_factor: args.replication_factor,
            uncompressed: args.uncompressed,
            consistency: args.consistency,
            protocol_version: args.protocol_version,
            user: args.user,
            password: args.password,
            json: args.json,
            quiet: args.quiet,
        })
    }

    pub fn stop_after(&self) -> StopAfter {
        match (self.count, self.duration) {
            (Some(n), _) => StopAfter::Count(n),
            (None, d) => StopAfter::Duration(Duration::from_secs_f64(d.unwrap_or(DEFAULT_DURATION_S))),
        }
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64(self.warmup)
    }

    /// `host:port`, with brackets around an IPv6 literal.
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Parses `shoal stress <argv>` into a [`Config`], as the `shoal` binary would.
#[cfg(test)]
pub(crate) fn parse_for_test(argv: &[&str]) -> Result<Config, String> {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: StressArgs,
    }
    let cli = Cli::try_parse_from(std::iter::once("stress").chain(argv.iter().copied())).map_err(|e| e.to_string())?;
    Config::from_args(cli.args).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(argv: &[&str]) -> Result<Config, String> {
        parse_for_test(argv)
    }

    #[test]
    fn defaults_depend_on_the_protocol() -> Result<(), String> {
        let cql = config(&[])?;
        assert_eq!((cql.port, cql.connections), (9042, 1));
        assert_eq!(cql.stop_after(), StopAfter::Duration(Duration::from_secs(10)));
        assert_eq!(cql.rate, None);
        assert_eq!(cql.concurrency, 64);
        let mc = config(&["--protocol", "memcache"])?;
        assert_eq!((mc.port, mc.connections, mc.concurrency), (11211, 4, 4));
        let piped = config(&["--protocol", "memcache", "--connections", "40", "--pipeline", "16"])?;
        assert_eq!(piped.concurrency, 640);
        Ok(())
    }

    #[test]
    fn count_replaces_duration() -> Result<(), String> {
        let c = config(&["--count", "500", "--rate", "100"])?;
        assert_eq!(c.stop_after(), StopAfter::Count(500));
        assert_eq!(c.duration, None);
        assert_eq!(c.rate, Some(100.0));
        assert!(config(&["--count", "5", "--duration", "3"]).is_err());
        Ok(())
    }

    #[test]
    fn bad_values_are_rejected() {
        for bad in [
            &["--keys", "0"][..],
            &["--ratio", "0:0"],
            &["--ratio", "3"],
            &["--duration", "0"],
            &["--rate", "-1"],
            &["--protocol-version", "5"],
            &["--connections", "0"],
            &["--user", "alice"],
            &["--password", "secret"],
            &["--keys-per-get", "0"],
            &["--keys-per-get", "4", "--memcache-protocol", "meta"],
            &["--numeric-values", "--value-size", "21"],
            &["--numeric-values", "--value-size", "0"],
        ] {
            assert!(config(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_password_stays_out_of_the_report() -> Result<(), String> {
        let c = config(&["--user", "alice", "--password", "secret"])?;
        assert_eq!((c.user.as_deref(), c.password.as_deref()), (Some("alice"), Some("secret")));
        let json = serde_json::to_string(&c).map_err(|e| e.to_string())?;
        assert!(json.contains("\"user\":\"alice\"") && !json.contains("secret"), "{json}");
        Ok(())
    }

    #[test]
    fn ratio_round_trips() -> Result<(), String> {
        let r: Ratio = "3:1".parse()?;
        assert_eq!((r.reads, r.writes), (3, 1));
        assert_eq!(r.to_string(), "3:1");
        Ok(())
    }

    #[test]
    fn ipv6_hosts_are_bracketed() -> Result<(), String> {
        assert_eq!(config(&["--host", "::1", "--port", "1"])?.address(), "[::1]:1");
        assert_eq!(config(&["--host", "db", "--port", "1"])?.address(), "db:1");
        Ok(())
    }
}
