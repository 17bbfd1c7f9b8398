//! The crate graph is the architecture: one crate per layer, arrows
//! pointing down (docs/architecture.md). This test reads every crate's
//! `[dependencies]` and fails when an edge goes up, or when a front end
//! (CQL, memcached) reaches past the coordinator into a replica, the
//! storage engine or the disk.

use std::path::{Path, PathBuf};

/// The layers, lowest first. A crate may depend only on crates listed
/// before it.
const LAYERS: &[&str] = &[
    "buf",
    "http",
    "metrics",
    "runtime",
    "tls",
    "schema",
    "io",
    "storage",
    "replica",
    "cluster",
    "coordinator",
    "cql",
    "transport",
    "memcache",
    "stress",
    "shoal",
];

/// Front ends name data only through the coordinator.
const FRONT_ENDS: &[&str] = &["cql", "transport", "memcache"];
const BEHIND_THE_COORDINATOR: &[&str] = &["replica", "storage", "io"];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `shoal-*` crates named in the `[dependencies]` table of a manifest.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies {
            continue;
        }
        let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
        if let Some(layer) = name.strip_prefix("shoal-") {
            found.push(layer.to_string());
        }
    }
    found
}

#[test]
fn dependencies_point_down_and_front_ends_stop_at_the_coordinator() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).expect("the crates directory") {
        let dir = entry.expect("a directory entry").path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let rank = LAYERS.iter().position(|l| *l == name);
        for dependency in dependencies(&manifest) {
            let dependency_rank = LAYERS.iter().position(|l| *l == dependency);
            match (rank, dependency_rank) {
                (Some(rank), Some(below)) if below < rank => {}
                _ => wrong.push(format!("{name} -> {dependency}: not a downward edge of {LAYERS:?}")),
            }
            if FRONT_ENDS.contains(&name.as_str()) && BEHIND_THE_COORDINATOR.contains(&dependency.as_str()) {
                wrong.push(format!("{name} -> {dependency}: front ends reach data through the coordinator"));
            }
        }
        checked += 1;
    }
    assert!(checked >= LAYERS.len(), "found only {checked} crates under {}", crates_dir().display());
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_manifest_reader_sees_dependencies_only() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nshoal-cql.workspace = true\n\
                    shoal-io = { path = \"..\" }\nbytes = \"1\"\n\n[dev-dependencies]\nshoal-storage.workspace = true\n";
    assert_eq!(dependencies(manifest), ["cql", "io"]);
}
