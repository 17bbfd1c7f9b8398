//! `POST /storage_service/sstables/<keyspace>?cf=<table>` (nodetool
//! refresh): loads the SSTables placed in the table's `upload/` directory
//! into the cluster, as ScyllaDB's load-and-stream does. Every partition
//! of every SSTable there is written, with its timestamps and tombstones,
//! to the replicas that own its token now (consistency ALL), so SSTables
//! from another node, another ring or another cluster land where they
//! belong, on the right shards; the files are removed once all are
//! loaded. Loading twice changes nothing (writes merge), so a load cut
//! short is run again.
//!
//! SSTables from a backup (`shoal backup`, `shoal restore`) come with
//! `upload/columns`: the table's column ids where they were written,
//! `<id> <name>` a line. Cells are stored by column id and a table created
//! again gets new ids, so each cell is filed under the id its column's
//! name has now (a column the table no longer has is dropped). Without the
//! file, ids are taken as they are.
//!
//! The directory is listed and the files removed on a helper thread
//! ([`super::blocking`]); each shard reads its share of the SSTables
//! through the I/O layer. The loads under way are listed by `GET
//! /stream_manager/` ([`streams`], nodetool netstats), one per table at
//! a time; the API's tasks all run on one shard, so a thread-local list
//! holds them.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;
use shoal_coordinator::{on_every_shard, ConsistencyLevel, WriteType};
use shoal_http::{Request, Response, Status};
use shoal_io::IoClass;
use shoal_replica::Mutation;
use shoal_schema::TableMeta;
use shoal_storage::partition::{ClusteringRange, Partition, Row};
use shoal_storage::sstable::format::{Component, Descriptor};
use shoal_storage::sstable::{SSTable, Scanner};
use uuid::Uuid;

/// The file beside uploaded SSTables naming the columns of their ids.
pub const COLUMNS_FILE: &str = "columns";
/// Partitions one shard has in flight to their replicas.
const PARTITIONS_IN_FLIGHT: usize = 32;
/// How long one partition's write to all its replicas may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error("reading {0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: line {1} is not `<column id> <column name>`")]
    Columns(String, usize),
    #[error(transparent)]
    Storage(#[from] shoal_storage::StorageError),
    #[error("writing a partition to its replicas: {0}")]
    Write(#[from] shoal_coordinator::CoordinatorError),
    #[error(transparent)]
    Shard(#[from] shoal_runtime::ShardError),
    #[error(transparent)]
    Helper(#[from] super::HelperError),
}

thread_local! {
    /// The loads under way, one per table at most: the table, what is
    /// loaded, its SSTables (known once listed).
    static LOADS: RefCell<Vec<(Uuid, String, usize)>> = const { RefCell::new(Vec::new()) };
}

/// A load listed in [`LOADS`] while it lives.
struct Listed(Uuid);

impl Listed {
    /// Lists the load of `table`; `None` when one is under way already
    /// (two would read, and remove, the same files).
    fn new(table: &TableMeta) -> Option<Listed> {
        LOADS.with(|loads| {
            let mut loads = loads.borrow_mut();
            if loads.iter().any(|(id, _, _)| *id == table.id) {
                return None;
            }
            loads.push((table.id, format!("Load and stream {}.{}", table.keyspace, table.name), 0));
            Some(Listed(table.id))
        })
    }

    fn set_sstables(&self, sstables: usize) {
        LOADS.with(|loads| loads.borrow_mut().iter_mut().filter(|l| l.0 == self.0).for_each(|l| l.2 = sstables));
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        LOADS.with(|loads| loads.borrow_mut().retain(|(id, _, _)| *id != self.0));
    }
}

/// `GET /stream_manager/`: the loads under way, `[{"description",
/// "sstables"}]`.
pub fn streams() -> Response {
    let listed = LOADS.with(|loads| {
        let loads = loads.borrow();
        loads.iter().map(|(_, d, n)| json!({"description": d, "sstables": n})).collect::<Vec<_>>()
    });
    Response::json(&serde_json::Value::Array(listed))
}

/// What `upload/` holds: its whole SSTables (a TOC written last), and the
/// column ids they were written with, when named.
struct Upload {
    sstables: Vec<Descriptor>,
    columns: Option<BTreeMap<u32, String>>,
}

pub async fn load(keyspace: String, request: &Request) -> Response {
    let Some(table) = request.param("cf").filter(|t| !t.is_empty()) else {
        return Response::error(Status::BadRequest, "sstables/<keyspace> needs ?cf=<table>");
    };
    let schema = shoal_coordinator::schema();
    let Some(meta) = schema.table(&keyspace, table) else {
        return Response::error(Status::BadRequest, format!("no table {keyspace}.{table}"));
    };
    let Some(data_dir) = super::DATA_DIR.get() else {
        return Response::error(Status::InternalError, "the node's storage is not open yet");
    };
    let upload = data_dir.join(&meta.keyspace).join(format!("{}-{}", meta.name, meta.id.simple())).join("upload");
    let Some(listed) = Listed::new(meta) else {
        return Response::error(Status::BadRequest, format!("a refresh of {keyspace}.{table} is under way"));
    };
    match load_upload(meta, upload, &listed).await {
        Ok((sstables, partitions)) => Response::json(&json!({"sstables": sstables, "partitions": partitions})),
        Err(e) => Response::error(Status::InternalError, format!("refresh of {keyspace}.{table}: {e}")),
    }
}

/// Loads the SSTables of `upload` into `meta`'s table: (SSTables,
/// partitions) loaded.
async fn load_upload(meta: &TableMeta, upload: PathBuf, listed: &Listed) -> Result<(usize, u64), LoadError> {
    let dir = upload.clone();
    let found = super::blocking(move || read_upload(&dir)).await??;
    let ids = Arc::new(found.columns.as_ref().map(|columns| id_map(columns, meta)));
    let sstables = Arc::new(found.sstables);
    listed.set_sstables(sstables.len());
    let table = meta.id;
    let shards = shoal_runtime::nr_shards();
    let loaded = {
        let sstables = Arc::clone(&sstables);
        on_every_shard(move |shard| {
            // Shard s reads the SSTables s, s + shards, s + 2 * shards, ...
            let mine: Vec<Descriptor> = sstables.iter().skip(shard).step_by(shards).cloned().collect();
            let ids = Arc::clone(&ids);
            async move { load_on_shard(table, mine, ids.as_ref().as_ref()).await }
        })
        .await?
    };
    let mut partitions = 0;
    for shard in loaded {
        partitions += shard?;
    }
    let done: Vec<Descriptor> = sstables.to_vec();
    super::blocking(move || remove_loaded(&upload, &done)).await??;
    Ok((sstables.len(), partitions))
}

/// Writes every partition of `sstables` to its replicas: the partitions
/// written.
async fn load_on_shard(
    table: Uuid,
    sstables: Vec<Descriptor>,
    ids: Option<&HashMap<u32, u32>>,
) -> Result<u64, LoadError> {
    let all = [ClusteringRange::all()];
    let mut written = 0;
    for descriptor in sstables {
        let sstable = Rc::new(SSTable::open(descriptor, IoClass::Streaming).await?);
        let mut scanner = Scanner::new(sstable, Bound::Unbounded, Bound::Unbounded, IoClass::Streaming).await?;
        let mut batch = Vec::with_capacity(PARTITIONS_IN_FLIGHT);
        loop {
            let next = scanner.next(&all).await?;
            let end = next.is_none();
            if let Some((position, mut partition)) = next {
                if let Some(ids) = ids {
                    renumber_columns(&mut partition, ids);
                }
                batch.push(Mutation { table, position, update: partition, list_ops: Vec::new() });
            }
            if batch.len() == PARTITIONS_IN_FLIGHT || (end && !batch.is_empty()) {
                written += batch.len() as u64;
                let writes = batch
                    .drain(..)
                    .map(|m| shoal_coordinator::mutate(m, ConsistencyLevel::All, WriteType::Simple, WRITE_TIMEOUT));
                join_all(writes).await.into_iter().collect::<Result<Vec<()>, _>>()?;
            }
            if end {
                break;
            }
        }
    }
    Ok(written)
}

/// Old column id → the id its name has in `meta` now.
fn id_map(columns: &BTreeMap<u32, String>, meta: &TableMeta) -> HashMap<u32, u32> {
    let now: HashMap<&str, u32> = meta.columns.iter().map(|c| (c.name.as_str(), c.id)).collect();
    columns.iter().filter_map(|(old, name)| Some((*old, *now.get(name.as_str())?))).collect()
}

fn renumber_columns(partition: &mut Partition, ids: &HashMap<u32, u32>) {
    let renumber = |row: &mut Row| {
        let columns = std::mem::take(&mut row.columns);
        row.columns = columns.into_iter().filter_map(|(id, data)| Some((*ids.get(&id)?, data))).collect();
    };
    renumber(&mut partition.static_row);
    partition.rows.values_mut().for_each(|r| renumber(&mut r.row));
}

/// Lists `upload`: its whole SSTables, in name order, and its column file.
fn read_upload(upload: &Path) -> Result<Upload, LoadError> {
    let fail = |e| LoadError::Io(upload.display().to_string(), e);
    let mut whole = BTreeMap::new();
    let entries = match std::fs::read_dir(upload) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Upload { sstables: Vec::new(), columns: None })
        }
        entries => entries.map_err(fail)?,
    };
    for entry in entries {
        let name = entry.map_err(fail)?.file_name().to_string_lossy().into_owned();
        if let Some((descriptor, Some(Component::Toc))) = Descriptor::parse(upload, &name) {
            whole.insert((descriptor.shard, descriptor.generation), descriptor);
        }
    }
    let columns_path = upload.join(COLUMNS_FILE);
    let columns = match std::fs::read_to_string(&columns_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(LoadError::Io(columns_path.display().to_string(), e)),
        Ok(text) => {
            Some(parse_columns(&text).map_err(|line| LoadError::Columns(columns_path.display().to_string(), line))?)
        }
    };
    Ok(Upload { sstables: whole.into_values().collect(), columns })
}

/// `<id> <name>` lines; the number of the first bad line.
pub fn parse_columns(text: &str) -> Result<BTreeMap<u32, String>, usize> {
    let mut columns = BTreeMap::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (id, name) = line.split_once(' ').ok_or(number + 1)?;
        columns.insert(id.parse().map_err(|_| number + 1)?, name.to_string());
    }
    Ok(columns)
}

/// Removes the loaded SSTables' files (the TOC last, as it marks one
/// whole) and, when none is left, the column file.
fn remove_loaded(upload: &Path, loaded: &[Descriptor]) -> Result<(), LoadError> {
    let remove = |path: PathBuf| match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LoadError::Io(path.display().to_string(), e)),
        _ => Ok(()),
    };
    for descriptor in loaded {
        for component in Component::ALL.into_iter().filter(|c| *c != Component::Toc) {
            remove(descriptor.path(component))?;
        }
        remove(descriptor.path(Component::Toc))?;
    }
    if read_upload(upload)?.sstables.is_empty() {
        remove(upload.join(COLUMNS_FILE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_column_lines_and_names_a_bad_one() {
        let columns = parse_columns("0 k\n2 v\n\n3 a b\n").expect("valid");
        assert_eq!(columns, BTreeMap::from([(0, "k".into()), (2, "v".into()), (3, "a b".into())]));
        assert_eq!(parse_columns("0 k\nx v\n"), Err(2));
        assert_eq!(parse_columns("0k\n"), Err(1));
    }
}
