//! Node configuration: every option declared once, with its default, its
//! scylla.yaml key and its flag (ScyllaDB's names, so its users find them).
//!
//! Precedence: command-line flag, then environment variable (`SHOAL_*`), then
//! the options file (`--options-file`, default `shoal.yaml` if present), then
//! the embedded default.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;
use shoal_cluster::encryption::InternodeEncryption;
use shoal_coordinator::cluster::{DEFAULT_DATA_CENTER, DEFAULT_RACK};
use shoal_coordinator::{ConsistencyLevel, ItemLevels, Timeouts};
use shoal_cql::auth::{Authenticator, Authorizer};
use shoal_tls::{ClientAuth, TlsFiles};
use thiserror::Error;

use crate::logging::{LogFormat, LogSettings};

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read options file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("options file {path} is not valid: {source}")]
    Parse { path: PathBuf, source: serde_yaml::Error },
    #[error("invalid memory size '{0}': use a number with an optional K, M, G or T suffix, e.g. 2G")]
    Memory(String),
    #[error("--smp must be at least 1")]
    Smp,
    #[error("invalid commitlog_sync '{0}': use periodic or batch")]
    CommitlogSync(String),
    #[error("{0} must be at least {1}")]
    TooSmall(&'static str, u64),
    #[error("index_cache_fraction {0} must be between 0 and 1")]
    IndexCacheFraction(f64),
    #[error("invalid seed '{0}': use an IP address, optionally with :port (the storage port)")]
    Seed(String),
    #[error("seed_provider: give one entry whose parameters hold `seeds: \"ip1,ip2,...\"`")]
    SeedProvider,
    #[error("{0}: name the certificate and its key file")]
    TlsFiles(&'static str),
    #[error("invalid internode_encryption '{0}': use none, all, dc or rack")]
    InternodeEncryption(String),
    #[error("invalid --{0} '{1}': use on or off")]
    OnOff(&'static str, String),
    #[error("{0} {1} must be between 0 (the controller) and 1000")]
    StaticShares(&'static str, u32),
    #[error("io_latency_goal_ms {0} must be between 0.05 and 1000")]
    LatencyGoal(f64),
    #[error("{0}")]
    Authenticator(String),
    #[error("invalid memcached consistency level '{0}': use ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE")]
    ItemConsistency(String),
    #[error("invalid memcache_ssl_verify_mode {0}: use 0 (none), 1 (request), 2 (require) or 3 (once)")]
    VerifyMode(u8),
}

/// `shoal --version`: the crate's version and the git commit it was built
/// from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SHOAL_GIT_COMMIT"), ")");

/// `shoal [server]` options. Each `Option` is unset unless given by flag or
/// environment; [`Config::resolve`] fills the rest.
#[derive(Debug, Parser)]
#[command(
    name = "shoal",
    version = VERSION,
    about = "Shoal: a shard-per-core database speaking CQL and memcached",
    max_term_width = 100,
    next_line_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run a node (the default).
    Server(Box<ServerArgs>),
    /// Operate a running node: status, flush, compact, snapshot, drain, log levels.
    Nodetool(crate::nodetool::NodetoolArgs),
    /// Generate load against a CQL or memcached server and report latencies.
    Stress(shoal_stress::StressArgs),
    /// Measure the disk under --workdir and write io_properties.yaml for the I/O scheduler.
    Iotune(crate::iotune::IotuneArgs),
    /// Copy a snapshot's SSTables and the schema to a backup directory.
    Backup(crate::backup::BackupArgs),
    /// Copy node backups into the upload/ directories of a node's tables (then nodetool refresh).
    Restore(crate::backup::RestoreArgs),
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerArgs {
    /// YAML options file with scylla.yaml key names [default: shoal.yaml if present]
    #[arg(long, env = "SHOAL_OPTIONS_FILE", help_heading = "Configuration")]
    pub options_file: Option<PathBuf>,
    /// Address to listen on for clients [default: 127.0.0.1]
    #[arg(long, env = "SHOAL_LISTEN_ADDRESS", help_heading = "Network")]
    pub listen_address: Option<IpAddr>,
    /// CQL port [default: 9042]
    #[arg(long, env = "SHOAL_NATIVE_TRANSPORT_PORT", help_heading = "Network")]
    pub native_transport_port: Option<u16>,
    /// Shard-aware CQL port: a connection lands on shard (source port % shards) [default: 19042]
    #[arg(long, env = "SHOAL_NATIVE_SHARD_AWARE_TRANSPORT_PORT", help_heading = "Network")]
    pub native_shard_aware_transport_port: Option<u16>,
    /// HTTP port for /metrics and the admin API [default: 10000]
    #[arg(long, env = "SHOAL_API_PORT", help_heading = "Network")]
    pub api_port: Option<u16>,
    /// Address the HTTP API listens on; it changes the cluster, so it
    /// stays on loopback unless asked [default: 127.0.0.1]
    #[arg(long, env = "SHOAL_API_ADDRESS", help_heading = "Network")]
    pub api_address: Option<IpAddr>,
    /// CQL port speaking TLS, with client_encryption_options enabled;
    /// the native ports then stay plaintext [default: none: they speak TLS]
    #[arg(long, env = "SHOAL_NATIVE_TRANSPORT_PORT_SSL", help_heading = "Network")]
    pub native_transport_port_ssl: Option<u16>,
    /// Shard-aware CQL port speaking TLS, beside native_transport_port_ssl [default: 19142]
    #[arg(long, env = "SHOAL_NATIVE_SHARD_AWARE_TRANSPORT_PORT_SSL", help_heading = "Network")]
    pub native_shard_aware_transport_port_ssl: Option<u16>,
    /// Internode port speaking TLS, the same on every node, with
    /// server_encryption_options' internode_encryption on [default: 7001]
    #[arg(long, env = "SHOAL_SSL_STORAGE_PORT", help_heading = "Network")]
    pub ssl_storage_port: Option<u16>,
    /// A client (or peer) that has not finished its TLS handshake after
    /// this long is cut off [default: 10000]
    #[arg(long, env = "SHOAL_TLS_HANDSHAKE_TIMEOUT_IN_MS", help_heading = "Network")]
    pub tls_handshake_timeout_in_ms: Option<u64>,
    /// Internode messaging port: other nodes connect here [default: 7000]
    #[arg(long, env = "SHOAL_STORAGE_PORT", help_heading = "Network")]
    pub storage_port: Option<u16>,
    /// Comma-separated addresses of the nodes a new node first contacts,
    /// each an IP with an optional :port (default: the storage port)
    /// [default: none: a cluster of one]
    #[arg(long, env = "SHOAL_SEEDS", help_heading = "Cluster")]
    pub seeds: Option<String>,
    /// A node that has not answered pings for this long is marked down [default: 20000]
    #[arg(long, env = "SHOAL_FAILURE_DETECTOR_TIMEOUT_IN_MS", help_heading = "Cluster")]
    pub failure_detector_timeout_in_ms: Option<u64>,
    /// A stopping node, once it told the other nodes, serves its open
    /// client connections this long before it closes them [default: 2000]
    #[arg(long, env = "SHOAL_SHUTDOWN_ANNOUNCE_IN_MS", help_heading = "Cluster")]
    pub shutdown_announce_in_ms: Option<u64>,
    /// Writes a down replica missed are kept as hints while it has been down
    /// less than this; 0 keeps none [default: 10800000, 3 h]
    #[arg(long, env = "SHOAL_MAX_HINT_WINDOW_IN_MS", help_heading = "Cluster")]
    pub max_hint_window_in_ms: Option<u64>,
    /// Tokens (vnodes) this node takes when it first starts; kept after [default: 256]
    #[arg(long, env = "SHOAL_NUM_TOKENS", help_heading = "Cluster")]
    pub num_tokens: Option<usize>,
    /// When this node leads group 0, a joiner's tokens even out what each
    /// node of its data center replicates at this replication factor
    /// [default: 3]
    #[arg(long, env = "SHOAL_ALLOCATE_TOKENS_FOR_LOCAL_REPLICATION_FACTOR", help_heading = "Cluster")]
    pub allocate_tokens_for_local_replication_factor: Option<usize>,
    /// Group 0 snapshots its state and drops its log after this many
    /// entries (membership and schema changes) [default: 1024]
    #[arg(long, env = "SHOAL_GROUP0_SNAPSHOT_THRESHOLD", help_heading = "Cluster")]
    pub group0_snapshot_threshold: Option<u64>,
    /// On this node's first start, take over the tokens of this dead member
    /// (its host id) and stream its data from the other replicas
    #[arg(long, env = "SHOAL_REPLACE_NODE_FIRST_BOOT", help_heading = "Cluster")]
    pub replace_node_first_boot: Option<uuid::Uuid>,
    /// This node's data center [default: datacenter1]
    #[arg(long, env = "SHOAL_DC", help_heading = "Cluster")]
    pub dc: Option<String>,
    /// This node's rack [default: rack1]
    #[arg(long, env = "SHOAL_RACK", help_heading = "Cluster")]
    pub rack: Option<String>,
    /// A write's replicas in another data center get one copy, which one of
    /// them forwards to the others: on, or off (each its own copy, only for
    /// contrast benchmarks) [default: on]
    #[arg(long, env = "SHOAL_CROSS_DC_FORWARDING", help_heading = "Cluster")]
    pub cross_dc_forwarding: Option<String>,
    /// Directory for data and commitlog [default: ./data]
    #[arg(long, env = "SHOAL_WORKDIR", help_heading = "Storage")]
    pub workdir: Option<PathBuf>,
    /// When a write is acknowledged: periodic (at once; fsync every
    /// commitlog_sync_period_in_ms) or batch (once on disk) [default: periodic]
    #[arg(long, env = "SHOAL_COMMITLOG_SYNC", help_heading = "Storage")]
    pub commitlog_sync: Option<String>,
    /// fsync period of periodic commitlog sync [default: 10000]
    #[arg(long, env = "SHOAL_COMMITLOG_SYNC_PERIOD_IN_MS", help_heading = "Storage")]
    pub commitlog_sync_period_in_ms: Option<u64>,
    /// Size of a commitlog segment file [default: 32]
    #[arg(long, env = "SHOAL_COMMITLOG_SEGMENT_SIZE_IN_MB", help_heading = "Storage")]
    pub commitlog_segment_size_in_mb: Option<u32>,
    /// Commitlog disk space (all shards); beyond it memtables are flushed [default: 8192]
    #[arg(long, env = "SHOAL_COMMITLOG_TOTAL_SPACE_IN_MB", help_heading = "Storage")]
    pub commitlog_total_space_in_mb: Option<u64>,
    /// The disk's capacity as `shoal iotune` measured it (ScyllaDB's
    /// io_properties.yaml) [default: a conservative guess, logged]
    #[arg(long, env = "SHOAL_IO_PROPERTIES_FILE", help_heading = "Storage")]
    pub io_properties_file: Option<PathBuf>,
    /// The I/O scheduler: on, or off (only for contrast benchmarks) [default: on]
    #[arg(long, env = "SHOAL_IO_SCHEDULER", help_heading = "Storage")]
    pub io_scheduler: Option<String>,
    /// The CPU scheduler's throttling of background work (flush, compaction,
    /// streaming): on, or off (only for contrast benchmarks) [default: on]
    #[arg(long, env = "SHOAL_CPU_SCHEDULER", help_heading = "Storage")]
    pub cpu_scheduler: Option<String>,
    /// Fixed shares for compaction instead of its backlog controller, 1-1000
    /// (ScyllaDB's option; for contrast benchmarks) [default: 0, the controller]
    #[arg(long, env = "SHOAL_COMPACTION_STATIC_SHARES", help_heading = "Storage")]
    pub compaction_static_shares: Option<u32>,
    /// Fixed shares for memtable flush instead of its controller, 1-1000
    /// (ScyllaDB's option; for contrast benchmarks) [default: 0, the controller]
    #[arg(long, env = "SHOAL_MEMTABLE_FLUSH_STATIC_SHARES", help_heading = "Storage")]
    pub memtable_flush_static_shares: Option<u32>,
    /// SSTable and commitlog files bypass the page cache (O_DIRECT): on, or
    /// off (only for contrast benchmarks) [default: on]
    #[arg(long, env = "SHOAL_DIRECT_IO", help_heading = "Storage")]
    pub direct_io: Option<String>,
    /// The most disk time each shard keeps in flight, in ms [default: 0.75]
    #[arg(long, env = "SHOAL_IO_LATENCY_GOAL_MS", help_heading = "Storage")]
    pub io_latency_goal_ms: Option<f64>,
    /// Number of shards (threads pinned to cores) [default: number of cores]
    #[arg(long, env = "SHOAL_SMP", help_heading = "Shards and memory")]
    pub smp: Option<usize>,
    /// Memory for the node, e.g. 2G [default: 90% of RAM, or of the cgroup's limit when lower]
    #[arg(long, env = "SHOAL_MEMORY", help_heading = "Shards and memory")]
    pub memory: Option<String>,
    /// Memory for memtables (all shards) [default: a quarter of --memory]
    #[arg(long, env = "SHOAL_MEMTABLE_SPACE_IN_MB", help_heading = "Shards and memory")]
    pub memtable_space_in_mb: Option<u64>,
    /// Share of the cache's memory that partition-index pages may use [default: 0.2]
    #[arg(long, env = "SHOAL_INDEX_CACHE_FRACTION", help_heading = "Shards and memory")]
    pub index_cache_fraction: Option<f64>,
    /// Seconds between saves of each shard's hottest cached keys, read back at start; 0: never [default: 60]
    #[arg(long, env = "SHOAL_ROW_CACHE_SAVE_PERIOD", help_heading = "Shards and memory")]
    pub row_cache_save_period: Option<u64>,
    /// Memory that in_memory tables may hold (all shards) [default: half of --memory]
    #[arg(long, env = "SHOAL_IN_MEMORY_STORAGE_SIZE_MB", help_heading = "Shards and memory")]
    pub in_memory_storage_size_mb: Option<u64>,
    /// Do not pin shard threads to cores.
    #[arg(long, env = "SHOAL_NO_PIN", help_heading = "Shards and memory")]
    pub no_pin: bool,
    /// Let the heap use transparent huge pages. Off by default: a huge-page
    /// fault may stall a shard (bench/results/2026-11-27-streaming.md); a
    /// node that only serves memcached gets from a warm cache gains ~7%.
    #[arg(long, env = "SHOAL_TRANSPARENT_HUGEPAGES", help_heading = "Shards and memory")]
    pub transparent_hugepages: bool,
    /// memcached text and meta protocols; 0 disables [default: 11211]
    #[arg(long, env = "SHOAL_MEMCACHE_PORT", help_heading = "memcached")]
    pub memcache_port: Option<u16>,
    /// Bytes memcached items may take, e.g. 1G; past it the least recently
    /// used are evicted (memcached's -m); 0: never evict [default: --memory]
    #[arg(long, env = "SHOAL_MEMCACHE_MAX_SIZE", help_heading = "memcached")]
    pub memcache_max_size: Option<String>,
    /// Replicas a memcached read (and a read-modify-write's read) consults
    /// before its key's leading replica runs it: ONE, TWO, THREE, QUORUM,
    /// ALL, LOCAL_QUORUM, LOCAL_ONE [default: ONE]
    #[arg(long, env = "SHOAL_MEMCACHE_READ_CONSISTENCY", help_heading = "memcached")]
    pub memcache_read_consistency: Option<String>,
    /// Replicas that must apply a memcached write before it is answered
    /// (the same names; `memcache.items`' replication factor sets how many
    /// hold it) [default: ONE]
    #[arg(long, env = "SHOAL_MEMCACHE_WRITE_CONSISTENCY", help_heading = "memcached")]
    pub memcache_write_consistency: Option<String>,
    /// TLS on the memcached port (memcached's -Z), with
    /// --memcache-ssl-chain-cert and --memcache-ssl-key
    #[arg(long, env = "SHOAL_MEMCACHE_SSL", help_heading = "memcached")]
    pub memcache_ssl: bool,
    /// memcached's ssl_chain_cert: the certificate chain, PEM
    #[arg(long, env = "SHOAL_MEMCACHE_SSL_CHAIN_CERT", help_heading = "memcached")]
    pub memcache_ssl_chain_cert: Option<PathBuf>,
    /// memcached's ssl_key: the private key, PEM
    #[arg(long, env = "SHOAL_MEMCACHE_SSL_KEY", help_heading = "memcached")]
    pub memcache_ssl_key: Option<PathBuf>,
    /// memcached's ssl_ca_cert: CA certificates client certificates are checked against, PEM
    #[arg(long, env = "SHOAL_MEMCACHE_SSL_CA_CERT", help_heading = "memcached")]
    pub memcache_ssl_ca_cert: Option<PathBuf>,
    /// memcached's ssl_verify_mode: 0 no client certificate, 1 checked if
    /// sent, 2 and 3 required [default: 0]
    #[arg(long, env = "SHOAL_MEMCACHE_SSL_VERIFY_MODE", help_heading = "memcached")]
    pub memcache_ssl_verify_mode: Option<u8>,
    /// memcached's -Y: username:password lines; a connection must first
    /// authenticate with `set <key> 0 0 <n>` of "username password"
    #[arg(long, env = "SHOAL_MEMCACHE_AUTH_FILE", help_heading = "memcached")]
    pub memcache_auth_file: Option<PathBuf>,
    /// CQL clients' login: AllowAllAuthenticator (none) or
    /// PasswordAuthenticator (a role's name and password) [default: AllowAllAuthenticator]
    #[arg(long, env = "SHOAL_AUTHENTICATOR", help_heading = "Security")]
    pub authenticator: Option<String>,
    /// CQL statements' permission checks: AllowAllAuthorizer (none) or
    /// CassandraAuthorizer (GRANT / REVOKE) [default: AllowAllAuthorizer]
    #[arg(long, env = "SHOAL_AUTHORIZER", help_heading = "Security")]
    pub authorizer: Option<String>,
    /// How long a shard reuses a role's resolved permissions; a GRANT or
    /// REVOKE takes effect at once regardless [default: 2000]
    #[arg(long, env = "SHOAL_PERMISSIONS_VALIDITY_IN_MS", help_heading = "Security")]
    pub permissions_validity_in_ms: Option<u64>,
    /// How log lines are written: text (colours only on a terminal) or
    /// json (one object per line) [default: text]
    #[arg(long, env = "SHOAL_LOG_FORMAT", value_enum, help_heading = "Logging")]
    pub log_format: Option<LogFormat>,
    /// The level of every module without a level of its own: off, error,
    /// warn, info, debug or trace (RUST_LOG, when set, replaces it)
    /// [default: info]
    #[arg(long, env = "SHOAL_DEFAULT_LOG_LEVEL", help_heading = "Logging")]
    pub default_log_level: Option<String>,
    /// A module's level, module=level (e.g. shoal_cluster=debug); repeat
    /// it, or separate pairs with commas
    #[arg(long, env = "SHOAL_LOGGER_LOG_LEVEL", value_name = "MODULE=LEVEL", help_heading = "Logging")]
    pub logger_log_level: Vec<String>,
}

impl ServerArgs {
    /// What the log starts with (flags and environment only: the log
    /// starts before the options file is read, so its errors are logged).
    pub fn log_settings(&self) -> LogSettings {
        LogSettings {
            format: self.log_format.unwrap_or_default(),
            default_level: self.default_log_level.clone(),
            module_levels: self.logger_log_level.clone(),
        }
    }
}

/// The options file: scylla.yaml's key names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsFile {
    workdir: Option<PathBuf>,
    smp: Option<usize>,
    memory: Option<String>,
    cluster_name: Option<String>,
    listen_address: Option<IpAddr>,
    rpc_address: Option<IpAddr>,
    native_transport_port: Option<u16>,
    native_shard_aware_transport_port: Option<u16>,
    api_port: Option<u16>,
    api_address: Option<IpAddr>,
    client_encryption_options: Option<ClientEncryptionOptions>,
    native_transport_port_ssl: Option<u16>,
    native_shard_aware_transport_port_ssl: Option<u16>,
    server_encryption_options: Option<ServerEncryptionOptions>,
    ssl_storage_port: Option<u16>,
    tls_handshake_timeout_in_ms: Option<u64>,
    memcache_port: Option<u16>,
    memcache_max_size: Option<String>,
    memcache_read_consistency: Option<String>,
    memcache_write_consistency: Option<String>,
    memcache_ssl: Option<bool>,
    memcache_ssl_chain_cert: Option<PathBuf>,
    memcache_ssl_key: Option<PathBuf>,
    memcache_ssl_ca_cert: Option<PathBuf>,
    memcache_ssl_verify_mode: Option<u8>,
    memcache_auth_file: Option<PathBuf>,
    authenticator: Option<String>,
    authorizer: Option<String>,
    permissions_validity_in_ms: Option<u64>,
    storage_port: Option<u16>,
    seed_provider: Option<Vec<SeedProvider>>,
    failure_detector_timeout_in_ms: Option<u64>,
    shutdown_announce_in_ms: Option<u64>,
    max_hint_window_in_ms: Option<u64>,
    cross_dc_forwarding: Option<bool>,
    num_tokens: Option<usize>,
    allocate_tokens_for_local_replication_factor: Option<usize>,
    group0_snapshot_threshold: Option<u64>,
    replace_node_first_boot: Option<uuid::Uuid>,
    native_transport_max_frame_size_in_mb: Option<usize>,
    data_file_directories: Option<Vec<PathBuf>>,
    commitlog_directory: Option<PathBuf>,
    commitlog_sync: Option<String>,
    commitlog_sync_period_in_ms: Option<u64>,
    commitlog_segment_size_in_mb: Option<u32>,
    commitlog_total_space_in_mb: Option<u64>,
    io_properties_file: Option<PathBuf>,
    io_scheduler_enabled: Option<bool>,
    cpu_scheduler_enabled: Option<bool>,
    compaction_static_shares: Option<u32>,
    memtable_flush_static_shares: Option<u32>,
    direct_io: Option<bool>,
    io_latency_goal_ms: Option<f64>,
    memtable_space_in_mb: Option<u64>,
    index_cache_fraction: Option<f64>,
    row_cache_save_period: Option<u64>,
    in_memory_storage_size_mb: Option<u64>,
    saved_caches_directory: Option<PathBuf>,
    hints_directory: Option<PathBuf>,
    read_request_timeout_in_ms: Option<u64>,
    range_request_timeout_in_ms: Option<u64>,
    write_request_timeout_in_ms: Option<u64>,
    counter_write_request_timeout_in_ms: Option<u64>,
    cas_contention_timeout_in_ms: Option<u64>,
    truncate_request_timeout_in_ms: Option<u64>,
}

/// scylla.yaml's `seed_provider` entry:
/// `[{class_name: ..., parameters: [{seeds: "ip1,ip2"}]}]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedProvider {
    /// Named by scylla.yaml; the simple provider is the only one.
    #[serde(rename = "class_name", default)]
    _class_name: Option<String>,
    parameters: Vec<SeedParameters>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedParameters {
    seeds: String,
}

/// scylla.yaml's `client_encryption_options`: TLS for CQL.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientEncryptionOptions {
    #[serde(default)]
    enabled: bool,
    certificate: Option<PathBuf>,
    keyfile: Option<PathBuf>,
    truststore: Option<PathBuf>,
    #[serde(default)]
    require_client_auth: bool,
}

/// scylla.yaml's `server_encryption_options`: TLS between nodes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEncryptionOptions {
    internode_encryption: Option<String>,
    certificate: Option<PathBuf>,
    keyfile: Option<PathBuf>,
    truststore: Option<PathBuf>,
    #[serde(default)]
    require_client_auth: bool,
    /// Cassandra's: a peer's certificate must name its address.
    #[serde(default)]
    require_endpoint_verification: bool,
}

/// TLS files as the options name them; `what` names the options in errors.
fn tls_files(
    what: &'static str,
    certificate: Option<PathBuf>,
    keyfile: Option<PathBuf>,
    truststore: Option<PathBuf>,
    client_auth: ClientAuth,
) -> Result<TlsFiles, ConfigError> {
    match (certificate, keyfile) {
        (Some(certificate), Some(keyfile)) => Ok(TlsFiles { certificate, keyfile, truststore, client_auth }),
        _ => Err(ConfigError::TlsFiles(what)),
    }
}

fn require(client_auth: bool) -> ClientAuth {
    if client_auth {
        ClientAuth::Required
    } else {
        ClientAuth::None
    }
}

/// CQL over TLS: on the native ports, or on ports of its own.
#[derive(Debug, Clone)]
pub struct ClientTls {
    pub files: TlsFiles,
    /// `native_transport_port_ssl` and its shard-aware twin: TLS here and
    /// plaintext on the native ports; `None`: the native ports speak TLS.
    pub ssl_ports: Option<(u16, u16)>,
}

/// Internode TLS as configured.
#[derive(Debug, Clone)]
pub struct InternodeTlsConfig {
    pub encryption: InternodeEncryption,
    pub files: TlsFiles,
    pub verify_name: bool,
    pub ssl_storage_port: u16,
}

fn client_tls(args: &ServerArgs, file: &mut OptionsFile, native_port: u16) -> Result<Option<ClientTls>, ConfigError> {
    let options = file.client_encryption_options.take().unwrap_or_default();
    if !options.enabled {
        return Ok(None);
    }
    let files = tls_files(
        "client_encryption_options",
        options.certificate,
        options.keyfile,
        options.truststore,
        require(options.require_client_auth),
    )?;
    let ssl_port = args.native_transport_port_ssl.or(file.native_transport_port_ssl).filter(|p| *p != native_port);
    let aware_ssl_port =
        args.native_shard_aware_transport_port_ssl.or(file.native_shard_aware_transport_port_ssl).unwrap_or(19142);
    Ok(Some(ClientTls { files, ssl_ports: ssl_port.map(|port| (port, aware_ssl_port)) }))
}

fn internode_tls(args: &ServerArgs, file: &mut OptionsFile) -> Result<Option<InternodeTlsConfig>, ConfigError> {
    let options = file.server_encryption_options.take().unwrap_or_default();
    let text = options.internode_encryption.unwrap_or_else(|| "none".to_string());
    let encryption = InternodeEncryption::parse(&text).ok_or(ConfigError::InternodeEncryption(text))?;
    if encryption == InternodeEncryption::None {
        return Ok(None);
    }
    let files = tls_files(
        "server_encryption_options",
        options.certificate,
        options.keyfile,
        options.truststore,
        require(options.require_client_auth),
    )?;
    Ok(Some(InternodeTlsConfig {
        encryption,
        files,
        verify_name: options.require_endpoint_verification,
        ssl_storage_port: args.ssl_storage_port.or(file.ssl_storage_port).unwrap_or(7001),
    }))
}

fn memcache_tls(args: &mut ServerArgs, file: &mut OptionsFile) -> Result<Option<TlsFiles>, ConfigError> {
    if !(args.memcache_ssl || file.memcache_ssl.unwrap_or(false)) {
        return Ok(None);
    }
    let client_auth = match args.memcache_ssl_verify_mode.or(file.memcache_ssl_verify_mode).unwrap_or(0) {
        0 => ClientAuth::None,
        1 => ClientAuth::Optional,
        2 | 3 => ClientAuth::Required,
        other => return Err(ConfigError::VerifyMode(other)),
    };
    tls_files(
        "memcache_ssl_chain_cert and memcache_ssl_key",
        args.memcache_ssl_chain_cert.take().or(file.memcache_ssl_chain_cert.take()),
        args.memcache_ssl_key.take().or(file.memcache_ssl_key.take()),
        args.memcache_ssl_ca_cert.take().or(file.memcache_ssl_ca_cert.take()),
        client_auth,
    )
    .map(Some)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitlogSync {
    Periodic { period_ms: u64 },
    Batch,
}

/// The resolved configuration of a node.
#[derive(Debug, Clone)]
pub struct Config {
    pub workdir: PathBuf,
    pub smp: usize,
    pub memory_bytes: u64,
    pub cluster_name: String,
    pub listen_address: IpAddr,
    pub native_transport_port: u16,
    pub native_shard_aware_transport_port: u16,
    pub api_port: u16,
    pub api_address: IpAddr,
    /// CQL over TLS (`client_encryption_options`).
    pub client_tls: Option<ClientTls>,
    /// TLS between nodes (`server_encryption_options`).
    pub internode_tls: Option<InternodeTlsConfig>,
    /// TLS on the memcached port.
    pub memcache_tls: Option<TlsFiles>,
    /// memcached's ASCII authentication.
    pub memcache_auth_file: Option<PathBuf>,
    /// CQL clients' login (`authenticator`); a client must log in within
    /// `tls_handshake_timeout`.
    pub authenticator: Authenticator,
    /// CQL statements' permission checks (`authorizer`).
    pub authorizer: Authorizer,
    pub permissions_validity_ms: u64,
    pub tls_handshake_timeout: Duration,
    pub memcache_port: u16,
    pub storage_port: u16,
    /// Other nodes' storage ports to contact at start (never this node).
    pub seeds: Vec<SocketAddr>,
    /// No seed but this node, or this node is the first seed: it forms the
    /// cluster (group 0) if it has never been in one.
    pub first_seed: bool,
    pub failure_detector_timeout: Duration,
    /// How long a stopping node serves its open client connections after
    /// telling the other nodes.
    pub shutdown_announce: Duration,
    /// How long a down replica's missed writes are kept as hints.
    pub max_hint_window: Duration,
    /// Tokens a node takes at its first start.
    pub num_tokens: usize,
    /// The replication factor a joiner's tokens balance (as leader).
    pub allocate_tokens_for_local_replication_factor: usize,
    /// Group 0's entries between snapshots.
    pub group0_snapshot_threshold: u64,
    /// The dead member whose tokens this node takes at its first start.
    pub replace_node_first_boot: Option<uuid::Uuid>,
    pub data_center: String,
    pub rack: String,
    /// Off only for contrast benchmarks.
    pub cross_dc_forwarding: bool,
    /// 0: memcached items are never evicted.
    pub memcache_max_size_bytes: u64,
    /// `memcache_read_consistency`, `memcache_write_consistency`.
    pub memcache_levels: ItemLevels,
    pub max_frame_bytes: usize,
    pub pin_shards: bool,
    pub transparent_hugepages: bool,
    pub data_dir: PathBuf,
    pub commitlog_dir: PathBuf,
    pub commitlog_sync: CommitlogSync,
    pub commitlog_segment_bytes: u32,
    pub commitlog_total_space_bytes: u64,
    pub memtable_space_bytes: u64,
    pub index_cache_fraction: f64,
    /// Seconds; 0: never.
    pub row_cache_save_period_s: u64,
    pub saved_caches_dir: PathBuf,
    /// Where hints for down replicas are kept (`hints_directory`).
    pub hints_dir: PathBuf,
    pub in_memory_storage_bytes: u64,
    pub timeouts: Timeouts,
    /// `None`: the conservative default capacity.
    pub io_properties_file: Option<PathBuf>,
    /// Off only for contrast benchmarks.
    pub io_scheduler_enabled: bool,
    /// Off only for contrast benchmarks.
    pub cpu_scheduler_enabled: bool,
    /// Fixed compaction shares in place of its backlog controller (contrast
    /// benchmarks); `None`: the controller.
    pub compaction_static_shares: Option<u32>,
    /// The same for memtable flush.
    pub memtable_flush_static_shares: Option<u32>,
    /// Off only for contrast benchmarks.
    pub direct_io: bool,
    pub io_latency_goal_us: u64,
}

/// ScyllaDB's `*_static_shares`: 0 or unset leaves the group to its
/// backlog controller, 1-1000 fixes its shares.
fn static_shares(name: &'static str, shares: Option<u32>) -> Result<Option<u32>, ConfigError> {
    match shares {
        None | Some(0) => Ok(None),
        Some(n) if n <= 1000 => Ok(Some(n)),
        Some(n) => Err(ConfigError::StaticShares(name, n)),
    }
}

/// A switch that is on unless the flag (`on`/`off`) or the file says off.
fn on_off(flag_name: &'static str, flag: Option<&str>, file: Option<bool>) -> Result<bool, ConfigError> {
    match flag.map(str::trim) {
        None => Ok(file.unwrap_or(true)),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(ConfigError::OnOff(flag_name, other.to_string())),
    }
}

impl Config {
    pub fn resolve(mut args: ServerArgs) -> Result<Config, ConfigError> {
        let mut file = match &args.options_file {
            Some(path) => read_options(path)?,
            None if Path::new("shoal.yaml").exists() => read_options(Path::new("shoal.yaml"))?,
            None => OptionsFile::default(),
        };
        let timeouts = timeouts(&file);
        let native_transport_port = args.native_transport_port.or(file.native_transport_port).unwrap_or(9042);
        let client_tls = client_tls(&args, &mut file, native_transport_port)?;
        let internode_tls = internode_tls(&args, &mut file)?;
        let memcache_tls = memcache_tls(&mut args, &mut file)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let smp = args.smp.or(file.smp).unwrap_or(cores);
        if smp == 0 {
            return Err(ConfigError::Smp);
        }
        let memory_bytes = match args.memory.or(file.memory) {
            Some(text) => parse_size(&text)?,
            None => default_memory_bytes(),
        };
        let memcache_max_size_bytes = match args.memcache_max_size.or(file.memcache_max_size) {
            Some(text) => parse_size(&text)?,
            None => memory_bytes,
        };
        let memcache_levels = ItemLevels {
            read: item_level(args.memcache_read_consistency.or(file.memcache_read_consistency))?,
            write: item_level(args.memcache_write_consistency.or(file.memcache_write_consistency))?,
        };
        let storage_port = args.storage_port.or(file.storage_port).unwrap_or(7000);
        let seeds_text = match (args.seeds, file.seed_provider) {
            (Some(seeds), _) => seeds,
            (None, Some(providers)) => match providers.as_slice() {
                [provider] if provider.parameters.len() == 1 => provider.parameters[0].seeds.clone(),
                _ => return Err(ConfigError::SeedProvider),
            },
            (None, None) => String::new(),
        };
        let listen_address =
            args.listen_address.or(file.listen_address).or(file.rpc_address).unwrap_or([127, 0, 0, 1].into());
        let all_seeds = parse_seeds(&seeds_text, storage_port)?;
        let me = SocketAddr::new(listen_address, storage_port);
        let first_seed = all_seeds.first().is_none_or(|first| *first == me);
        let seeds = all_seeds.into_iter().filter(|seed| *seed != me).collect();
        let workdir = args.workdir.or(file.workdir).unwrap_or_else(|| PathBuf::from("./data"));
        let period_ms = args.commitlog_sync_period_in_ms.or(file.commitlog_sync_period_in_ms).unwrap_or(10_000);
        let commitlog_sync = match args.commitlog_sync.or(file.commitlog_sync).as_deref().map(str::trim) {
            None | Some("periodic") => CommitlogSync::Periodic { period_ms: period_ms.max(1) },
            Some("batch") => CommitlogSync::Batch,
            Some(other) => return Err(ConfigError::CommitlogSync(other.to_string())),
        };
        let segment_mb = args.commitlog_segment_size_in_mb.or(file.commitlog_segment_size_in_mb).unwrap_or(32);
        if !(1..=1024).contains(&segment_mb) {
            return Err(ConfigError::TooSmall("commitlog_segment_size_in_mb (at most 1024)", 1));
        }
        let total_mb = args.commitlog_total_space_in_mb.or(file.commitlog_total_space_in_mb).unwrap_or(8192);
        if total_mb < 2 * u64::from(segment_mb) {
            return Err(ConfigError::TooSmall(
                "commitlog_total_space_in_mb (twice the segment size)",
                2 * u64::from(segment_mb),
            ));
        }
        let memtable_space_bytes = match args.memtable_space_in_mb.or(file.memtable_space_in_mb) {
            Some(mb) => mb << 20,
            None => memory_bytes / 4,
        };
        if memtable_space_bytes < (smp as u64) << 20 {
            return Err(ConfigError::TooSmall("memtable space in MiB (one per shard)", smp as u64));
        }
        let index_cache_fraction = args.index_cache_fraction.or(file.index_cache_fraction).unwrap_or(0.2);
        if !(0.0..=1.0).contains(&index_cache_fraction) {
            return Err(ConfigError::IndexCacheFraction(index_cache_fraction));
        }
        let io_scheduler_enabled = on_off("io-scheduler", args.io_scheduler.as_deref(), file.io_scheduler_enabled)?;
        let cpu_scheduler_enabled = on_off("cpu-scheduler", args.cpu_scheduler.as_deref(), file.cpu_scheduler_enabled)?;
        let compaction_static_shares =
            static_shares("compaction_static_shares", args.compaction_static_shares.or(file.compaction_static_shares))?;
        let memtable_flush_static_shares = static_shares(
            "memtable_flush_static_shares",
            args.memtable_flush_static_shares.or(file.memtable_flush_static_shares),
        )?;
        let direct_io = on_off("direct-io", args.direct_io.as_deref(), file.direct_io)?;
        let cross_dc_forwarding =
            on_off("cross-dc-forwarding", args.cross_dc_forwarding.as_deref(), file.cross_dc_forwarding)?;
        let io_latency_goal_ms = args.io_latency_goal_ms.or(file.io_latency_goal_ms).unwrap_or(0.75);
        if !(0.05..=1000.0).contains(&io_latency_goal_ms) {
            return Err(ConfigError::LatencyGoal(io_latency_goal_ms));
        }
        Ok(Config {
            timeouts,
            io_properties_file: args.io_properties_file.or(file.io_properties_file),
            io_scheduler_enabled,
            cpu_scheduler_enabled,
            compaction_static_shares,
            memtable_flush_static_shares,
            direct_io,
            io_latency_goal_us: (io_latency_goal_ms * 1000.0).round() as u64,
            index_cache_fraction,
            row_cache_save_period_s: args.row_cache_save_period.or(file.row_cache_save_period).unwrap_or(60),
            in_memory_storage_bytes: args
                .in_memory_storage_size_mb
                .or(file.in_memory_storage_size_mb)
                .map_or(memory_bytes / 2, |mb| mb << 20),
            saved_caches_dir: file.saved_caches_directory.unwrap_or_else(|| workdir.join("saved_caches")),
            hints_dir: file.hints_directory.unwrap_or_else(|| workdir.join("hints")),
            data_dir: file
                .data_file_directories
                .and_then(|dirs| dirs.into_iter().next())
                .unwrap_or_else(|| workdir.join("data")),
            commitlog_dir: file.commitlog_directory.unwrap_or_else(|| workdir.join("commitlog")),
            commitlog_sync,
            commitlog_segment_bytes: segment_mb << 20,
            commitlog_total_space_bytes: total_mb << 20,
            memtable_space_bytes,
            workdir,
            smp,
            memory_bytes,
            cluster_name: file.cluster_name.unwrap_or_else(|| "Shoal Cluster".to_string()),
            listen_address,
            storage_port,
            seeds,
            first_seed,
            max_hint_window: Duration::from_millis(
                args.max_hint_window_in_ms.or(file.max_hint_window_in_ms).unwrap_or(3 * 3600 * 1000),
            ),
            shutdown_announce: Duration::from_millis(
                args.shutdown_announce_in_ms.or(file.shutdown_announce_in_ms).unwrap_or(2000),
            ),
            failure_detector_timeout: Duration::from_millis(
                args.failure_detector_timeout_in_ms.or(file.failure_detector_timeout_in_ms).unwrap_or(20_000),
            ),
            num_tokens: match args.num_tokens.or(file.num_tokens).unwrap_or(256) {
                0 => return Err(ConfigError::TooSmall("num_tokens", 1)),
                n => n,
            },
            allocate_tokens_for_local_replication_factor: match args
                .allocate_tokens_for_local_replication_factor
                .or(file.allocate_tokens_for_local_replication_factor)
                .unwrap_or(3)
            {
                0 => return Err(ConfigError::TooSmall("allocate_tokens_for_local_replication_factor", 1)),
                n => n,
            },
            group0_snapshot_threshold: match args
                .group0_snapshot_threshold
                .or(file.group0_snapshot_threshold)
                .unwrap_or(1024)
            {
                0 => return Err(ConfigError::TooSmall("group0_snapshot_threshold", 1)),
                n => n,
            },
            replace_node_first_boot: args.replace_node_first_boot.or(file.replace_node_first_boot),
            data_center: args.dc.unwrap_or_else(|| DEFAULT_DATA_CENTER.to_string()),
            rack: args.rack.unwrap_or_else(|| DEFAULT_RACK.to_string()),
            cross_dc_forwarding,
            native_transport_port,
            client_tls,
            internode_tls,
            memcache_tls,
            memcache_auth_file: args.memcache_auth_file.or(file.memcache_auth_file),
            authenticator: match args.authenticator.or(file.authenticator) {
                Some(name) => name.parse().map_err(ConfigError::Authenticator)?,
                None => Authenticator::default(),
            },
            authorizer: match args.authorizer.or(file.authorizer) {
                Some(name) => name.parse().map_err(ConfigError::Authenticator)?,
                None => Authorizer::default(),
            },
            permissions_validity_ms: args
                .permissions_validity_in_ms
                .or(file.permissions_validity_in_ms)
                .unwrap_or(shoal_cql::auth::config::PERMISSIONS_VALIDITY_MS_DEFAULT),
            tls_handshake_timeout: Duration::from_millis(
                args.tls_handshake_timeout_in_ms.or(file.tls_handshake_timeout_in_ms).unwrap_or(10_000),
            ),
            api_address: args.api_address.or(file.api_address).unwrap_or([127, 0, 0, 1].into()),
            native_shard_aware_transport_port: args
                .native_shard_aware_transport_port
                .or(file.native_shard_aware_transport_port)
                .unwrap_or(19042),
            api_port: args.api_port.or(file.api_port).unwrap_or(10000),
            memcache_port: args.memcache_port.or(file.memcache_port).unwrap_or(11211),
            memcache_max_size_bytes,
            memcache_levels,
            max_frame_bytes: file.native_transport_max_frame_size_in_mb.unwrap_or(256) << 20,
            pin_shards: !args.no_pin,
            transparent_hugepages: args.transparent_hugepages,
        })
    }
}

/// A memcached consistency level by its CQL name (any case); ONE unset.
/// ANY and the serial levels are refused: an item operation is neither a
/// hint nor a Paxos round.
fn item_level(name: Option<String>) -> Result<ConsistencyLevel, ConfigError> {
    let Some(name) = name else { return Ok(ConsistencyLevel::One) };
    let level = ConsistencyLevel::from_name(&name.to_ascii_uppercase());
    match level {
        Some(ConsistencyLevel::Any | ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial) | None => {
            Err(ConfigError::ItemConsistency(name))
        }
        Some(level) => Ok(level),
    }
}

/// The request timeouts, scylla.yaml's `*_timeout_in_ms` keys over
/// ScyllaDB's defaults.
fn timeouts(file: &OptionsFile) -> Timeouts {
    let ms = |option: Option<u64>, default: Duration| option.map_or(default, Duration::from_millis);
    let defaults = Timeouts::default();
    Timeouts {
        read: ms(file.read_request_timeout_in_ms, defaults.read),
        range: ms(file.range_request_timeout_in_ms, defaults.range),
        write: ms(file.write_request_timeout_in_ms, defaults.write),
        counter_write: ms(file.counter_write_request_timeout_in_ms, defaults.counter_write),
        cas: ms(file.cas_contention_timeout_in_ms, defaults.cas),
        truncate: ms(file.truncate_request_timeout_in_ms, defaults.truncate),
    }
}

fn read_options(path: &Path) -> Result<OptionsFile, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    if text.trim().is_empty() {
        return Ok(OptionsFile::default());
    }
    serde_yaml::from_str(&text).map_err(|source| ConfigError::Parse { path: path.to_path_buf(), source })
}

/// `ip1,ip2:port,...`; a seed without a port is at `storage_port`.
fn parse_seeds(text: &str, storage_port: u16) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut seeds = Vec::new();
    for seed in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed = match seed.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, storage_port),
            Err(_) => seed.parse::<SocketAddr>().map_err(|_| ConfigError::Seed(seed.to_string()))?,
        };
        if !seeds.contains(&parsed) {
            seeds.push(parsed);
        }
    }
    Ok(seeds)
}

/// `2G`, `512M`, `1024` (bytes).
fn parse_size(text: &str) -> Result<u64, ConfigError> {
    let trimmed = text.trim();
    let (digits, unit) = trimmed.split_at(trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len()));
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(ConfigError::Memory(text.to_string())),
    };
    let number: u64 = digits.parse().map_err(|_| ConfigError::Memory(text.to_string()))?;
    number.checked_shl(shift).filter(|b| b >> shift == number).ok_or_else(|| ConfigError::Memory(text.to_string()))
}

/// 90% of the memory this process may use: physical memory, or the
/// cgroup's limit when it is lower (a container started with `--memory`,
/// a systemd unit with `MemoryMax=`), as Seastar reads it. 1 GiB if the
/// kernel says nothing.
fn default_memory_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let physical = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024);
    let cgroup = CGROUP_MEMORY_LIMITS
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .find_map(|text| cgroup_memory_limit(&text));
    let usable = match (physical, cgroup) {
        (Some(p), Some(c)) => p.min(c),
        (p, c) => p.or(c).unwrap_or(1 << 30),
    };
    usable / 10 * 9
}

/// Where the kernel shows this process's cgroup memory limit: cgroup v2
/// (the container's own root when it has a cgroup namespace), then v1.
const CGROUP_MEMORY_LIMITS: [&str; 2] = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"];

/// A cgroup memory limit file's value: `max` (v2) or a huge number (v1's
/// "unlimited", rounded down to a page) mean no limit.
fn cgroup_memory_limit(text: &str) -> Option<u64> {
    const UNLIMITED_V1_BYTES: u64 = 1 << 60;
    text.trim().parse::<u64>().ok().filter(|&bytes| bytes > 0 && bytes < UNLIMITED_V1_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_limits_parse_and_unlimited_is_none() {
        assert_eq!(cgroup_memory_limit("2147483648\n"), Some(2 << 30));
        assert_eq!(cgroup_memory_limit("max\n"), None);
        assert_eq!(cgroup_memory_limit("9223372036854771712\n"), None);
        assert_eq!(cgroup_memory_limit(""), None);
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("2G").ok(), Some(2 << 30));
        assert_eq!(parse_size("512M").ok(), Some(512 << 20));
        assert_eq!(parse_size("1024").ok(), Some(1024));
        assert_eq!(parse_size("3GB").ok(), Some(3 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn flags_beat_the_file_and_defaults_fill_the_rest() {
        let dir = std::env::temp_dir().join(format!("shoal-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("shoal.yaml");
        std::fs::write(&path, "native_transport_port: 9100\napi_port: 10100\ncluster_name: Test\n").ok();
        let args =
            ServerArgs { options_file: Some(path), api_port: Some(10200), smp: Some(3), ..ServerArgs::default() };
        let config = Config::resolve(args).ok();
        let config = config.as_ref();
        assert_eq!(config.map(|c| c.native_transport_port), Some(9100));
        assert_eq!(config.map(|c| c.api_port), Some(10200));
        assert_eq!(config.map(|c| c.native_shard_aware_transport_port), Some(19042));
        assert_eq!(config.map(|c| c.cluster_name.as_str()), Some("Test"));
        assert_eq!(config.map(|c| c.smp), Some(3));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn seeds_come_from_the_flag_or_scylla_yaml_and_skip_this_node() {
        let dir = std::env::temp_dir().join(format!("shoal-config-seeds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("shoal.yaml");
        let yaml = "listen_address: 127.0.0.2\nstorage_port: 7100\nseed_provider:\n  - class_name: \
                    org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \
                    \"127.0.0.1, 127.0.0.2, 127.0.0.3:7200\"\n";
        std::fs::write(&path, yaml).ok();
        let args = ServerArgs { options_file: Some(path.clone()), ..ServerArgs::default() };
        let seeds = Config::resolve(args).ok().map(|c| c.seeds);
        let expected: Vec<SocketAddr> =
            ["127.0.0.1:7100", "127.0.0.3:7200"].iter().filter_map(|s| s.parse().ok()).collect();
        assert_eq!(seeds, Some(expected));
        let args = ServerArgs { options_file: Some(path), seeds: Some("10.0.0.9".into()), ..ServerArgs::default() };
        let seeds = Config::resolve(args).ok().map(|c| c.seeds);
        assert_eq!(seeds, Some(vec![SocketAddr::from(([10, 0, 0, 9], 7100))]));
        assert!(matches!(parse_seeds("127.0.0.1,nonsense", 7000), Err(ConfigError::Seed(_))));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn memcached_levels_are_one_unless_named_and_never_serial_or_any() {
        let levels = |read: Option<&str>, write: Option<&str>| {
            let args = ServerArgs {
                smp: Some(1),
                memcache_read_consistency: read.map(str::to_string),
                memcache_write_consistency: write.map(str::to_string),
                ..ServerArgs::default()
            };
            Config::resolve(args).map(|c| (c.memcache_levels.read, c.memcache_levels.write))
        };
        assert_eq!(levels(None, None).ok(), Some((ConsistencyLevel::One, ConsistencyLevel::One)));
        let named = levels(Some("quorum"), Some("LOCAL_QUORUM")).ok();
        assert_eq!(named, Some((ConsistencyLevel::Quorum, ConsistencyLevel::LocalQuorum)));
        for refused in ["SERIAL", "any", "most"] {
            assert!(matches!(levels(None, Some(refused)), Err(ConfigError::ItemConsistency(_))), "{refused}");
        }
    }

    #[test]
    fn static_shares_replace_a_controller_only_when_set() {
        let resolve = |compaction: Option<u32>, flush: Option<u32>| {
            let args = ServerArgs {
                smp: Some(1),
                compaction_static_shares: compaction,
                memtable_flush_static_shares: flush,
                ..ServerArgs::default()
            };
            Config::resolve(args).map(|c| (c.compaction_static_shares, c.memtable_flush_static_shares))
        };
        assert_eq!(resolve(None, None).ok(), Some((None, None)));
        assert_eq!(resolve(Some(0), Some(1000)).ok(), Some((None, Some(1000))));
        assert!(matches!(resolve(Some(1001), None), Err(ConfigError::StaticShares("compaction_static_shares", 1001))));
    }

    #[test]
    fn unknown_keys_in_the_file_are_errors() {
        let dir = std::env::temp_dir().join(format!("shoal-config-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("shoal.yaml");
        std::fs::write(&path, "native_transport_prot: 9100\n").ok();
        let args = ServerArgs { options_file: Some(path), ..ServerArgs::default() };
        assert!(matches!(Config::resolve(args), Err(ConfigError::Parse { .. })));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_io_scheduler_is_on_unless_a_flag_or_the_file_says_off() {
        let dir = std::env::temp_dir().join(format!("shoal-config-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("shoal.yaml");
        let defaults = Config::resolve(ServerArgs { smp: Some(1), ..ServerArgs::default() }).ok();
        let defaults = defaults.as_ref();
        assert_eq!(defaults.map(|c| (c.io_scheduler_enabled, c.io_latency_goal_us)), Some((true, 750)));
        assert_eq!(defaults.map(|c| c.direct_io), Some(true));
        assert_eq!(defaults.map(|c| c.cpu_scheduler_enabled), Some(true));
        assert_eq!(defaults.map(|c| c.io_properties_file.is_none()), Some(true));
        let yaml = "io_scheduler_enabled: false\nio_properties_file: /etc/io.yaml\nio_latency_goal_ms: 1.5\ndirect_io: false\ncpu_scheduler_enabled: false\n";
        std::fs::write(&path, yaml).ok();
        let from_file = Config::resolve(ServerArgs { options_file: Some(path.clone()), ..ServerArgs::default() }).ok();
        let from_file = from_file.as_ref();
        assert_eq!(from_file.map(|c| (c.io_scheduler_enabled, c.io_latency_goal_us)), Some((false, 1500)));
        assert_eq!(from_file.and_then(|c| c.io_properties_file.clone()), Some(PathBuf::from("/etc/io.yaml")));
        assert_eq!(from_file.map(|c| c.direct_io), Some(false));
        assert_eq!(from_file.map(|c| c.cpu_scheduler_enabled), Some(false));
        let flag = ServerArgs { options_file: Some(path), io_scheduler: Some("on".into()), ..ServerArgs::default() };
        assert_eq!(Config::resolve(flag).ok().map(|c| c.io_scheduler_enabled), Some(true));
        let bad = ServerArgs { io_scheduler: Some("maybe".into()), ..ServerArgs::default() };
        assert!(matches!(Config::resolve(bad), Err(ConfigError::OnOff("io-scheduler", _))));
        let bad = ServerArgs { cpu_scheduler: Some("maybe".into()), ..ServerArgs::default() };
        assert!(matches!(Config::resolve(bad), Err(ConfigError::OnOff("cpu-scheduler", _))));
        let bad = ServerArgs { direct_io: Some("maybe".into()), ..ServerArgs::default() };
        assert!(matches!(Config::resolve(bad), Err(ConfigError::OnOff("direct-io", _))));
        let bad = ServerArgs { io_latency_goal_ms: Some(0.0), ..ServerArgs::default() };
        assert!(matches!(Config::resolve(bad), Err(ConfigError::LatencyGoal(_))));
        std::fs::remove_dir_all(&dir).ok();
    }
}
