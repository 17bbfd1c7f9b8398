//! `shoal`: starts a node. Parses the configuration, loads the schema, starts
//! one shard per core and the listeners on shard 0. Wiring only.

mod api;
mod backup;
mod config;
mod iotune;
mod logging;
mod nodetool;
mod shutdown;

/// mimalloc keeps a heap per thread, which suits one thread per shard, and
/// frees in bulk far more smoothly than glibc's malloc: measured with
/// `shoal stress --rate 40000` writes across memtable flushes, the flushed
/// memtable's free took p99 from ~130 ms to ~3 ms and halved the RSS.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use config::{Cli, Command, CommitlogSync, Config};
use logging::LogSettings;
use shoal_coordinator::cluster::{node, set_node_info, NodeInfo};
use shoal_replica::StorageConfig;
use shoal_storage::commitlog::SyncMode;
use shoal_transport::connection::ServerConfig;
use shoal_transport::server::{self, Placement};

fn main() {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Server(args)) => *args,
        Some(Command::Nodetool(args)) => {
            finish(start_logging(&LogSettings::default()).and_then(|()| nodetool::run(args)))
        }
        Some(Command::Stress(args)) => {
            finish(start_logging(&LogSettings::default()).and_then(|()| shoal_stress::run(args)))
        }
        Some(Command::Iotune(args)) => finish(start_logging(&LogSettings::default()).and_then(|()| iotune::run(args))),
        Some(Command::Backup(args)) => {
            finish(start_logging(&LogSettings::default()).and_then(|()| backup::backup(args)))
        }
        Some(Command::Restore(args)) => {
            finish(start_logging(&LogSettings::default()).and_then(|()| backup::restore(args)))
        }
        None => cli.server,
    };
    if let Err(e) = start_logging(&args.log_settings()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let config = match Config::resolve(args) {
        Ok(config) => config,
        Err(e) => fail(&e.to_string()),
    };
    if let Err(e) = run(config) {
        fail(&e);
    }
}

fn start_logging(settings: &LogSettings) -> Result<(), String> {
    logging::init(settings).map_err(|e| e.to_string())
}

/// Ends a client subcommand: exit 0, or print the error and exit 1.
fn finish(result: Result<(), String>) -> ! {
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

fn fail(message: &str) -> ! {
    tracing::error!("{message}");
    std::process::exit(1);
}

fn run(config: Config) -> Result<(), String> {
    std::fs::create_dir_all(&config.workdir)
        .map_err(|e| format!("cannot create workdir {}: {e}", config.workdir.display()))?;
    let host_id = node_identity(&config)?;
    check_shard_count(&config)?;
    shoal_coordinator::set_timeouts(config.timeouts);
    shutdown::set_announce_grace(config.shutdown_announce);
    // Caught before the shards start, so a signal during start-up stops
    // the node cleanly too.
    let signals = Arc::new(shutdown::SignalsSlot::new(shutdown::catch_signals()?));
    shoal_coordinator::set_hint_window(config.max_hint_window);
    shoal_coordinator::set_cross_dc_forwarding(config.cross_dc_forwarding);
    set_node_info(NodeInfo {
        cluster_name: config.cluster_name.clone(),
        host_id,
        address: config.listen_address,
        data_center: config.data_center.clone(),
        rack: config.rack.clone(),
    });
    shoal_cluster::messaging::set_identity(shoal_cluster::messaging::Identity {
        cluster_name: config.cluster_name.clone(),
        host_id,
        address: config.listen_address,
        storage_port: config.storage_port,
        shard_count: u16::try_from(config.smp).map_err(|_| format!("--smp {} is too many shards", config.smp))?,
    });
    let schema_path = config.workdir.join("schema.cql");
    let schema = Arc::new(shoal_cql::schema_file::load(&schema_path).map_err(|e| e.to_string())?);
    shoal_coordinator::set_schema_file(schema_path, shoal_cql::schema_file::render, shoal_cql::schema_file::parse_text);
    tracing::info!(
        "starting {} shard(s), workdir {}, memory {} MiB",
        config.smp,
        config.workdir.display(),
        config.memory_bytes >> 20
    );
    configure_io_scheduler(&config)?;
    let tls = tls_setup(&config).map_err(|e| e.to_string())?;
    let server_config = Arc::new(ServerConfig {
        max_frame_bytes: config.max_frame_bytes,
        shard_aware_port: config.native_shard_aware_transport_port,
        shard_aware_port_ssl: config
            .client_tls
            .as_ref()
            .map(|tls| tls.ssl_ports.map_or(config.native_shard_aware_transport_port, |(_, shard_aware)| shard_aware)),
        nr_shards: config.smp,
        sharding_ignore_msb: shoal_coordinator::SHARDING_IGNORE_MSB,
        authenticator: config.authenticator,
        login_timeout: config.tls_handshake_timeout,
    });
    shoal_cql::auth::configure(shoal_cql::auth::AuthConfig {
        authenticator: config.authenticator,
        authorizer: config.authorizer,
        permissions_validity_ms: config.permissions_validity_ms,
    });
    if !config.transparent_hugepages {
        if let Err(e) = shoal_runtime::memory::disable_transparent_huge_pages() {
            tracing::warn!("cannot turn transparent huge pages off ({e}); page faults may stall shards");
        }
    }
    let pin = config.pin_shards.then(shoal_runtime::allowed_cpus);
    let shards = shoal_runtime::start_shards(config.smp, pin, move |shard| {
        shoal_transport::metrics::register_metrics();
        shoal_cql::metrics::register_metrics();
        shoal_coordinator::register_metrics();
        shoal_memcache::stats::register_metrics();
        shoal_replica::local().set_schema(Arc::clone(&schema), None);
        shoal_cluster::start_shard();
        shoal_coordinator::start_shard();
        let config = config.clone();
        let server_config = Arc::clone(&server_config);
        let tls = tls.clone();
        let signals = if shard == 0 { signals.take() } else { None };
        async move {
            if let Some(signals) = signals {
                shoal_runtime::spawn(shutdown::on_signals(signals));
            }
            shoal_coordinator::open_hints(&config.hints_dir).await;
            shoal_coordinator::open_batchlog(&config.workdir.join("batchlog")).await;
            if shard == 0 {
                if let Err(e) = open_storage(&config).await {
                    fail(&e);
                }
                shoal_coordinator::resume_view_builds().await;
                match node_tokens(&config).await {
                    Ok(tokens) => shoal_coordinator::cluster::set_tokens(tokens),
                    Err(e) => fail(&e),
                }
                if let Err(e) = listen(&config, server_config, tls).await {
                    fail(&e);
                }
            }
        }
    })
    .map_err(|e| e.to_string())?;
    // The shards run until the process exits (a clean stop: `shutdown`).
    shards.join();
    Ok(())
}

/// The I/O scheduler's settings, for every shard: the disk's capacity
/// from `--io-properties-file`, or a conservative default (logged).
fn configure_io_scheduler(config: &Config) -> Result<(), String> {
    let properties = match &config.io_properties_file {
        Some(path) => shoal_io::IoProperties::load(path).map_err(|e| format!("io_properties_file: {e}"))?,
        None => {
            tracing::info!(
                "no io_properties_file: the I/O scheduler assumes a modest NVMe drive; run `shoal iotune --workdir {}` and pass --io-properties-file",
                config.workdir.display()
            );
            shoal_io::IoProperties::CONSERVATIVE
        }
    };
    if !config.io_scheduler_enabled {
        tracing::warn!("the I/O scheduler is off (--io-scheduler off): for contrast benchmarks only");
    }
    if !config.direct_io {
        tracing::warn!(
            "direct I/O is off (--direct-io off): files go through the page cache; for contrast benchmarks only"
        );
    }
    if !config.cpu_scheduler_enabled {
        tracing::warn!("the CPU scheduler is off (--cpu-scheduler off): for contrast benchmarks only");
    }
    shoal_runtime::sched::set_enabled(config.cpu_scheduler_enabled);
    shoal_io::set_direct_io(config.direct_io);
    shoal_io::configure(shoal_io::SchedulerConfig {
        enabled: config.io_scheduler_enabled,
        properties,
        shard_count: config.smp,
        latency_goal_us: config.io_latency_goal_us,
    });
    Ok(())
}

/// Opens every shard's tables and replays its commitlog; called on shard 0
/// before any listener opens.
async fn open_storage(config: &Config) -> Result<(), String> {
    let smp = config.smp as u64;
    let storage = StorageConfig {
        data_dir: config.data_dir.clone(),
        commitlog_dir: config.commitlog_dir.clone(),
        sync: match config.commitlog_sync {
            CommitlogSync::Periodic { period_ms } => SyncMode::Periodic { period_ms },
            CommitlogSync::Batch => SyncMode::Batch,
        },
        segment_size_bytes: config.commitlog_segment_bytes,
        commitlog_space_bytes: config.commitlog_total_space_bytes / smp,
        memtable_budget_bytes: (config.memtable_space_bytes / smp) as usize,
        memory_budget_bytes: (config.memory_bytes / smp) as usize,
        index_cache_fraction: config.index_cache_fraction,
        saved_caches_dir: config.saved_caches_dir.clone(),
        in_memory_limit_bytes: (config.in_memory_storage_bytes / smp) as usize,
        cache_save_period: (config.row_cache_save_period_s > 0)
            .then(|| std::time::Duration::from_secs(config.row_cache_save_period_s)),
        static_shares: shoal_replica::StaticShares {
            compaction: config.compaction_static_shares,
            flush: config.memtable_flush_static_shares,
        },
    };
    let started = std::time::Instant::now();
    let reports = futures_util::future::join_all((0..config.smp).map(|shard| {
        let storage = storage.clone();
        shoal_runtime::submit_to(shard, move || async move { shoal_replica::local().open_storage(storage).await })
    }))
    .await;
    for (shard, report) in reports.into_iter().enumerate() {
        let report = report.map_err(|e| e.to_string())?.map_err(|e| format!("shard {shard}: {e}"))?;
        tracing::info!(
            "shard {shard}: {} table(s), {} SSTable(s); replayed {} commitlog segment(s), {} entries, {} bytes{}{}",
            report.tables,
            report.sstables,
            report.segments_replayed,
            report.entries_replayed,
            report.bytes_replayed,
            if report.quarantined.is_empty() {
                String::new()
            } else {
                format!("; quarantined {:?}", report.quarantined)
            },
            if report.removed_partial == 0 {
                String::new()
            } else {
                format!("; removed {} half-written", report.removed_partial)
            },
        );
    }
    tracing::info!(
        "storage open in {} ms (commitlog {:?}, data {}, commitlog {})",
        started.elapsed().as_millis(),
        config.commitlog_sync,
        config.data_dir.display(),
        config.commitlog_dir.display()
    );
    Ok(())
}

/// Data is placed on shards by token, so a workdir written with one shard
/// count cannot be served with another (resharding is not built yet).
fn check_shard_count(config: &Config) -> Result<(), String> {
    let path = config.workdir.join("shard_count");
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n == config.smp => Ok(()),
            Ok(n) => Err(format!(
                "{} holds data written by {n} shard(s); start with --smp {n} (changing the shard count of existing data is not supported yet)",
                config.workdir.display()
            )),
            Err(_) => Err(format!("{} is corrupt; it should hold the shard count", path.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::write(&path, config.smp.to_string())
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// What TLS the listeners speak and what memcached's ASCII authentication
/// allows, read at start (an error stops the node) and then reloaded when
/// their files change, by the watcher thread this starts.
#[derive(Clone, Default)]
struct TlsSetup {
    cql: Option<shoal_tls::Acceptor>,
    memcache: Option<shoal_tls::Acceptor>,
    memcache_auth: Option<shoal_tls::Reloadable<shoal_memcache::auth::AuthTable>>,
}

#[derive(Debug, thiserror::Error)]
enum TlsSetupError {
    #[error("{what}: {source}")]
    Tls { what: &'static str, source: shoal_tls::TlsError },
    #[error("memcache_auth_file {path}: {message}")]
    AuthFile { path: std::path::PathBuf, message: String },
    #[error("cannot start the thread that reloads certificates: {0}")]
    Watcher(std::io::Error),
}

fn tls_setup(config: &Config) -> Result<TlsSetup, TlsSetupError> {
    let mut watcher = shoal_tls::Watcher::new();
    let timeout = config.tls_handshake_timeout;
    let mut acceptor = |what: &'static str, files: &shoal_tls::TlsFiles| {
        shoal_tls::Acceptor::new(what, files.clone(), timeout, &mut watcher)
            .map_err(|source| TlsSetupError::Tls { what, source })
    };
    let cql = config.client_tls.as_ref().map(|tls| acceptor("client_encryption_options", &tls.files)).transpose()?;
    let memcache = config.memcache_tls.as_ref().map(|files| acceptor("memcache_ssl", files)).transpose()?;
    if let Some(internode) = &config.internode_tls {
        let what = "server_encryption_options";
        let acceptor = acceptor(what, &internode.files)?;
        let connector =
            shoal_tls::Connector::new(what, internode.files.clone(), internode.verify_name, timeout, &mut watcher)
                .map_err(|source| TlsSetupError::Tls { what, source })?;
        shoal_cluster::encryption::set_internode_tls(shoal_cluster::encryption::InternodeTls {
            encryption: internode.encryption,
            placement: shoal_cluster::replication::Placement {
                data_center: config.data_center.clone(),
                rack: config.rack.clone(),
            },
            ssl_port: internode.ssl_storage_port,
            acceptor,
            connector,
        });
    }
    let memcache_auth = match &config.memcache_auth_file {
        Some(path) => {
            let read = {
                let path = path.clone();
                move || {
                    let text = std::fs::read(&path).map_err(|e| e.to_string())?;
                    shoal_memcache::auth::AuthTable::parse(&text).map(Arc::new).map_err(|e| e.to_string())
                }
            };
            let table = read().map_err(|message| TlsSetupError::AuthFile { path: path.clone(), message })?;
            let table = shoal_tls::Reloadable::new(table);
            watcher.watch("memcache_auth_file", vec![path.clone()], &table, read);
            Some(table)
        }
        None => None,
    };
    watcher.spawn().map_err(TlsSetupError::Watcher)?;
    Ok(TlsSetup { cql, memcache, memcache_auth })
}

/// Binds every listener on shard 0, logs one line each, then "ready": the
/// internode and API ports first, the client ports once the node has
/// joined the ring (bootstrap streams its data first).
async fn listen(config: &Config, server_config: Arc<ServerConfig>, tls: TlsSetup) -> Result<(), String> {
    let address = config.listen_address;
    let bind_at = |address: std::net::IpAddr, port: u16| {
        let at = SocketAddr::new(address, port);
        async move { server::bind(at).await.map_err(|e| format!("cannot listen on {at}: {e}")) }
    };
    let bind = |port: u16| bind_at(address, port);
    let api = bind_at(config.api_address, config.api_port).await?;
    tracing::info!("HTTP API (/metrics) listening on {}:{}", config.api_address, config.api_port);
    let seeds = if config.seeds.is_empty() {
        "none".to_string()
    } else {
        config.seeds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    };
    if shoal_cluster::encryption::plain_port_open() {
        let storage = bind(config.storage_port).await?;
        tracing::info!("internode messaging listening on {}:{}; seeds: {seeds}", address, config.storage_port);
        shoal_runtime::spawn(shoal_cluster::messaging::serve(storage));
    }
    if let Some(internode) = &config.internode_tls {
        let storage = bind(internode.ssl_storage_port).await?;
        tracing::info!(
            "internode messaging (TLS, internode_encryption {:?}) listening on {}:{}; seeds: {seeds}",
            internode.encryption,
            address,
            internode.ssl_storage_port
        );
        shoal_runtime::spawn(shoal_cluster::messaging::serve_tls(storage));
    }
    shoal_runtime::spawn(shoal_cluster::failure_detector::run(config.seeds.clone(), config.failure_detector_timeout));
    shoal_runtime::spawn(shoal_cluster::group0::run(shoal_cluster::group0::Group0Config {
        dir: config.workdir.join("raft"),
        me: group0_member(config, shoal_coordinator::cluster::tokens()),
        bootstrap: config.first_seed,
        apply_schema: shoal_coordinator::schema_applier(),
        token_allocation_rf: config.allocate_tokens_for_local_replication_factor,
        snapshot_threshold_entries: config.group0_snapshot_threshold,
    }));
    shoal_runtime::spawn(shoal_coordinator::maintain_topology());
    shoal_runtime::spawn(shoal_coordinator::cluster::publish_load());
    shoal_runtime::spawn(api::serve(api, config.data_dir.clone()));
    shoal_coordinator::node_ops::bootstrap().await.map_err(|e| format!("bootstrap failed: {e}"))?;
    if config.authenticator == shoal_cql::auth::Authenticator::Password {
        // Once the node holds the cluster's roles, so it adds none to a cluster that has some.
        let created = shoal_cql::auth::roles::ensure_default_superuser().await;
        created.map_err(|e| format!("cannot create the default superuser: {e}"))?;
    }
    shoal_runtime::spawn(async {
        let why = shoal_coordinator::node_ops::until_removed().await;
        tracing::error!("stopping: {why}");
        std::process::exit(1);
    });
    // With TLS on ports of its own, the native ports stay plaintext.
    let (native_tls, ssl_ports) = match config.client_tls.as_ref().and_then(|t| t.ssl_ports) {
        Some(ports) => (None, Some(ports)),
        None => (tls.cql.clone(), None),
    };
    let kind = if native_tls.is_some() { " (TLS)" } else { "" };
    let cql = bind(config.native_transport_port).await?;
    tracing::info!("CQL native transport{kind} listening on {}:{}", address, config.native_transport_port);
    let shard_aware = bind(config.native_shard_aware_transport_port).await?;
    tracing::info!(
        "CQL shard-aware transport{kind} listening on {}:{}",
        address,
        config.native_shard_aware_transport_port
    );
    let ssl_listeners = match ssl_ports {
        Some((port, shard_aware_port)) => {
            let regular = bind(port).await?;
            tracing::info!("CQL native transport (TLS) listening on {address}:{port}");
            let shard_aware = bind(shard_aware_port).await?;
            tracing::info!("CQL shard-aware transport (TLS) listening on {address}:{shard_aware_port}");
            Some((regular, shard_aware))
        }
        None => None,
    };
    let memcache = match config.memcache_port {
        0 => None,
        port => {
            // Through group 0, which runs now: every node has the table.
            create_items_table().await?;
            let listener = bind(port).await?;
            tracing::info!(
                "memcached protocol{}{} listening on {}:{} (items in {}.{})",
                if tls.memcache.is_some() { " (TLS)" } else { "" },
                if tls.memcache_auth.is_some() { " (ASCII authentication)" } else { "" },
                address,
                port,
                shoal_memcache::items_table::DEFAULT_KEYSPACE,
                shoal_memcache::items_table::DEFAULT_TABLE
            );
            Some(listener)
        }
    };
    shoal_cql::protocol_servers::set(protocol_servers(config, address, ssl_ports));
    shoal_runtime::spawn(server::serve(cql, Placement::RoundRobin, Arc::clone(&server_config), native_tls.clone()));
    shoal_runtime::spawn(server::serve(shard_aware, Placement::BySourcePort, Arc::clone(&server_config), native_tls));
    if let Some((regular, shard_aware)) = ssl_listeners {
        shoal_runtime::spawn(server::serve(
            regular,
            Placement::RoundRobin,
            Arc::clone(&server_config),
            tls.cql.clone(),
        ));
        shoal_runtime::spawn(server::serve(shard_aware, Placement::BySourcePort, server_config, tls.cql));
    }
    if let Some(listener) = memcache {
        let memcache_config = Arc::new(shoal_memcache::Config {
            keyspace: shoal_memcache::items_table::DEFAULT_KEYSPACE.to_string(),
            table: shoal_memcache::items_table::DEFAULT_TABLE.to_string(),
            limits: shoal_memcache::Limits { item_size_max_bytes: MEMCACHE_ITEM_SIZE_MAX_BYTES },
            max_size_bytes: config.memcache_max_size_bytes,
            levels: config.memcache_levels,
            port: config.memcache_port,
            tls: tls.memcache,
            auth: tls.memcache_auth,
        });
        shoal_runtime::spawn(shoal_memcache::server::serve(listener, memcache_config));
    }
    tracing::info!("ready");
    Ok(())
}

/// memcached's default `-I`: the largest item stored.
const MEMCACHE_ITEM_SIZE_MAX_BYTES: usize = 1 << 20;

/// Creates the memcached items table if it is missing, through the schema
/// service, as a CQL client's `CREATE ... IF NOT EXISTS` would.
/// What `system.protocol_servers` lists: CQL on its ports (plain and TLS),
/// memcached on its own when it is served.
fn protocol_servers(
    config: &Config,
    address: std::net::IpAddr,
    ssl_ports: Option<(u16, u16)>,
) -> Vec<shoal_cql::protocol_servers::ProtocolServer> {
    let at = |port: u16| std::net::SocketAddr::new(address, port).to_string();
    let mut cql_ports = vec![config.native_transport_port, config.native_shard_aware_transport_port];
    cql_ports.extend(ssl_ports.map(|(port, shard_aware)| [port, shard_aware]).into_iter().flatten());
    let mut servers = vec![shoal_cql::protocol_servers::ProtocolServer {
        name: "native transport",
        protocol: "cql",
        protocol_version: shoal_cql::system::CQL_VERSION,
        listen_addresses: cql_ports.into_iter().map(at).collect(),
    }];
    if config.memcache_port != 0 {
        servers.push(shoal_cql::protocol_servers::ProtocolServer {
            name: "memcached",
            protocol: "memcached",
            protocol_version: shoal_memcache::VERSION,
            listen_addresses: vec![at(config.memcache_port)],
        });
    }
    servers
}

async fn create_items_table() -> Result<(), String> {
    use shoal_memcache::items_table::{create_statements, DEFAULT_KEYSPACE, DEFAULT_TABLE};
    for text in create_statements(DEFAULT_KEYSPACE, DEFAULT_TABLE) {
        let statement =
            shoal_cql::parser::parse_statement(&text).map_err(|e| format!("memcached items table: {e}"))?.statement;
        let transition = move |schema: &shoal_schema::Schema| shoal_cql::ddl::apply(schema, &statement, None);
        shoal_coordinator::announce_schema_change(transition)
            .await
            .map_err(|e| format!("memcached items table: {e}"))?
            .map_err(|e| format!("memcached items table: {e}"))?;
    }
    Ok(())
}

/// The node's tokens: chosen on first start, `num_tokens` of them — by the
/// node itself, evenly spread, when it forms the cluster (the first seed);
/// else by group 0's leader against the ring when the node joins through
/// its seeds (`cluster::group0::join_through_seeds`: the node waits here
/// for them), or those of the dead member it replaces — kept in the workdir one per line and read back on every
/// later start.
async fn node_tokens(config: &Config) -> Result<Vec<i64>, String> {
    let host_id = node().host_id;
    let path = config.workdir.join("tokens");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let tokens: Result<Vec<i64>, _> = text.split_whitespace().map(str::parse::<i64>).collect();
            match tokens {
                Ok(tokens) if !tokens.is_empty() => Ok(tokens),
                _ => Err(format!("{} is corrupt: it should hold this node's tokens, one per line", path.display())),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let replaces = config.replace_node_first_boot;
            let tokens = if config.first_seed {
                if let Some(replaced) = replaces {
                    return Err(format!(
                        "replace_node_first_boot {replaced}: a replacing node joins through a live seed; \
                         list one before this node in the seeds"
                    ));
                }
                let (ring, local) = (Default::default(), Default::default());
                shoal_cluster::token_allocation::allocate_tokens(&ring, &local, host_id, config.num_tokens, 1)
            } else {
                let me = group0_member(config, Vec::new());
                shoal_cluster::group0::join_through_seeds(&me, config.num_tokens, replaces, &config.seeds).await.tokens
            };
            let text: String = tokens.iter().map(|t| format!("{t}\n")).collect();
            std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(tokens)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// This node as group 0 records it.
fn group0_member(config: &Config, tokens: Vec<i64>) -> shoal_cluster::group0::Member {
    let me = node();
    shoal_cluster::group0::Member {
        host_id: me.host_id,
        address: SocketAddr::new(config.listen_address, config.storage_port),
        native_port: config.native_transport_port,
        shard_count: config.smp as u16,
        data_center: me.data_center,
        rack: me.rack,
        tokens,
    }
}

/// The node's host id: made on first start, kept in the workdir.
fn node_identity(config: &Config) -> Result<uuid::Uuid, String> {
    let path = config.workdir.join("host_id");
    match std::fs::read_to_string(&path) {
        Ok(text) => uuid::Uuid::parse_str(text.trim())
            .map_err(|e| format!("{} is corrupt ({e}); delete it to get a new host id", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4();
            std::fs::write(&path, id.to_string()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(id)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
