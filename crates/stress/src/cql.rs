//! The CQL side of the load generator, on the `scylla` driver: one session
//! with the driver's default (token- and shard-aware) load balancing,
//! `--connections` connections per shard (per node on Cassandra),
//! logged in as `--user` when given (PasswordAuthenticator),
//! `--consistency` (ONE), prepared statements only, and `--concurrency` tasks
//! each running one operation at a time.
//!
//! Schema (unless `--no-schema`): keyspace with SimpleStrategy RF
//! `--replication-factor` (1) and
//! `(pk bigint, ck int, v blob, PRIMARY KEY (pk, ck))`. A write is
//! `INSERT (pk, ck, v)` (`... IF NOT EXISTS` with `--conditional`, at
//! serial consistency SERIAL); a read is `SELECT v ... WHERE pk = ?`, the whole
//! partition, and a partition with no rows is a miss. With `--counter` the
//! table is `(pk bigint, ck int, n counter, ...)`, a write
//! `UPDATE ... SET n = n + 1 WHERE pk = ? AND ck = ?` and a read `SELECT n`.
//! The same statements run against Shoal and Apache Cassandra (protocol v4).

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::SeedableRng;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use tokio::task::JoinSet;

use crate::args::Config;
use crate::error::{OpError, StressError};
use crate::stats::Outcome;
use crate::workload::{Op, OpKind};
use crate::{Run, CONNECT_TIMEOUT, OP_TIMEOUT};

/// A connected session with its prepared statements.
pub struct Target {
    client: Arc<Client>,
    connections: usize,
    concurrency: usize,
}

struct Client {
    session: Session,
    insert: PreparedStatement,
    select: PreparedStatement,
    value: Vec<u8>,
    counter: bool,
}

impl Target {
    /// Connects, creates the schema if asked, prepares; any failure is fatal.
    pub async fn connect(config: &Config, value: Vec<u8>) -> Result<Target, StressError> {
        let address = config.address();
        let consistency = consistency_of(&config.consistency)?;
        let profile = ExecutionProfile::builder()
            .consistency(consistency)
            .serial_consistency(Some(SerialConsistency::Serial))
            // The driver gives up a little after our own timeout would.
            .request_timeout(Some(OP_TIMEOUT + CONNECT_TIMEOUT))
            .build();
        let connections = NonZeroUsize::new(config.connections)
            .ok_or_else(|| StressError::InvalidOption("--connections must be at least 1".into()))?;
        let mut builder = SessionBuilder::new()
            .known_node(&address)
            .pool_size(PoolSize::PerShard(connections))
            .connection_timeout(CONNECT_TIMEOUT)
            .default_execution_profile_handle(profile.into_handle());
        if let (Some(user), Some(password)) = (&config.user, &config.password) {
            builder = builder.user(user, password);
        }
        let session = builder
            .build()
            .await
            .map_err(|e| StressError::Connect { address: address.clone(), reason: e.to_string() })?;
        let table = format!("{}.{}", config.keyspace, config.table);
        if !config.no_schema {
            let value = if config.counter { "n counter" } else { "v blob" };
            let options = if config.uncompressed { " WITH compression = {'enabled': 'false'}" } else { "" };
            create_schema(&session, &config.keyspace, &table, value, options, config.replication_factor).await?;
        }
        let condition = if config.conditional { " IF NOT EXISTS" } else { "" };
        let (insert, select) = match config.counter {
            true => (
                format!("UPDATE {table} SET n = n + 1 WHERE pk = ? AND ck = ?"),
                format!("SELECT n FROM {table} WHERE pk = ?"),
            ),
            false => (
                format!("INSERT INTO {table} (pk, ck, v) VALUES (?, ?, ?){condition}"),
                format!("SELECT v FROM {table} WHERE pk = ?"),
            ),
        };
        let (insert, select) = (prepare(&session, insert).await?, prepare(&session, select).await?);
        let client = Client { session, insert, select, value, counter: config.counter };
        Ok(Target { client: Arc::new(client), connections: config.connections, concurrency: config.concurrency })
    }

    pub fn describe(&self) -> String {
        let nodes = self.client.session.get_cluster_state().get_nodes_info().len();
        format!("{nodes} node(s), {} connection(s) per shard, {} ops in flight", self.connections, self.concurrency)
    }

    /// Starts `--concurrency` worker tasks.
    pub fn spawn(self, run: &Arc<Run>, workers: &mut JoinSet<()>) {
        for id in 0..self.concurrency {
            workers.spawn(worker(id, self.client.clone(), run.clone()));
        }
    }
}

/// The driver's level named `name` (`LOCAL_QUORUM`, any case).
fn consistency_of(name: &str) -> Result<Consistency, StressError> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        _ => return Err(StressError::InvalidOption(format!("--consistency {name}: not a consistency level"))),
    })
}

/// The keyspace and `table`, its one column besides the key `value` (`v blob`)
/// and its `options` (a `WITH` clause or nothing).
async fn create_schema(
    session: &Session,
    keyspace: &str,
    table: &str,
    value: &str,
    options: &str,
    rf: u32,
) -> Result<(), StressError> {
    let statements = [
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {keyspace} \
             WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
        ),
        format!("CREATE TABLE IF NOT EXISTS {table} (pk bigint, ck int, {value}, PRIMARY KEY (pk, ck)){options}"),
    ];
    for statement in statements {
        session
            .query_unpaged(statement.as_str(), ())
            .await
            .map_err(|e| StressError::Schema(format!("{statement}: {e}")))?;
    }
    // Token-aware routing needs the new keyspace's replication in the driver's
    // metadata; do not wait for a schema-change event to bring it.
    session.refresh_metadata().await.map_err(|e| StressError::Schema(format!("refreshing metadata: {e}")))
}

async fn prepare(session: &Session, statement: String) -> Result<PreparedStatement, StressError> {
    session.prepare(statement.as_str()).await.map_err(|e| StressError::Prepare { statement, reason: e.to_string() })
}

/// Runs operations one at a time until the schedule ends.
async fn worker(id: usize, client: Arc<Client>, run: Arc<Run>) {
    let mut rng = StdRng::from_entropy();
    while let Some(claim) = run.schedule.claim(Instant::now()) {
        let start = run.wait_for(&claim).await;
        let op = run.workload.op(claim.index, &mut rng);
        let result = match tokio::time::timeout(OP_TIMEOUT, client.execute(&op)).await {
            Ok(result) => result,
            Err(_) => Err(OpError::Timeout(OP_TIMEOUT)),
        };
        run.recorders.record(id, op.kind, &result, start.elapsed(), claim.measured);
    }
}

impl Client {
    async fn execute(&self, op: &Op) -> Result<Outcome, OpError> {
        // Config bounds keys to i64 and rows to i32.
        let pk = op.pk as i64;
        let cql = |e: &dyn std::fmt::Display| OpError::Cql(e.to_string());
        match op.kind {
            OpKind::Write if self.counter => {
                self.session.execute_unpaged(&self.insert, (pk, op.ck as i32)).await.map_err(|e| cql(&e))?;
                Ok(Outcome::Done)
            }
            OpKind::Write => {
                let values = (pk, op.ck as i32, self.value.as_slice());
                self.session.execute_unpaged(&self.insert, values).await.map_err(|e| cql(&e))?;
                Ok(Outcome::Done)
            }
            OpKind::Read => {
                let result = self.session.execute_unpaged(&self.select, (pk,)).await.map_err(|e| cql(&e))?;
                let rows = result.into_rows_result().map_err(|e| cql(&e))?;
                Ok(if rows.rows_num() == 0 { Outcome::Miss } else { Outcome::Done })
            }
        }
    }
}
