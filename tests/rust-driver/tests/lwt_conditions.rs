//! Lightweight-transaction conditions with values as ScyllaDB's Rust driver
//! (`scylla` crate) binds them.
//!
//! The driver serializes a `None` element of a bound list as a null item
//! (length -1), where the Python driver sends an empty value: a stored
//! collection cannot hold either, but ScyllaDB takes a null element of the
//! list bound to `IF c IN ?` as a null candidate.

use std::error::Error;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::query_result::QueryResult;
use scylla::value::{CqlValue, Row};
use shoal_driver_tests::Server;

type TestResult = Result<(), Box<dyn Error>>;

/// The `[applied]` column of a conditional write's answer.
fn applied(result: QueryResult) -> Result<bool, Box<dyn Error>> {
    let row: Row = result.into_rows_result()?.first_row()?;
    match row.columns.first() {
        Some(Some(CqlValue::Boolean(applied))) => Ok(*applied),
        other => Err(format!("no [applied] column: {other:?}").into()),
    }
}

async fn w(session: &Session) -> Result<Option<i32>, Box<dyn Error>> {
    let result = session.query_unpaged("SELECT w FROM ks.t WHERE k = 0", ()).await?;
    Ok(result.into_rows_result()?.first_row::<(Option<i32>,)>()?.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_element_of_a_bound_in_list_is_a_null_candidate() -> TestResult {
    let server = Server::start(1)?;
    let session = SessionBuilder::new().known_node(server.cql.to_string()).build().await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session.query_unpaged("CREATE TABLE ks.t (k int PRIMARY KEY, v int, w int)", ()).await?;
    session.query_unpaged("INSERT INTO ks.t (k, w) VALUES (0, 0)", ()).await?;
    let update = session.prepare("UPDATE ks.t SET w = ? WHERE k = 0 IF v IN ?").await?;

    // v is null: a list without a null candidate does not match it.
    let result = session.execute_unpaged(&update, (1, vec![Some(1), Some(2)])).await?;
    assert!(!applied(result)?, "v IN (1, 2) with v null");
    assert_eq!(w(&session).await?, Some(0));

    let result = session.execute_unpaged(&update, (2, vec![Some(1), None])).await?;
    assert!(applied(result)?, "v IN (1, null) with v null");
    assert_eq!(w(&session).await?, Some(2));

    // Once v is set, the null candidate no longer matches, the other does.
    session.query_unpaged("UPDATE ks.t SET v = 1 WHERE k = 0", ()).await?;
    let result = session.execute_unpaged(&update, (3, vec![None::<i32>])).await?;
    assert!(!applied(result)?, "v IN (null) with v = 1");
    let result = session.execute_unpaged(&update, (4, vec![None, Some(1)])).await?;
    assert!(applied(result)?, "v IN (null, 1) with v = 1");
    assert_eq!(w(&session).await?, Some(4));
    Ok(())
}
