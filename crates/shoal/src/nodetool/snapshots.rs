//! `nodetool listsnapshots` and `clearsnapshot`, printed as Cassandra's
//! nodetool prints them.

use super::report::bytes;
use super::{encode, encode_list, print_table, Api};

/// One table's part of a snapshot, as `GET /storage_service/snapshots`
/// lists it.
#[derive(serde::Deserialize)]
struct TableSnapshot {
    ks: String,
    cf: String,
    total: u64,
    /// The bytes only the snapshot keeps (Cassandra's "True size").
    live: u64,
}

#[derive(serde::Deserialize)]
struct Snapshot {
    key: String,
    value: Vec<TableSnapshot>,
}

pub(super) fn list(api: &Api) -> Result<(), String> {
    let snapshots: Vec<Snapshot> = api.json("/storage_service/snapshots")?;
    println!("Snapshot Details: ");
    if snapshots.is_empty() {
        println!("There are no snapshots");
        return Ok(());
    }
    let mut rows =
        vec![["Snapshot name", "Keyspace name", "Column family name", "True size", "Size on disk"].map(str::to_string)];
    let mut true_total = 0;
    for snapshot in &snapshots {
        for table in &snapshot.value {
            true_total += table.live;
            let sizes = [bytes(table.live as f64), bytes(table.total as f64)];
            let [live, total] = sizes;
            rows.push([snapshot.key.clone(), table.ks.clone(), table.cf.clone(), live, total]);
        }
    }
    print_table(&rows);
    println!();
    println!("Total TrueDiskSpaceUsed: {}", bytes(true_total as f64));
    println!();
    Ok(())
}

pub(super) fn clear(api: &Api, tag: Option<&str>, keyspaces: &[String]) -> Result<(), String> {
    let mut query = Vec::new();
    if let Some(tag) = tag {
        query.push(format!("tag={}", encode(tag)));
    }
    if !keyspaces.is_empty() {
        query.push(format!("kn={}", encode_list(keyspaces)));
    }
    let which = if keyspaces.is_empty() { "all keyspaces".to_string() } else { keyspaces.join(", ") };
    println!("Requested clearing snapshot(s) for [{which}] with snapshot name [{}]", tag.unwrap_or("all snapshots"));
    let removed: usize = api.delete_json(&format!("/storage_service/snapshots?{}", query.join("&")))?;
    println!("cleared {removed} table snapshot(s)");
    Ok(())
}
