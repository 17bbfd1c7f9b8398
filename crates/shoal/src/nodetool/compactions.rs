//! `nodetool compactionstats`, `stop`, `enableautocompaction` and
//! `disableautocompaction`, printed as Cassandra's nodetool prints them.

use std::collections::BTreeMap;

use super::{encode, encode_list, print_table, Api};

/// A compaction under way, as `GET /compaction_manager/compactions` lists it.
#[derive(serde::Deserialize)]
struct Compaction {
    id: String,
    ks: String,
    cf: String,
    task_type: String,
    completed: u64,
    total: u64,
    unit: String,
}

/// A table with compactions waiting.
#[derive(serde::Deserialize)]
struct Pending {
    ks: String,
    cf: String,
    task: u64,
}

pub(super) fn compactionstats(api: &Api) -> Result<(), String> {
    let pending: Vec<Pending> = api.json("/compaction_manager/metrics/pending_tasks_by_table")?;
    let running: Vec<Compaction> = api.json("/compaction_manager/compactions")?;
    println!("pending tasks: {}", pending.iter().map(|p| p.task).sum::<u64>());
    let by_keyspace: BTreeMap<(&str, &str), u64> =
        pending.iter().map(|p| ((p.ks.as_str(), p.cf.as_str()), p.task)).collect();
    for ((keyspace, table), tasks) in by_keyspace {
        println!("- {keyspace}.{table}: {tasks}");
    }
    println!();
    if running.is_empty() {
        return Ok(());
    }
    let header = ["id", "compaction type", "keyspace", "table", "completed", "total", "unit", "progress"];
    let mut rows = vec![header.map(str::to_string).to_vec()];
    for c in &running {
        let progress = match c.total {
            0 => "n/a".to_string(),
            total => format!("{:.2}%", c.completed as f64 * 100.0 / total as f64),
        };
        let cells =
            [&c.id, &c.task_type, &c.ks, &c.cf, &c.completed.to_string(), &c.total.to_string(), &c.unit, &progress];
        rows.push(cells.map(String::clone).to_vec());
    }
    print_table(&rows);
    // Shoal does not throttle compaction, so it has no rate to divide by.
    println!("Active compaction remaining time :        n/a");
    Ok(())
}

/// `stop <type>`: COMPACTION or CLEANUP, in any case.
pub(super) fn stop(api: &Api, kind: &str) -> Result<(), String> {
    let stopped: usize = api.post_json(&format!("/compaction_manager/stop_compaction?type={}", encode(kind)))?;
    println!("stopped {stopped} compaction(s)");
    Ok(())
}

/// `enableautocompaction` / `disableautocompaction [keyspace [tables...]]`.
pub(super) fn set_auto(api: &Api, keyspace: Option<&str>, tables: &[String], enabled: bool) -> Result<(), String> {
    let mut path = "/storage_service/auto_compaction".to_string();
    if let Some(keyspace) = keyspace {
        path += &format!("/{}", encode(keyspace));
    }
    if !tables.is_empty() {
        path += &format!("?cf={}", encode_list(tables));
    }
    let changed: usize = match enabled {
        true => api.post_json(&path)?,
        false => api.delete_json(&path)?,
    };
    println!("automatic compaction {} for {changed} table(s)", if enabled { "enabled" } else { "disabled" });
    Ok(())
}
