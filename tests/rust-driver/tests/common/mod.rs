//! Shared by the driver tests that pin requests to shards: which shard a
//! request went to, and waiting until the driver holds a connection to
//! every shard.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::cluster::Node;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::query_result::QueryResult;
use scylla::routing::Shard;
use scylla::statement::Statement;

pub type TestResult = Result<(), Box<dyn Error>>;

/// How long the driver may take to open a connection to every shard.
const POOL_FILL_TIMEOUT: Duration = Duration::from_secs(15);

/// The shard the driver reports for the connection that carried `result`.
pub fn coordinator_shard(result: &QueryResult) -> Result<Shard, Box<dyn Error>> {
    Ok(result.request_coordinator().shard().ok_or("the request's coordinator has no shard")?)
}

/// Waits until a request pinned to each of `node`'s shards goes out on a
/// connection to that shard. The driver fills its per-shard pool in the
/// background (one connection first, the others 50 ms later); until a
/// shard has one, a request pinned to it goes out on another shard's.
pub async fn connection_to_every_shard(session: &Session, node: &Arc<Node>, query: &str) -> TestResult {
    let shards = node.sharder().ok_or("the driver found no sharding info in SUPPORTED")?.nr_shards.get();
    let deadline = Instant::now() + POOL_FILL_TIMEOUT;
    for shard in 0..Shard::from(shards) {
        let mut statement = Statement::new(query);
        let target = NodeIdentifier::Node(Arc::clone(node));
        statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(target, Some(shard))));
        while coordinator_shard(&session.query_unpaged(statement.clone(), ()).await?)? != shard {
            if Instant::now() > deadline {
                return Err(format!("after {POOL_FILL_TIMEOUT:?} the driver has no connection to shard {shard}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
