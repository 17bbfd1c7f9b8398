//! `shoal stress --protocol cql` against a real Shoal node with two shards:
//! a seq write run that loads every row of 4-row partitions, then a read run
//! of whole partitions that must find them all, without errors.
//!
//! The node is `<workspace>/target/debug/shoal` (a test may not build it;
//! `cargo build -p shoal` does); the test is skipped with a note when it is
//! missing.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{count, free_ports, stress, temp_dir, Server, TestResult};

const PARTITIONS: u64 = 500;
const ROWS: u64 = 4;

fn shoal_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/shoal")
}

fn start_shoal() -> Result<Option<Server>, Box<dyn std::error::Error>> {
    let bin = shoal_binary();
    if !bin.is_file() {
        eprintln!("note: {} not found (cargo build -p shoal); skipping the CQL test", bin.display());
        return Ok(None);
    }
    let dir = temp_dir("shoal")?;
    let ports = free_ports(5)?;
    let log = std::fs::File::create(dir.join("server.log"))?;
    let child = Command::new(&bin)
        .arg("--workdir")
        .arg(dir.join("data"))
        .args(["--smp", "2", "--memory", "1G", "--listen-address", "127.0.0.1"])
        .args(["--native-transport-port", &ports[0].to_string()])
        .args(["--native-shard-aware-transport-port", &ports[1].to_string()])
        .args(["--api-port", &ports[2].to_string()])
        .args(["--memcache-port", &ports[3].to_string()])
        .args(["--storage-port", &ports[4].to_string()])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let mut server = Server { child, dir, port: ports[0] };
    if let Err(e) = server.wait_ready(Duration::from_secs(10)) {
        let log = std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
        return Err(format!("{e}; log:\n{log}").into());
    }
    Ok(Some(server))
}

#[test]
fn seq_writes_load_every_row_and_reads_find_them() -> TestResult {
    let Some(server) = start_shoal()? else {
        return Ok(());
    };
    let port = server.port.to_string();
    let keys = PARTITIONS.to_string();
    let rows = ROWS.to_string();
    let all_rows = (PARTITIONS * ROWS).to_string();
    let common =
        ["--port", &port, "--keys", &keys, "--rows-per-partition", &rows, "--threads", "2", "--concurrency", "32"];
    let write =
        stress(&server.dir, &[&common[..], &["--workload", "write", "--pop", "seq", "--count", &all_rows]].concat())?;
    assert_eq!(count(&write, "ops"), PARTITIONS * ROWS, "write ops");
    assert_eq!(count(&write, "errors"), 0, "write errors");
    let read = stress(&server.dir, &[&common[..], &["--workload", "read", "--duration", "2", "--no-schema"]].concat())?;
    assert!(count(&read, "ops") > 0, "no reads");
    assert_eq!(count(&read, "errors"), 0, "read errors");
    assert_eq!(count(&read, "misses"), 0, "misses after loading every partition");
    assert_eq!(read["config"]["rows-per-partition"].as_u64(), Some(ROWS));
    Ok(())
}
