//! `nodetool toppartitions`: samples the partitions most written and read
//! for a while and prints them as Cassandra's nodetool does.

use super::{encode, Api};

/// What to sample (`toppartitions [keyspace table [duration]]`).
pub(super) struct Sampling<'a> {
    pub(super) table: Option<(&'a str, &'a str)>,
    pub(super) duration_ms: u64,
    pub(super) capacity: usize,
    pub(super) list_size: usize,
}

#[derive(serde::Deserialize)]
struct Counted {
    partition: String,
    count: u64,
    error: u64,
}

#[derive(serde::Deserialize)]
struct Sampled {
    read_cardinality: u64,
    write_cardinality: u64,
    read: Vec<Counted>,
    write: Vec<Counted>,
}

pub(super) fn run(api: &Api, sampling: &Sampling) -> Result<(), String> {
    let mut path = format!(
        "/storage_service/toppartitions/?duration={}&capacity={}&list_size={}",
        sampling.duration_ms, sampling.capacity, sampling.list_size
    );
    if let Some((keyspace, table)) = sampling.table {
        path += &format!("&table_filters={}", encode(&format!("{keyspace}:{table}")));
    }
    let sampled: Sampled = api.json(&path)?;
    print_sampler("WRITES", sampled.write_cardinality, &sampled.write, sampling);
    println!();
    print_sampler("READS", sampled.read_cardinality, &sampled.read, sampling);
    Ok(())
}

fn print_sampler(name: &str, cardinality: u64, top: &[Counted], sampling: &Sampling) {
    println!("{name} Sampler:");
    println!("  Cardinality: ~{cardinality} ({} capacity)", sampling.capacity);
    println!("  Top {} partitions:", sampling.list_size);
    if top.is_empty() {
        println!("\tNothing recorded during sampling period...");
        return;
    }
    let width = top.iter().map(|t| t.partition.len()).max().unwrap_or(0);
    println!("\t{:<width$}{:>10}{:>10}", "Partition", "Count", "+/-");
    for t in top {
        println!("\t{:<width$}{:>10}{:>10}", t.partition, t.count, t.error);
    }
}
