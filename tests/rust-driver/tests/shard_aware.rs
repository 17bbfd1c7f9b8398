//! Shard awareness as ScyllaDB's Rust driver (`scylla` crate) sees it.
//!
//! Starts `shoal --smp 2` (see `shoal_driver_tests` for which binary), connects
//! with a default `SessionBuilder` (token- and shard-aware), and checks that:
//! - the driver got the sharding info from SUPPORTED (2 shards);
//! - prepared, token-aware requests go out on a connection to the shard that
//!   owns their token, for both shards, and the server forwards none of them
//!   (`shoal_cql_forwarded_requests_total` does not grow);
//! - the data written reads back;
//! - the counter does grow for unprepared requests, which the driver sends to
//!   a random shard, so the check above is not vacuous.

use std::collections::BTreeSet;
use std::error::Error;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::query_result::QueryResult;
use scylla::routing::Shard;
use scylla::serialize::row::SerializeRow;
use scylla::statement::prepared::PreparedStatement;
use shoal_driver_tests::Server;

type TestResult = Result<(), Box<dyn Error>>;

const SMP: usize = 2;
const KEYS: i32 = 200;
const CLUSTERING_ROWS: i32 = 3;
/// Requests in flight at once (the driver multiplexes them on its connections).
const CONCURRENCY: usize = 16;

/// The shard owning the token of `values` for `prepared`, per the driver's sharder.
fn owner_shard(
    session: &Session,
    prepared: &PreparedStatement,
    values: &impl SerializeRow,
) -> Result<Shard, Box<dyn Error>> {
    let token = prepared.calculate_token(values)?.ok_or("prepared statement has no partition key")?;
    let state = session.get_cluster_state();
    let node = state.get_nodes_info().first().ok_or("no nodes")?;
    Ok(node.sharder().ok_or("node has no sharder")?.shard_of(token))
}

/// The shard of the connection that carried `result`.
fn coordinator_shard(result: &QueryResult) -> Result<Shard, Box<dyn Error>> {
    Ok(result.request_coordinator().shard().ok_or("the request's coordinator has no shard")?)
}

/// Runs `execute` on `prepared` with `values` and checks that it went out on a
/// connection to the shard owning the token. Returns the result and the shard.
async fn execute_routed(
    session: &Session,
    prepared: &PreparedStatement,
    values: impl SerializeRow,
) -> Result<(QueryResult, Shard), Box<dyn Error>> {
    let owner = owner_shard(session, prepared, &values)?;
    let result = session.execute_unpaged(prepared, values).await?;
    let used = coordinator_shard(&result)?;
    if used != owner {
        return Err(format!("request for a token of shard {owner} went to a connection to shard {used}").into());
    }
    Ok((result, used))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_requests_reach_the_owning_shard() -> TestResult {
    let server = Server::start(SMP)?;
    let session = SessionBuilder::new().known_node(server.cql.to_string()).build().await?;

    // Sharding info from SUPPORTED.
    let state = session.get_cluster_state();
    let nodes = state.get_nodes_info();
    assert_eq!(nodes.len(), 1, "one node expected");
    let sharder = nodes[0].sharder().ok_or("the driver found no sharding info in SUPPORTED")?;
    assert_eq!(usize::from(sharder.nr_shards.get()), SMP, "shard count");
    assert!(nodes[0].is_connected(), "no connection to the node");

    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS rust_driver WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged("CREATE TABLE IF NOT EXISTS rust_driver.kv (pk int, ck int, v text, PRIMARY KEY (pk, ck))", ())
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS rust_driver.composite (a text, b bigint, v int, PRIMARY KEY ((a, b)))",
            (),
        )
        .await?;
    let insert = session.prepare("INSERT INTO rust_driver.kv (pk, ck, v) VALUES (?, ?, ?)").await?;
    let select = session.prepare("SELECT ck, v FROM rust_driver.kv WHERE pk = ?").await?;
    let insert2 = session.prepare("INSERT INTO rust_driver.composite (a, b, v) VALUES (?, ?, ?)").await?;
    let select2 = session.prepare("SELECT v FROM rust_driver.composite WHERE a = ? AND b = ?").await?;

    // The driver fills its per-shard pool in the background after connecting:
    // wait (bounded) until token-aware requests reach both shards on their own
    // connections, which shows there is a connection to each shard.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut shards_reached = BTreeSet::new();
    let mut key = 0;
    while shards_reached.len() < SMP {
        if Instant::now() > deadline {
            return Err(format!("after 15 s the driver only reached shards {shards_reached:?} token-aware").into());
        }
        if let Ok((_, shard)) = execute_routed(&session, &select, (key % KEYS,)).await {
            shards_reached.insert(shard);
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        key += 1;
    }

    let forwarded_before = server.forwarded_requests_total()?;

    // Writes: KEYS partitions x CLUSTERING_ROWS rows, CONCURRENCY at a time.
    let writes: Vec<(i32, i32)> = (0..KEYS).flat_map(|pk| (0..CLUSTERING_ROWS).map(move |ck| (pk, ck))).collect();
    let shards: Vec<Shard> = futures::stream::iter(writes)
        .map(|(pk, ck)| {
            let (session, insert) = (&session, &insert);
            async move {
                execute_routed(session, insert, (pk, ck, format!("v{pk}.{ck}")))
                    .await
                    .map(|(_, shard)| shard)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let by_shard =
        |shards: &[Shard]| (0..SMP as Shard).map(|s| shards.iter().filter(|&&x| x == s).count()).collect::<Vec<_>>();
    let write_counts = by_shard(&shards);
    assert!(write_counts.iter().all(|&n| n > 0), "writes per shard: {write_counts:?}");

    // Composite partition keys.
    for i in 0..KEYS {
        execute_routed(&session, &insert2, (format!("key-{i}"), i64::from(i) * 1_000_003, i)).await?;
    }

    // Reads.
    let mut read_shards = Vec::new();
    for pk in 0..KEYS {
        let (result, shard) = execute_routed(&session, &select, (pk,)).await?;
        read_shards.push(shard);
        let rows: Vec<(i32, String)> = result.into_rows_result()?.rows::<(i32, String)>()?.collect::<Result<_, _>>()?;
        let expected: Vec<(i32, String)> = (0..CLUSTERING_ROWS).map(|ck| (ck, format!("v{pk}.{ck}"))).collect();
        assert_eq!(rows, expected, "rows of partition {pk}");
    }
    for i in 0..KEYS {
        let (result, _) = execute_routed(&session, &select2, (format!("key-{i}"), i64::from(i) * 1_000_003)).await?;
        let (v,) = result.into_rows_result()?.single_row::<(i32,)>()?;
        assert_eq!(v, i, "composite partition key-{i}");
    }
    let read_counts = by_shard(&read_shards);
    assert!(read_counts.iter().all(|&n| n > 0), "reads per shard: {read_counts:?}");

    let forwarded_after = server.forwarded_requests_total()?;
    assert_eq!(
        forwarded_after,
        forwarded_before,
        "{} of the token-aware prepared requests were forwarded between shards",
        forwarded_after - forwarded_before
    );

    // Control: unprepared statements carry no routing information, so the
    // driver picks a random connection and about half of these arrive on the
    // wrong shard; the counter must see that.
    for pk in 0..64 {
        session.query_unpaged(format!("SELECT v FROM rust_driver.kv WHERE pk = {pk}"), ()).await?;
    }
    let forwarded_control = server.forwarded_requests_total()?;
    assert!(
        forwarded_control > forwarded_after,
        "64 unprepared single-partition reads over random shards were never forwarded: is {} counted?",
        shoal_driver_tests::FORWARDED_METRIC
    );

    eprintln!(
        "writes per shard {write_counts:?}, reads per shard {read_counts:?}, forwarded: {forwarded_before} before, \
         {forwarded_after} after the prepared requests, {forwarded_control} after 64 unprepared reads"
    );
    session.query_unpaged("DROP KEYSPACE rust_driver", ()).await?;
    Ok(())
}
