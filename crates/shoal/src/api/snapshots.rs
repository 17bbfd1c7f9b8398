//! Snapshots on disk: listed (`nodetool listsnapshots`) and cleared
//! (`nodetool clearsnapshot`). A snapshot is a directory of hard links,
//! `<data dir>/<keyspace>/<table>-<id>/snapshots/<tag>/`, written by every
//! shard for its own SSTables; listing and removing those directories
//! touches no shard's memory, so it runs here, on the API's task. The
//! directories are few and small (links), so the blocking calls are short.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use shoal_http::{Request, Response, Status};

/// One table's part of a snapshot.
struct TableSnapshot {
    keyspace: String,
    table: String,
    tag: String,
    dir: PathBuf,
}

/// Every snapshot directory under the data directory, by keyspace,
/// table and tag.
fn snapshots(data_dir: &Path) -> std::io::Result<Vec<TableSnapshot>> {
    let mut found = Vec::new();
    for keyspace in subdirs(data_dir)? {
        for table_dir in subdirs(&keyspace)? {
            let Some(name) = file_name(&table_dir) else { continue };
            // `<table>-<32 hex digits of its id>`
            let Some((table, _id)) = name.rsplit_once('-') else { continue };
            for dir in subdirs(&table_dir.join("snapshots"))? {
                found.push(TableSnapshot {
                    keyspace: file_name(&keyspace).unwrap_or_default(),
                    table: table.to_string(),
                    tag: file_name(&dir).unwrap_or_default(),
                    dir,
                });
            }
        }
    }
    Ok(found)
}

/// The directories in `dir`, sorted; none when `dir` is not there (a
/// keyspace or table with nothing written yet).
fn subdirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dirs),
        entries => entries?,
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn file_name(path: &Path) -> Option<String> {
    Some(path.file_name()?.to_string_lossy().into_owned())
}

/// `(total, true)` bytes of a snapshot directory: all its files, and those
/// no live SSTable shares any more (one link left), which the snapshot
/// alone keeps on disk.
fn sizes(dir: &Path) -> std::io::Result<(u64, u64)> {
    let (mut total, mut own) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
            if meta.nlink() == 1 {
                own += meta.len();
            }
        }
    }
    Ok((total, own))
}

fn data_dir() -> Option<&'static Path> {
    super::DATA_DIR.get().map(PathBuf::as_path)
}

/// `GET /storage_service/snapshots`: `[{"key": tag, "value": [{"ks",
/// "cf", "total", "live"}]}]` as ScyllaDB answers it (`live`: the bytes
/// only the snapshot keeps).
pub fn list() -> Response {
    let Some(data_dir) = data_dir() else { return Response::json(&json!([])) };
    let listed = snapshots(data_dir).and_then(|found| {
        let mut by_tag: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for snapshot in found {
            let (total, live) = sizes(&snapshot.dir)?;
            let entry = json!({"ks": snapshot.keyspace, "cf": snapshot.table, "total": total, "live": live});
            by_tag.entry(snapshot.tag).or_default().push(entry);
        }
        Ok(by_tag.into_iter().map(|(tag, tables)| json!({"key": tag, "value": tables})).collect::<Vec<_>>())
    });
    match listed {
        Ok(entries) => Response::json(&Value::Array(entries)),
        Err(e) => Response::error(Status::InternalError, format!("listing snapshots: {e}")),
    }
}

/// `DELETE /storage_service/snapshots[?tag=<tag>][&kn=<ks1,ks2>]`: removes
/// the snapshots of that tag (all without one) in those keyspaces (all
/// without); answers the number of table snapshot directories removed.
pub fn clear(request: &Request) -> Response {
    let Some(data_dir) = data_dir() else { return Response::json(&json!(0)) };
    let tag = request.param("tag").filter(|t| !t.is_empty());
    let keyspaces: Vec<&str> = request.param("kn").map(|k| k.split(',').collect()).unwrap_or_default();
    let cleared = snapshots(data_dir).and_then(|found| {
        let chosen = found.into_iter().filter(|s| {
            tag.is_none_or(|tag| s.tag == tag) && (keyspaces.is_empty() || keyspaces.contains(&s.keyspace.as_str()))
        });
        let mut removed = 0;
        for snapshot in chosen {
            std::fs::remove_dir_all(&snapshot.dir)?;
            removed += 1;
        }
        Ok(removed)
    });
    match cleared {
        Ok(removed) => Response::json(&json!(removed)),
        Err(e) => Response::error(Status::InternalError, format!("clearing snapshots: {e}")),
    }
}
