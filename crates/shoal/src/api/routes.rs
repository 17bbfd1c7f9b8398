//! The API's endpoints: [`Route::of`] names the one a request's method
//! and path ask for (404 for an unknown path, 405 for a known path asked
//! with another method), [`Route::answer`] answers it.

use shoal_http::{Method, Request, Response, Status};

use super::{compactions, node, ops, refresh, snapshots, top_partitions};

/// One endpoint, with what its path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics`: Prometheus text from every shard.
    Metrics,
    /// `GET /storage_service/hostid/local`, `cluster_name`,
    /// `/snitch/datacenter`, `/snitch/rack`, `/system/uptime_ms`,
    /// `/storage_service/operation_mode`, `/storage_service/tokens`,
    /// `/raft/leader_host`, `/raft/group0`, `/storage_service/schema_version`,
    /// `/storage_service/partitioner_name`.
    NodeState(node::State),
    /// `GET /gossiper/endpoint/live` (true) or `/down` (false).
    Endpoints(bool),
    /// `GET /column_family/name/keyspace` (every keyspace's name) or
    /// `/column_family/name` (every table's, as `keyspace:table`): what
    /// ScyllaDB's tools, and its test suite, ask to find the API.
    Names(node::Names),
    /// `GET /storage_service/host_id`, `/storage_service/load_map`,
    /// `/storage_service/tokens_endpoint`.
    PeerMap(node::PeerMap),
    /// `GET /failure_detector/endpoints`: each node's state, as gossip
    /// would carry it (`nodetool gossipinfo`).
    Gossip,
    /// `GET /storage_service/ownership/<keyspace>`.
    Ownership(String),
    /// `GET /storage_service/describe_ring/<keyspace>`: each range's
    /// replicas.
    DescribeRing(String),
    /// `GET /storage_service/natural_endpoints/<keyspace>?cf=&key=`.
    NaturalEndpoints(String),
    /// `GET /storage_service/snapshots`: every snapshot's tables and sizes.
    ListSnapshots,
    /// `DELETE /storage_service/snapshots[?tag=][&kn=]`.
    ClearSnapshots,
    /// `GET /system/logger`: the log levels in force.
    LoggerLevels,
    /// `POST /system/logger/<module>?level=`, `POST /system/logger?reset`.
    SetLoggerLevel(String),
    /// `GET /compaction_manager/compactions`: those under way.
    Compactions,
    /// `GET /compaction_manager/metrics/pending_tasks_by_table`.
    PendingCompactions,
    /// `POST /compaction_manager/stop_compaction?type=`.
    StopCompaction,
    /// `POST` (on) or `DELETE` (off)
    /// `/storage_service/auto_compaction[/<keyspace>][?cf=]`.
    AutoCompaction(Option<String>, bool),
    /// `GET /column_family/built_indexes/<keyspace>:<table>`: the table's
    /// indexes built on this node.
    BuiltIndexes(String, String),
    /// `POST` (on) or `DELETE` (off) `/column_family/autocompaction/<keyspace>:<table>`.
    TableAutoCompaction(String, String, bool),
    /// `GET /storage_service/trace_probability`.
    TraceProbability,
    /// `POST /storage_service/trace_probability?probability=`.
    SetTraceProbability,
    /// `GET /storage_service/toppartitions/?table_filters=&duration=...`.
    TopPartitions,
    /// `POST /storage_service/sstables/<keyspace>?cf=`: nodetool refresh.
    LoadSSTables(String),
    /// `GET /stream_manager/`: the loads of nodetool refresh under way.
    Streams,
    /// `POST /storage_service/...`: flush, compaction, snapshot, drain,
    /// decommission, remove_node, repair, rebuild, cleanup.
    Operation(ops::Operation),
}

impl Route {
    /// The route `request` asks for, or the status refusing it.
    pub fn of(request: &Request) -> Result<Route, Status> {
        let (wanted, route) = Self::by_path(request).ok_or(Status::NotFound)?;
        match request.method == wanted {
            true => Ok(route),
            false => Err(Status::MethodNotAllowed),
        }
    }

    /// The route named by the path alone, with the method it needs.
    fn by_path(request: &Request) -> Option<(Method, Route)> {
        use node::{PeerMap, State};
        let path = request.path.as_str();
        let get = |route| Some((Method::Get, route));
        let state = |state| get(Route::NodeState(state));
        match path {
            "/metrics" => get(Route::Metrics),
            "/storage_service/hostid/local" => state(State::HostId),
            "/storage_service/cluster_name" => state(State::ClusterName),
            "/storage_service/schema_version" => state(State::SchemaVersion),
            "/storage_service/partitioner_name" => state(State::Partitioner),
            "/storage_service/operation_mode" => state(State::OperationMode),
            "/storage_service/tokens" => state(State::Tokens),
            "/snitch/datacenter" => state(State::DataCenter),
            "/snitch/rack" => state(State::Rack),
            "/system/uptime_ms" => state(State::UptimeMs),
            "/raft/leader_host" => state(State::LeaderHost),
            "/raft/group0" => state(State::Group0),
            "/gossiper/endpoint/live" => get(Route::Endpoints(true)),
            "/gossiper/endpoint/down" => get(Route::Endpoints(false)),
            "/column_family/name/keyspace" => get(Route::Names(node::Names::Keyspaces)),
            "/column_family/name" => get(Route::Names(node::Names::Tables)),
            "/storage_service/host_id" => get(Route::PeerMap(PeerMap::HostIds)),
            "/storage_service/load_map" => get(Route::PeerMap(PeerMap::Load)),
            "/storage_service/tokens_endpoint" => get(Route::PeerMap(PeerMap::Tokens)),
            "/failure_detector/endpoints" => get(Route::Gossip),
            "/storage_service/snapshots" if request.method == Method::Get => get(Route::ListSnapshots),
            "/storage_service/snapshots" if request.method == Method::Delete => {
                Some((Method::Delete, Route::ClearSnapshots))
            }
            "/system/logger" if request.method == Method::Get => get(Route::LoggerLevels),
            "/compaction_manager/compactions" => get(Route::Compactions),
            "/compaction_manager/metrics/pending_tasks_by_table" => get(Route::PendingCompactions),
            "/compaction_manager/stop_compaction" => Some((Method::Post, Route::StopCompaction)),
            "/storage_service/trace_probability" if request.method == Method::Get => get(Route::TraceProbability),
            "/storage_service/trace_probability" => Some((Method::Post, Route::SetTraceProbability)),
            "/storage_service/toppartitions" | "/storage_service/toppartitions/" => get(Route::TopPartitions),
            "/stream_manager" | "/stream_manager/" => get(Route::Streams),
            _ => Self::with_argument(request).or_else(|| {
                let operation = ops::Operation::by_path(path)?;
                Some((Method::Post, Route::Operation(operation)))
            }),
        }
    }

    /// The routes whose path carries an argument after a prefix.
    fn with_argument(request: &Request) -> Option<(Method, Route)> {
        let keyspace = |prefix| request.rest_of(prefix).filter(|k| !k.is_empty()).map(str::to_string);
        if let Some(keyspace) = keyspace("/storage_service/ownership") {
            return Some((Method::Get, Route::Ownership(keyspace)));
        }
        if let Some(keyspace) = keyspace("/storage_service/describe_ring") {
            return Some((Method::Get, Route::DescribeRing(keyspace)));
        }
        if let Some(keyspace) = keyspace("/storage_service/natural_endpoints") {
            return Some((Method::Get, Route::NaturalEndpoints(keyspace)));
        }
        if let Some(keyspace) = request.rest_of("/storage_service/auto_compaction") {
            let keyspace = Some(keyspace.to_string()).filter(|k| !k.is_empty());
            return Some(match request.method {
                Method::Delete => (Method::Delete, Route::AutoCompaction(keyspace, false)),
                _ => (Method::Post, Route::AutoCompaction(keyspace, true)),
            });
        }
        if let Some((keyspace, table)) =
            request.rest_of("/column_family/built_indexes").and_then(|name| name.split_once(':'))
        {
            return Some((Method::Get, Route::BuiltIndexes(keyspace.to_string(), table.to_string())));
        }
        if let Some((keyspace, table)) =
            request.rest_of("/column_family/autocompaction").and_then(|name| name.split_once(':'))
        {
            let enabled = request.method != Method::Delete;
            let method = if enabled { Method::Post } else { Method::Delete };
            return Some((method, Route::TableAutoCompaction(keyspace.to_string(), table.to_string(), enabled)));
        }
        if let Some(keyspace) = keyspace("/storage_service/sstables") {
            return Some((Method::Post, Route::LoadSSTables(keyspace)));
        }
        let module = request.rest_of("/system/logger")?;
        Some((Method::Post, Route::SetLoggerLevel(module.to_string())))
    }

    /// Answers the route.
    pub async fn answer(self, request: &Request) -> Response {
        match self {
            Route::Metrics => Response::prometheus(node::metrics().await),
            Route::NodeState(state) => Response::json(&node::state(state).await),
            Route::Endpoints(live) => Response::json(&node::endpoints(live).await),
            Route::Names(names) => Response::json(&node::names(names)),
            Route::PeerMap(map) => Response::json(&node::peer_map(map).await),
            Route::Gossip => Response::json(&node::gossip().await),
            Route::Ownership(keyspace) => node::ownership(&keyspace).await,
            Route::DescribeRing(keyspace) => node::describe_ring(&keyspace),
            Route::NaturalEndpoints(keyspace) => node::natural_endpoints(&keyspace, request),
            Route::ListSnapshots => snapshots::list(),
            Route::ClearSnapshots => snapshots::clear(request),
            Route::LoggerLevels => ops::logger_levels(),
            Route::SetLoggerLevel(module) => ops::set_logger_level(&module, request),
            Route::Compactions => compactions::list().await,
            Route::PendingCompactions => compactions::pending_by_table().await,
            Route::StopCompaction => compactions::stop(request).await,
            Route::AutoCompaction(keyspace, enabled) => {
                let tables = request.param("cf").map(|cf| cf.split(',').map(str::to_string).collect());
                compactions::set_auto(keyspace, tables.unwrap_or_default(), enabled).await
            }
            Route::BuiltIndexes(keyspace, table) => node::built_indexes(&keyspace, &table).await,
            Route::TableAutoCompaction(keyspace, table, enabled) => {
                compactions::set_auto(Some(keyspace), vec![table], enabled).await
            }
            Route::TraceProbability => ops::trace_probability(),
            Route::SetTraceProbability => ops::set_trace_probability(request).await,
            Route::TopPartitions => top_partitions::sample(request).await,
            Route::LoadSSTables(keyspace) => refresh::load(keyspace, request).await,
            Route::Streams => refresh::streams(),
            Route::Operation(operation) => operation.run(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(head: &str) -> Result<Route, Status> {
        let request = Request::parse(head.as_bytes()).expect("valid").expect("complete");
        Route::of(&request)
    }

    #[test]
    fn names_routes_by_method_and_path() {
        assert_eq!(route("GET /metrics HTTP/1.1\r\n\r\n"), Ok(Route::Metrics));
        assert_eq!(route("POST /metrics HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(route("GET /nothing HTTP/1.1\r\n\r\n"), Err(Status::NotFound));
        assert_eq!(
            route("GET /column_family/name/keyspace HTTP/1.1\r\n\r\n"),
            Ok(Route::Names(node::Names::Keyspaces))
        );
        assert_eq!(route("GET /column_family/name HTTP/1.1\r\n\r\n"), Ok(Route::Names(node::Names::Tables)));
        assert_eq!(route("PUT /metrics HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(route("GET /storage_service/ownership/k%20s HTTP/1.1\r\n\r\n"), Ok(Route::Ownership("k s".into())));
        assert_eq!(route("GET /storage_service/ownership HTTP/1.1\r\n\r\n"), Err(Status::NotFound));
        assert_eq!(route("DELETE /storage_service/snapshots?tag=t HTTP/1.1\r\n\r\n"), Ok(Route::ClearSnapshots));
        assert_eq!(route("GET /storage_service/snapshots HTTP/1.1\r\n\r\n"), Ok(Route::ListSnapshots));
        assert_eq!(
            route("DELETE /column_family/autocompaction/ks:t HTTP/1.1\r\n\r\n"),
            Ok(Route::TableAutoCompaction("ks".into(), "t".into(), false))
        );
        assert_eq!(
            route("GET /column_family/built_indexes/ks:t HTTP/1.1\r\n\r\n"),
            Ok(Route::BuiltIndexes("ks".into(), "t".into()))
        );
        assert_eq!(route("GET /system/logger HTTP/1.1\r\n\r\n"), Ok(Route::LoggerLevels));
        assert_eq!(route("POST /system/logger?reset HTTP/1.1\r\n\r\n"), Ok(Route::SetLoggerLevel(String::new())));
        assert_eq!(
            route("POST /system/logger/a%3A%3Ab?level=debug HTTP/1.1\r\n\r\n"),
            Ok(Route::SetLoggerLevel("a::b".into()))
        );
        assert_eq!(route("GET /storage_service/drain HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(
            route("DELETE /storage_service/auto_compaction/ks?cf=t HTTP/1.1\r\n\r\n"),
            Ok(Route::AutoCompaction(Some("ks".into()), false))
        );
        assert_eq!(
            route("POST /storage_service/auto_compaction/ks HTTP/1.1\r\n\r\n"),
            Ok(Route::AutoCompaction(Some("ks".into()), true))
        );
        assert_eq!(route("GET /storage_service/auto_compaction/ks HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(route("GET /storage_service/trace_probability HTTP/1.1\r\n\r\n"), Ok(Route::TraceProbability));
        assert_eq!(
            route("POST /storage_service/trace_probability?probability=0.5 HTTP/1.1\r\n\r\n"),
            Ok(Route::SetTraceProbability)
        );
        assert_eq!(route("GET /storage_service/toppartitions/?duration=10 HTTP/1.1\r\n\r\n"), Ok(Route::TopPartitions));
        assert_eq!(
            route("POST /storage_service/sstables/ks?cf=t HTTP/1.1\r\n\r\n"),
            Ok(Route::LoadSSTables("ks".into()))
        );
        assert_eq!(
            route("POST /compaction_manager/stop_compaction?type=COMPACTION HTTP/1.1\r\n\r\n"),
            Ok(Route::StopCompaction)
        );
    }
}
