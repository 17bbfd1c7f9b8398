//! Requests pinned to a shard run on that shard, as ScyllaDB's Rust driver
//! (`scylla` crate) sees it.
//!
//! The driver reports a request's coordinator shard as the `SCYLLA_SHARD` that
//! the connection it used announced in SUPPORTED. These tests pin requests to
//! each shard with `SingleTargetLoadBalancingPolicy` and check both that the
//! driver reports that shard and that the server executed the request there
//! (the request's trace names the executing shard), so a connection served on a
//! shard other than the one it announces cannot go unnoticed. Once for
//! connections placed by source port (the shard-aware port, the default) and
//! once for connections placed in turn (the regular port only).
//!
//! The driver fills its per-shard pool in the background: one connection on
//! the regular port first, the others 50 ms later. Until a shard has a
//! connection, a request pinned to it goes out on another shard's connection,
//! so the tests wait for a connection per shard before pinning. (The crate's
//! own `statements::coordinator::test_exposed_request_coordinator` does not
//! wait; it relies on its DDL taking longer than those 50 ms, as it does on
//! ScyllaDB.)

mod common;

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::query_result::QueryResult;
use scylla::routing::Shard;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Statement;
use shoal_driver_tests::Server;

use common::{connection_to_every_shard, coordinator_shard, TestResult};

const SMP: usize = 2;
const QUERY: &str = "SELECT host_id, rpc_address FROM system.local WHERE key = 'local'";
/// Pinned requests per shard and kind (unprepared, prepared) once the pool is full.
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_requests_run_on_their_shard_over_the_shard_aware_port() -> TestResult {
    let server = Server::start(SMP)?;
    let session = SessionBuilder::new().known_node(server.cql.to_string()).build().await?;
    check_pinned_requests(&session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_requests_run_on_their_shard_over_the_regular_port() -> TestResult {
    let server = Server::start(SMP)?;
    let session =
        SessionBuilder::new().known_node(server.cql.to_string()).disallow_shard_aware_port(true).build().await?;
    check_pinned_requests(&session).await
}

async fn check_pinned_requests(session: &Session) -> TestResult {
    let state = session.get_cluster_state();
    let node = Arc::clone(state.get_nodes_info().first().ok_or("no nodes")?);
    let nr_shards = node.sharder().ok_or("the driver found no sharding info in SUPPORTED")?.nr_shards.get();
    assert_eq!(usize::from(nr_shards), SMP, "shard count");

    let pin =
        |shard: Shard| Some(SingleTargetLoadBalancingPolicy::new(NodeIdentifier::Node(Arc::clone(&node)), Some(shard)));
    let statement = |shard: Shard| {
        let mut statement = Statement::new(QUERY);
        statement.set_load_balancing_policy(pin(shard));
        statement.set_tracing(true);
        statement
    };
    let mut prepared: PreparedStatement = session.prepare(QUERY).await?;
    prepared.set_tracing(true);

    // A connection to every shard, or the driver uses another shard's.
    connection_to_every_shard(session, &node, QUERY).await?;

    for shard in 0..Shard::from(nr_shards) {
        prepared.set_load_balancing_policy(pin(shard));
        for _ in 0..ROUNDS {
            let unprepared = session.query_unpaged(statement(shard), ()).await?;
            check_ran_on(session, &unprepared, shard, "unprepared").await?;
            let executed = session.execute_unpaged(&prepared, ()).await?;
            check_ran_on(session, &executed, shard, "prepared").await?;
        }
    }
    Ok(())
}

/// Checks that a request pinned to `shard` went out on a connection announcing
/// `shard` and that its trace says the server executed it on `shard`.
async fn check_ran_on(session: &Session, result: &QueryResult, shard: Shard, kind: &str) -> TestResult {
    let reported = coordinator_shard(result)?;
    assert_eq!(reported, shard, "{kind} request pinned to shard {shard}: connection announces shard {reported}");
    let tracing_id = result.tracing_id().ok_or("a traced request came back without a tracing id")?;
    let trace = session.get_tracing_info(&tracing_id).await?;
    let executed_on: Vec<&str> = trace
        .events
        .iter()
        .filter_map(|event| event.activity.as_deref()?.strip_prefix("Executing ")?.split(" on shard ").nth(1))
        .collect();
    assert_eq!(
        executed_on,
        [shard.to_string()],
        "{kind} request pinned to shard {shard}: executed on the shards its trace names"
    );
    Ok(())
}
